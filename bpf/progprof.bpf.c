//go:build ignore

/*
 * progprof.bpf.c - time another BPF program from outside, the way
 * `bpftool prog profile` does: fentry on the program stamps the clock,
 * fexit on it adds the difference. The loader points both at the target
 * (AttachTarget, and AttachTo the target's function name) and loads one
 * copy per target, so each has its own map.
 *
 * A program does not nest with itself on one CPU (the kernel's per-program
 * recursion guard skips such a run, and the trampoline's too), so one start
 * stamp per CPU is enough.
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"

LICENSE("GPL");

struct prof {
	u64 started_at;
	u64 runs;
	u64 total_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct prof);
} prof SEC(".maps");

SEC("fentry/target")
int prof_enter(u64 *ctx)
{
	u32 zero = 0;
	struct prof *p = bpf_map_lookup_elem(&prof, &zero);

	if (p)
		p->started_at = bpf_ktime_get_ns();
	return 0;
}

SEC("fexit/target")
int prof_exit(u64 *ctx)
{
	u64 now = bpf_ktime_get_ns();
	u32 zero = 0;
	struct prof *p = bpf_map_lookup_elem(&prof, &zero);

	if (!p || !p->started_at)
		return 0;
	p->runs++;
	p->total_ns += now - p->started_at;
	p->started_at = 0;
	return 0;
}
