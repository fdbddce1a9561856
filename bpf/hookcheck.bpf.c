//go:build ignore

// The Go toolchain must not see this file: a .c file in a package without cgo
// is a build error. bpf2go compiles it; see gen.go.

/*
 * hookcheck.bpf.c - one trivial program per hook family hotlane relies on.
 *
 * Each program only bumps a global counter, so a test can tell, hook by hook,
 * whether the build pipeline (vmlinux.h, our header, clang flags, bpf2go) and
 * the running kernel agree: the object loads, the program attaches, and the
 * kernel really calls it. The loader's hook probing and the VM tests reuse it
 * for the hooks that cannot run on the build host (fentry, kprobe).
 *
 * Counters are plain globals (.bss): cilium/ebpf exposes them as
 * HookcheckVariables, and atomic adds keep them exact across CPUs.
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"

LICENSE("GPL");

/*
 * Thread-group id of the process under test, set before loading (.rodata, so
 * the verifier sees a constant). The sched_switch programs count switches to
 * its threads separately, which checks that they read the right field of the
 * right task rather than just running.
 */
const volatile __u32 own_tgid;

__u64 tp_btf_hits;
__u64 tp_btf_own_hits;
__u64 raw_tp_hits;
__u64 raw_tp_own_hits;
__u64 tracepoint_hits;
__u64 fentry_hits;
__u64 kprobe_hits;
__u64 xdp_hits;
__u64 xdp_last_len;

/*
 * sched_switch's TP_PROTO is (bool preempt, struct task_struct *prev,
 * struct task_struct *next, unsigned int prev_state): next is ctx[2].
 */

SEC("tp_btf/sched_switch")
int tp_btf_switch(u64 *ctx)
{
	/* BTF-typed argument: the verifier lets us dereference it directly. */
	struct task_struct *next = (struct task_struct *)ctx[2];

	__sync_fetch_and_add(&tp_btf_hits, 1);
	if (own_tgid && next->tgid == own_tgid)
		__sync_fetch_and_add(&tp_btf_own_hits, 1);
	return 0;
}

SEC("raw_tp/sched_switch")
int raw_tp_switch(u64 *ctx)
{
	/* Untyped argument: only a CO-RE probe read may look through it. */
	struct task_struct *next = (struct task_struct *)ctx[2];

	__sync_fetch_and_add(&raw_tp_hits, 1);
	if (own_tgid && CORE_READ(next, tgid) == own_tgid)
		__sync_fetch_and_add(&raw_tp_own_hits, 1);
	return 0;
}

SEC("tracepoint/sched/sched_switch")
int tp_switch(struct trace_event_raw_sched_switch *ctx)
{
	__sync_fetch_and_add(&tracepoint_hits, 1);
	return 0;
}

/*
 * hrtimer_nanosleep backs nanosleep(2) and clock_nanosleep(2) for the common
 * clocks, so a test can trigger it at will. It is a global, out-of-line
 * function with a BTF FUNC record (i.e. ftrace-able) on both the build host's
 * 6.18 kernel and the 7.3 sched_ext VM kernel.
 */
SEC("fentry/hrtimer_nanosleep")
int fentry_nanosleep(u64 *ctx)
{
	__sync_fetch_and_add(&fentry_hits, 1);
	return 0;
}

SEC("kprobe/hrtimer_nanosleep")
int kprobe_nanosleep(struct pt_regs *ctx)
{
	__sync_fetch_and_add(&kprobe_hits, 1);
	return 0;
}

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	__sync_fetch_and_add(&xdp_hits, 1);
	xdp_last_len = ctx->data_end - ctx->data;
	return XDP_PASS;
}
