/*
 * sched_lane.bpf.h - the lane: where a high-priority task runs when it
 * wakes (docs/design.md, "The lane").
 *
 * An idle CPU first; else a CPU running fair work, preempted: this CPU,
 * prev, HL_LANE_PROBES CPUs of prev's LLC, the one whose fair task has run
 * longest, then HL_LANE_FAR_PROBES CPUs anywhere. The choice is claimed
 * with a compare-and-swap, so two lane wake-ups never take the same
 * victim; the claim lasts until that CPU switches. No wake-up scans every
 * CPU. A lane task that finds neither waits in its LLC's lane queue;
 * lane_llcs says which LLCs have one, for other LLCs' CPUs to take.
 */
#ifndef HOTLANE_SCHED_LANE_BPF_H
#define HOTLANE_SCHED_LANE_BPF_H

#define HL_LANE_PROBES 4	/* CPUs of prev's LLC looked at, besides self and prev */
#define HL_LANE_FAR_PROBES 2	/* CPUs anywhere looked at when those fail */

/* LLCs whose lane queue may hold tasks: bit l % 64. A stale bit costs a
 * look; a missing one is set again by the next insert. */
u64 lane_llcs;

static __always_inline void lane_queue(struct task_struct *p, u32 llc, u64 slice, u64 enq_flags)
{
	hl_dsq_insert(p, HL_DSQ_LANE(llc), slice, enq_flags);
	if (!(lane_llcs & (1ULL << (llc & 63))))
		__sync_fetch_and_or(&lane_llcs, 1ULL << (llc & 63));
}

/* A claim names the lane task and its class in one word, so one
 * compare-and-swap takes the CPU and tells running what will run. */
static __always_inline s64 claim_word(struct task_struct *p, u32 cls)
{
	return ((s64)p->pid << 8) | (cls & 0xff);
}

struct hl_victim {
	s32 cpu;
	u64 started_at;
	u64 before;	/* only fair tasks that started before this */
};

/* Keeps cpu in v if it runs unclaimed fair work that p may preempt and
 * has run longer than v's. */
static __always_inline void consider(struct task_struct *p, s32 cpu, struct hl_victim *v)
{
	struct hl_cpu_shared *s;

	if (!allowed_on(p, cpu))
		return;
	s = shared_of(cpu);
	if (!s || s->state != HL_CPU_FAIR || s->claim || (s64)(s->started_at - v->before) > 0)
		return;
	if (v->cpu < 0 || s->started_at < v->started_at) {
		v->cpu = cpu;
		v->started_at = s->started_at;
	}
}

/* Claims cpu for p; false if another lane wake-up got there first or it
 * no longer runs fair work. */
static __always_inline bool lane_claim(struct task_struct *p, u32 cls, s32 cpu)
{
	struct hl_cpu_shared *s = shared_of(cpu);

	if (!s || __sync_val_compare_and_swap(&s->claim, 0, claim_word(p, cls)) != 0)
		return false;
	if (s->state != HL_CPU_FAIR) {
		s->claim = 0;
		return false;
	}
	return true;
}

/*
 * A CPU running fair work for the lane task p to preempt, claimed, or -1:
 * one whose fair task has run at least min_run. Looks at this CPU, prev,
 * HL_LANE_PROBES CPUs of prev's LLC, and then HL_LANE_FAR_PROBES CPUs
 * anywhere.
 */
__hl_global s32 lane_victim(struct task_struct___arg *task __arg_trusted, u32 cls, s32 prev, u64 min_run)
{
	struct task_struct *p = (void *)task;
	struct hl_victim v = { .cpu = -1, .before = hl_now() - min_run };
	s32 self = bpf_get_smp_processor_id();
	u32 llc = llc_of(prev), n = llc_size[llc], first = llc_first[llc], start, k;

	/* This CPU: preempting it is a local reschedule, no IPI. */
	consider(p, self, &v);
	if (v.cpu == self && lane_claim(p, cls, self))
		return self;
	v.cpu = -1;
	consider(p, prev, &v);
	start = n ? bpf_get_prandom_u32() % n : 0;
	for (k = 0; k < HL_LANE_PROBES && k < n; k++)
		consider(p, llc_cpus[(first + (start + k) % n) & (HL_MAX_CPUS - 1)], &v);
	if (v.cpu >= 0 && lane_claim(p, cls, v.cpu))
		return v.cpu;
	for (k = 0; k < HL_LANE_FAR_PROBES; k++) {
		v.cpu = -1;
		consider(p, bpf_get_prandom_u32() % nr_cpus, &v);
		if (v.cpu >= 0 && lane_claim(p, cls, v.cpu))
			return v.cpu;
	}
	return -1;
}

/*
 * Takes a lane task queued in another LLC, for a CPU whose own LLC has
 * none. Only LLCs lane_llcs names are looked at; a bit found stale is
 * cleared.
 */
__hl_global int lane_steal(u32 own)
{
	u64 mask = lane_llcs & ~(1ULL << (own & 63));
	u32 j;
	int i;

	if (!mask)
		return false;
	for_each_num(i, 1, nr_llcs) {
		j = (own + i) % nr_llcs;
		if (!(mask & (1ULL << (j & 63))))
			continue;
		if (scx_bpf_dsq_nr_queued(HL_DSQ_LANE(j)) > 0) {
			if (hl_dsq_move_to_local(HL_DSQ_LANE(j))) {
				stat_inc(lane_steals);
				return true;
			}
		} else if (nr_llcs <= 64) {
			__sync_fetch_and_and(&lane_llcs, ~(1ULL << (j & 63)));
		}
	}
	return false;
}

/* Does a lane task wait that the fair task running on this CPU, of LLC
 * llc, should make way for? */
static __always_inline bool lane_waits(u32 llc)
{
	return scx_bpf_dsq_nr_queued(HL_DSQ_LANE(llc)) > 0 || (lane_llcs & ~(1ULL << (llc & 63)));
}

#endif /* HOTLANE_SCHED_LANE_BPF_H */
