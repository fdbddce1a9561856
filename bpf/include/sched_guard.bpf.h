/*
 * sched_guard.bpf.h - the starvation guard: a reservation for the fair
 * side on every CPU the lane saturates (docs/design.md, "The starvation
 * guard").
 *
 * A CPU that has given the lane starvation_ns of CPU time since it last
 * served the fair side, while fair tasks it may run waited, serves the fair
 * side for the next starvation_ns / 2 (a turn, each task in it shielded
 * from lane preemption): a budget, not a count of tasks, and no walk of
 * any queue. Only lane time counts. The bound this gives is
 * sched.Bound (sched/bound.go), which the loader prints.
 */
#ifndef HOTLANE_SCHED_GUARD_BPF_H
#define HOTLANE_SCHED_GUARD_BPF_H

/* Lane time on this CPU since it last served the fair side or found
 * nothing waiting, the running lane task's so far included. */
static __always_inline u64 lane_owed(struct hl_cpu_own *o, struct hl_cpu_shared *s, u64 now)
{
	return o->lane_ns + (o->lane && s->state == HL_CPU_LANE ? now - s->started_at : 0);
}

/* This CPU served the fair side, or found nothing waiting: it owes it
 * nothing, and a lane task running here counts from now. */
static __always_inline void fair_served(struct hl_cpu_own *o, struct hl_cpu_shared *s, u64 now)
{
	o->lane_ns = 0;
	if (o->lane && s->state == HL_CPU_LANE)
		s->started_at = now;
}

/* Is a guard turn under way, or due now that the lane would take this
 * CPU again? */
static __always_inline bool guard_due(struct hl_cpu_own *o, struct hl_cpu_shared *s, u64 now, bool lane_next)
{
	return (s64)(now - o->guard_until) < 0 || (lane_next && lane_owed(o, s, now) >= starvation_ns);
}

/* A fair task was moved here for a guard turn: it runs shielded, and a
 * new turn starts its budget. */
static __always_inline void guard_turn(struct hl_cpu_own *o, struct hl_cpu_shared *s, u64 now)
{
	o->guard_turn = 1;
	if ((s64)(now - o->guard_until) >= 0) {
		o->guard_until = now + starvation_ns / 2;
		stat_inc(guard_dispatches);
	}
	fair_served(o, s, now);
}

#endif /* HOTLANE_SCHED_GUARD_BPF_H */
