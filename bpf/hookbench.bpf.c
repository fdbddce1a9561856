//go:build ignore

/*
 * hookbench.bpf.c - one trivial body, attached in turn to every kind of hook
 * on the same kernel event, so that what each hook type costs is the only
 * difference between runs (`hotlane bench hooks`).
 *
 * The event is the getpid(2) system call made by one thread the bench
 * drives in a tight loop: the function that does its work,
 * __task_pid_nr_ns, for fentry, fexit, kprobe, kretprobe and kprobe.multi
 * (the syscall's own entry, __x64_sys_getpid, has no BTF, so fentry cannot
 * take it); the raw_syscalls:sys_enter tracepoint for
 * tp_btf, raw_tp and the classic tracepoint (there is no per-syscall raw
 * tracepoint); a function of the bench's own binary for the uprobe.
 *
 * The body counts the calls of the driving thread and stamps the time, into
 * a per-CPU map: a lookup, an add and a clock read, like the smallest
 * useful tracer. The driving thread's id is a global the bench sets, so the
 * count is exact whatever else the machine runs.
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"

LICENSE("GPL");

/* The system call number of getpid on this architecture (set at load). */
const volatile long getpid_nr;

/* The thread whose calls count (set before each hook's rounds). */
u32 driver_tid;

struct hit {
	u64 count;
	u64 last_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct hit);
} hits SEC(".maps");

static __always_inline int count_hit(void)
{
	struct hit *h;
	u32 zero = 0;

	if ((u32)bpf_get_current_pid_tgid() != driver_tid)
		return 0;
	h = bpf_map_lookup_elem(&hits, &zero);
	if (h) {
		h->count++;
		h->last_ns = bpf_ktime_get_ns();
	}
	return 0;
}

/* getpid's work: task_tgid_vnr(current), which is this call out of line. */

SEC("fentry/__task_pid_nr_ns")
int hb_fentry(u64 *ctx)
{
	return count_hit();
}

SEC("fexit/__task_pid_nr_ns")
int hb_fexit(u64 *ctx)
{
	return count_hit();
}

SEC("kprobe/__task_pid_nr_ns")
int hb_kprobe(struct pt_regs *ctx)
{
	return count_hit();
}

SEC("kretprobe/__task_pid_nr_ns")
int hb_kretprobe(struct pt_regs *ctx)
{
	return count_hit();
}

SEC("kprobe.multi/__task_pid_nr_ns")
int hb_kprobe_multi(struct pt_regs *ctx)
{
	return count_hit();
}

/*
 * sys_enter fires for every system call of every task: the id test keeps
 * the count to getpid. TP_PROTO(struct pt_regs *regs, long id).
 */

SEC("tp_btf/sys_enter")
int hb_tp_btf(u64 *ctx)
{
	if ((long)ctx[1] != getpid_nr)
		return 0;
	return count_hit();
}

SEC("raw_tp/sys_enter")
int hb_raw_tp(u64 *ctx)
{
	if ((long)ctx[1] != getpid_nr)
		return 0;
	return count_hit();
}

SEC("tracepoint/raw_syscalls/sys_enter")
int hb_tracepoint(struct trace_event_raw_sys_enter *ctx)
{
	if (ctx->id != getpid_nr)
		return 0;
	return count_hit();
}

/* The bench's own function that makes the call; attached by symbol. */
SEC("uprobe")
int hb_uprobe(struct pt_regs *ctx)
{
	return count_hit();
}
