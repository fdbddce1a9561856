/*
 * runqlat_callbacks.bpf.h - the tracer's view of the sched_ext scheduler
 * itself: each CPU's time in its callbacks, and when sched_ext bypassed it.
 *
 * Part of runqlat.bpf.c; explanations (runqlat_explain.bpf.h) report both
 * beside the parts of a wait. Nothing here runs unless the tracer attaches
 * it (verify: TracerConfig.ExtCallbacks, and Explain on a kernel with
 * sched_ext). What the explanation reads:
 *   ext_cb_time_here(), ext_cb_time_on(cpu) - a CPU's callback time
 *   bypass_watched and bypass_during(at, now)
 *
 * Include it after vmlinux.h and hotlane_bpf.h; it includes nothing itself.
 */
#ifndef HOTLANE_RUNQLAT_CALLBACKS_BPF_H
#define HOTLANE_RUNQLAT_CALLBACKS_BPF_H

/* A CPU's time in sched_ext callbacks: all of it, and the start of the
 * one running now (0: none). */
struct ext_cb_time {
	u64 ns;
	u64 entry;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct ext_cb_time);
} ext_cb_times SEC(".maps");

/* This CPU's callback times. */
static __always_inline const struct ext_cb_time *ext_cb_time_here(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&ext_cb_times, &zero);
}

/* CPU cpu's callback times, which may be another CPU's; NULL if cpu is
 * not one (never, for a CPU a task ran on). */
static __always_inline const struct ext_cb_time *ext_cb_time_on(u32 cpu)
{
	u32 zero = 0;

	return bpf_map_lookup_percpu_elem(&ext_cb_times, &zero, cpu);
}

/*
 * fentry/fexit on each callback of the sched_ext scheduler that runs (its
 * struct_ops programs), loaded by the tracer once per callback with the
 * callback as the target. One start stamp per CPU, cleared at the exit: a
 * sleepable callback (ops.init_task) may return on another CPU, and a
 * stamp that outlived it must not hold the next one back. A callback
 * nested in it from an interrupt (ops.tick) is counted; the outer one then
 * is not.
 */
SEC("fentry/hl_ext_callback")
int rq_ext_cb_enter(u64 *ctx)
{
	u32 zero = 0;
	struct ext_cb_time *t = bpf_map_lookup_elem(&ext_cb_times, &zero);

	if (t)
		t->entry = bpf_ktime_get_ns();
	return 0;
}

SEC("fexit/hl_ext_callback")
int rq_ext_cb_exit(u64 *ctx)
{
	u32 zero = 0;
	struct ext_cb_time *t = bpf_map_lookup_elem(&ext_cb_times, &zero);

	if (t && t->entry) {
		t->ns += bpf_ktime_get_ns() - t->entry;
		t->entry = 0;
	}
	return 0;
}

/*
 * sched_ext's bypass mode: while the kernel sets the BPF scheduler aside
 * (enabling or disabling it, suspending, or after a stall) every task runs
 * from a plain FIFO with a fixed slice, whatever the policy says. The
 * kernel counts entering it and the time spent in it as events, which it
 * traces (sched_ext_event, 6.17 and later); the tracer watches them, when
 * it can, so that a violation whose wait overlapped a bypass says so.
 * bypass_watched is set by the tracer once that hook is attached.
 */
volatile bool bypass_watched;
u64 bypass_began;	/* the latest bypass's start; 0: none seen */
u64 bypass_ended;	/* its end; below bypass_began while it lasts */

/* Whether sched_ext bypassed the BPF scheduler at some time from at to
 * now: the latest bypass began before now and lasts, or ended after at. */
static __always_inline bool bypass_during(u64 at, u64 now)
{
	u64 began = bypass_began, ended = bypass_ended;

	return began && began < now && (ended < began || ended > at);
}

/*
 * An event sched_ext counted, by its name in the kernel's enum of event
 * counters. Only the bypass ones matter: "SCX_EV_BYPASS_ACTIVATE" at the
 * start, "SCX_EV_BYPASS_DURATION" with the time it lasted at the end.
 * The end fixes the start too, for a bypass that began before the tracer
 * attached. The other events differ from those within the first 8 bytes
 * or so, which is all most of them cost.
 */
static __always_inline void ext_event(const char *name, s64 delta)
{
	static const char prefix[] = "SCX_EV_BYPASS_";
	char s[16];
	u64 now;

	if (bpf_probe_read_kernel(s, sizeof(s), name))
		return;
#pragma unroll
	for (int i = 0; i < sizeof(prefix) - 1; i++)
		if (s[i] != prefix[i])
			return;
	now = bpf_ktime_get_ns();
	if (s[14] == 'A' && s[15] == 'C') {
		bypass_began = now;
	} else if (s[14] == 'D' && s[15] == 'U') {
		bypass_ended = now;
		if (delta > 0 && delta < now)
			bypass_began = now - delta;
	}
}

/* TP_PROTO(const char *name, __s64 delta), in both hook families. */
SEC("tp_btf/sched_ext_event")
int rq_ext_event_btf(u64 *ctx)
{
	ext_event((const char *)ctx[0], (s64)ctx[1]);
	return 0;
}

SEC("raw_tp/sched_ext_event")
int rq_ext_event_raw(u64 *ctx)
{
	ext_event((const char *)ctx[0], (s64)ctx[1]);
	return 0;
}

#endif /* HOTLANE_RUNQLAT_CALLBACKS_BPF_H */
