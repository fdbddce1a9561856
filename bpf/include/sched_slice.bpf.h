/*
 * sched_slice.bpf.h - slices shorter than a tick end on time (docs/design.md,
 * "Slices shorter than a tick").
 *
 * sched_ext ends a slice only at a tick: a task with 0.5 ms left runs to
 * the next one, up to a tick later (4 ms at 250 Hz). The fair class gives
 * such slices to crowds (each of 64 tasks pinned to one CPU took a tick
 * where the bound counts min_slice), at a guard turn's end, and to light
 * tasks. A CPU whose fair task of nice 0 or heavier starts a slice
 * shorter than the tick arms its timer for the slice's end; if that run
 * is still on when it fires, and anything waits for the CPU, the timer
 * ends the slice (a preempting kick of its own CPU, no IPI) and the kernel
 * asks ops.dispatch, where the task keeps the CPU if its deadline says so.
 */
#ifndef HOTLANE_SCHED_SLICE_BPF_H
#define HOTLANE_SCHED_SLICE_BPF_H

/* The kernel's tick, written by the loader (sched.Tick); 0: no timer. */
const volatile u64 tick_ns;

struct hl_slice_timer {
	struct bpf_timer timer;
	u64 run;	/* the run it was armed for: its hl_cpu_shared.started_at */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HL_MAX_CPUS);
	__type(key, u32);
	__type(value, struct hl_slice_timer);
} slice_timers SEC(".maps");

/* The slice of run st->run on CPU *key ended: end it, if it is still on
 * and has something to give way to. Pinned, it fires on that CPU; one
 * that went offline meanwhile had its timer moved, and is left alone. */
static int slice_ended(void *map, u32 *key, struct hl_slice_timer *st)
{
	s32 cpu = bpf_get_smp_processor_id();
	struct hl_cpu_shared *s = shared_of(cpu);
	struct hl_cpu_own *o = own_get();
	u32 llc = llc_of(cpu);

	if (!s || !o || *key != (u32)cpu || s->started_at != st->run || o->lane || s->state == HL_CPU_IDLE)
		return 0;
	if (fair_waits(cpu, llc) || lane_waits(llc)) {
		stat_inc(slice_timer_ends);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	}
	return 0;
}

/* Readies CPU cpu's timer; from ops.init, for every CPU. */
static __always_inline s32 slice_timer_init(s32 cpu)
{
	u32 key = cpu;
	struct hl_slice_timer *st = bpf_map_lookup_elem(&slice_timers, &key);
	s32 err;

	if (!st)
		return -2; /* ENOENT */
	err = bpf_timer_init(&st->timer, &slice_timers, 1 /* CLOCK_MONOTONIC */);
	if (!err)
		err = bpf_timer_set_callback(&st->timer, slice_ended);
	return err;
}

/*
 * Fair task p's run starts (or goes on, kept) on cpu with slice ns, at
 * s->started_at: the timer ends that slice if it is shorter than the tick
 * would.
 * Not a task lighter than nice 0 (p->scx.weight, nice and class; not its
 * cgroup's): what it runs past its slice it owes as debt, within its
 * queue's budget. With the timer on light tasks too, a nice-19 spinner
 * beside a nice-0 one got 0.92-1.04x its weight's share against
 * 1.12-1.57x without (EEVDF 0.98-1.05x), but the one run of the whole
 * suite with it (c4897ed-2b749e3) hung the guest at SysRq-S, RCU stalled
 * on pid 42 (khugepaged, nice 19, in other boots of that guest), which
 * never ran again; not understood, so not kept.
 */
static __always_inline void slice_timer_arm(struct hl_cpu_shared *s, s32 cpu, struct task_struct *p, u64 slice)
{
	u32 key = cpu;
	struct hl_slice_timer *st;

	if (slice >= tick_ns || p->scx.weight < HL_WEIGHT_NICE0 || !(st = bpf_map_lookup_elem(&slice_timers, &key)))
		return;
	st->run = s->started_at;
	bpf_timer_start(&st->timer, slice, BPF_F_TIMER_CPU_PIN);
}

#endif /* HOTLANE_SCHED_SLICE_BPF_H */
