/*
 * sched_fair.bpf.h - the fair class: every task not in the lane, by EEVDF's
 * rules per LLC (docs/design.md, "The fair class"): vruntime charged by
 * weight (class x nice x cgroup cpu.weight), a clock per LLC, lag kept
 * across sleep and bounded, queues in deadline order, slices that shrink
 * with the queue and with weight, and wake-up preemption of a later
 * deadline.
 *
 * Frames: a vruntime is relative to the clock of LLC t->llc. A task that
 * moves to another LLC keeps its distance from the clock (rebase()).
 */
#ifndef HOTLANE_SCHED_FAIR_BPF_H
#define HOTLANE_SCHED_FAIR_BPF_H

/* The kernel's nice-to-weight ratio (1.25 per step), nice -20..19, nice 0
 * = 1024; written by the loader. */
const volatile u32 nice_weight[40];
#define HL_WEIGHT_SCALE 1024

/* Weight of p as its class, nice level and cgroup give it (1024: nice 0
 * in a weight-100 class and cgroup). */
static __always_inline u64 task_weight(struct task_struct *p, struct hl_task *t,
				       const volatile struct hl_class *c)
{
	u32 nice = (u32)(p->static_prio - 100);
	u64 w = nice < 40 ? nice_weight[nice] : HL_WEIGHT_SCALE;
	u32 *cg;

	if (p->policy == 5 /* SCHED_IDLE */)
		w = 3;
	w = w * (c->weight ?: 1) / HL_WEIGHT_NICE0;
	cg = t && t->cgroup_id ? bpf_map_lookup_elem(&cgroup_weights, &t->cgroup_id) : NULL;
	if (cg)
		w = w * *cg / HL_WEIGHT_NICE0;
	return w ?: 1;
}

/* Scales a time by the task's weight into vruntime. */
static __always_inline u64 to_vtime(u64 ns, u64 weight)
{
	return ns * HL_WEIGHT_SCALE / weight;
}

/*
 * The slice a fair task gets: the class's, shortened for weights below
 * nice 0 and when more tasks wait than the queue has CPUs, so that a
 * round of the waiting tasks takes about one class slice; never below
 * min_slice.
 */
static __always_inline u64 fair_slice(const volatile struct hl_class *c, u64 weight, u64 dsq, u32 cpus)
{
	u64 slice = c->slice_ns;
	s32 waiting = scx_bpf_dsq_nr_queued(dsq);

	if (weight < HL_WEIGHT_SCALE)
		slice = slice * weight / HL_WEIGHT_SCALE;
	if (cpus && waiting > (s32)cpus)
		slice = slice * cpus / waiting;
	return slice > min_slice_ns ? slice : min_slice_ns;
}

/* The request a deadline is measured with: its usual burst, within
 * [min_slice, slice]. */
static __always_inline u64 fair_deadline(struct hl_task *t, u64 weight, u64 slice)
{
	u64 req = t->yielded ? slice : t->burst;

	if (req < min_slice_ns)
		req = min_slice_ns;
	if (req > slice)
		req = slice;
	return t->vruntime + to_vtime(req, weight);
}

static __always_inline u64 llc_clock(u32 llc)
{
	struct hl_llc *l = llc_get(llc);

	return l ? l->vclock : 0;
}

/* Moves t's vruntime into the frame of llc, at the same distance from
 * its clock. */
static __always_inline void rebase(struct hl_task *t, u32 llc)
{
	if (t->llc == llc)
		return;
	t->vruntime = t->vruntime - llc_clock(t->llc) + llc_clock(llc);
	t->llc = llc;
}

/* A task wakes at its lag from the clock of the LLC it wakes in. */
static __always_inline void fair_wake(struct hl_task *t, u32 llc)
{
	t->llc = llc;
	t->vruntime = llc_clock(llc) - t->lag;
	t->ran = 0;
}

/*
 * A task goes to sleep: its lag is kept, at most one request ahead of the
 * clock and two slices behind it, and its burst joins the running average
 * its next deadlines are measured with.
 */
static __always_inline void fair_sleep(struct task_struct *p, struct hl_task *t,
				       const volatile struct hl_class *c)
{
	u64 w = task_weight(p, t, c);
	s64 lag = (s64)(llc_clock(t->llc) - t->vruntime);
	s64 ahead = to_vtime(t->burst > min_slice_ns ? t->burst : min_slice_ns, w);
	s64 behind = -2 * (s64)to_vtime(c->slice_ns, w);

	t->lag = lag > ahead ? ahead : lag < behind ? behind : lag;
	t->burst = (3 * t->burst + t->ran) / 4;
	t->ran = 0;
}

/* The clock is where the last fair task to start on its LLC stood. */
static __always_inline void fair_started(struct hl_task *t, u32 llc)
{
	struct hl_llc *l;

	rebase(t, llc);
	l = llc_get(llc);
	if (l && l->vclock != t->vruntime)
		l->vclock = t->vruntime;
}

/* Charges the CPU time a fair task used. */
static __always_inline void fair_charge(struct task_struct *p, struct hl_task *t,
					const volatile struct hl_class *c, u64 used)
{
	t->vruntime += to_vtime(used, task_weight(p, t, c));
	t->ran += used;
}

#define HL_FAIR_PROBES 2	/* CPUs of the LLC a fair wake-up looks at, besides its own */

/*
 * Which CPU should a fair task with deadline dl, queued for cpu's LLC,
 * preempt, if any? A CPU running a fair task with a later deadline that
 * has run min_slice (without that floor, two wakers would take turns
 * preempting each other): the task's own CPU, else the latest deadline
 * among a few CPUs of the LLC from a random place. EEVDF preempts on the
 * woken task's runqueue; here any CPU of the LLC may take it from the
 * shared queue, so one that should is made to.
 */
static __always_inline s32 fair_victim(struct task_struct *p, s32 cpu, u32 llc, u64 dl)
{
	u32 n = llc_size[llc], first = llc_first[llc], start, k;
	u64 now = bpf_ktime_get_ns(), latest = dl;
	struct hl_cpu_shared *s;
	s32 victim = -1, c;

	for (k = 0; k <= HL_FAIR_PROBES && k <= n; k++) {
		if (k == 0) {
			c = cpu;
		} else {
			start = bpf_get_prandom_u32() % n;
			c = llc_cpus[(first + start) & (HL_MAX_CPUS - 1)];
		}
		s = shared_of(c);
		if (!s || s->state != HL_CPU_FAIR || now - s->started_at < min_slice_ns ||
		    (s64)(s->deadline - latest) <= 0 || !allowed_on(p, c))
			continue;
		victim = c;
		latest = s->deadline;
		if (k == 0)
			break;
	}
	return victim;
}

/*
 * Queues a fair task: on its CPU's own queue if it may run nowhere else,
 * else on its LLC's, in deadline order; then makes a CPU take it: the one
 * it woke on if it preempts the task there, else an idle one.
 */
static __always_inline void fair_enqueue(struct task_struct *p, struct hl_task *t,
					 const volatile struct hl_class *c, u64 enq_flags)
{
	s32 cpu = scx_bpf_task_cpu(p), target, idle;
	bool pinned = p->nr_cpus_allowed == 1;
	u64 w, slice, dl, dsq;
	u32 llc;

	if (!allowed_on(p, cpu))
		cpu = bpf_cpumask_first(p->cpus_ptr);
	llc = llc_of(cpu);
	dsq = pinned ? HL_DSQ_PINNED(cpu) : HL_DSQ_FAIR(llc);
	w = task_weight(p, t, c);
	slice = fair_slice(c, w, dsq, pinned ? 1 : llc_size[llc]);
	if (t) {
		rebase(t, llc);
		dl = fair_deadline(t, w, slice);
		t->yielded = 0;
	} else {
		dl = llc_clock(llc); /* no context: queued as if at the clock */
	}
	hl_dsq_insert_vtime(p, dsq, slice, dl, enq_flags);

	if (enq_flags & HL_ENQ_WAKEUP) {
		target = fair_victim(p, cpu, llc, dl);
		if (target >= 0) {
			scx_bpf_kick_cpu(target, HL_KICK_PREEMPT);
			stat_inc(fair_preempts);
			return;
		}
	}
	/* A queued task must not wait while a CPU it may use idles. */
	idle = pinned ? (scx_bpf_test_and_clear_cpu_idle(cpu) ? cpu : -1) :
			scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (idle >= 0) {
		scx_bpf_kick_cpu(idle, HL_KICK_IDLE);
		stat_inc(idle_kicks);
	}
}

/*
 * sched_yield(): the task gives up its CPU and its place, as EEVDF does by
 * moving its deadline on: it is queued next with a whole slice as its
 * request, not its usual burst. Left to the kernel, a yield only ends the
 * slice, and the yielder, its deadline unchanged, is picked again at once
 * while the task it yields to (a mutex holder) waits. Its vruntime is
 * left alone: yielding often must not pile up debt.
 */
static __always_inline void fair_yield(struct hl_task *t)
{
	t->yielded = 1;
}

/* The deadline at the head of a queue, if it holds a task. */
static __always_inline bool dsq_head_deadline(u64 dsq, u64 *dl)
{
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	bool found = false;

	if (bpf_iter_scx_dsq_new(&it, dsq, 0) == 0) {
		p = bpf_iter_scx_dsq_next(&it);
		if (p) {
			*dl = p->scx.dsq_vtime;
			found = true;
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	return found;
}

/*
 * Moves the fair task with the earliest deadline this CPU may run into
 * its local queue: from its own queue or its LLC's, whichever heads with
 * the earlier deadline (both are in the LLC's frame).
 */
static __always_inline bool fair_take(s32 cpu, u32 llc)
{
	u64 pinned = HL_DSQ_PINNED(cpu), shared = HL_DSQ_FAIR(llc), dp, ds;

	if (scx_bpf_dsq_nr_queued(pinned) > 0 && dsq_head_deadline(pinned, &dp) &&
	    (!dsq_head_deadline(shared, &ds) || (s64)(dp - ds) <= 0) && hl_dsq_move_to_local(pinned))
		return true;
	if (hl_dsq_move_to_local(shared))
		return true;
	return hl_dsq_move_to_local(pinned);
}

/* Do fair tasks wait that this CPU may be able to run? */
static __always_inline bool fair_waits(s32 cpu, u32 llc)
{
	return scx_bpf_dsq_nr_queued(HL_DSQ_FAIR(llc)) > 0 || scx_bpf_dsq_nr_queued(HL_DSQ_PINNED(cpu)) > 0;
}

/*
 * A CPU with nothing of its own to run takes a fair task from another
 * LLC's queue: one of its node first, then any. Only an idle CPU steals,
 * so tasks keep their caches while their LLC keeps up.
 */
static __always_inline bool fair_steal(u32 llc)
{
	u32 node = llc_node[llc], j;
	int i, pass;

	for (pass = 0; pass < 2; pass++) {
		for_each_num(i, 1, nr_llcs) {
			j = (llc + i) % nr_llcs;
			if ((llc_node[j & (HL_MAX_LLCS - 1)] == node) != (pass == 0))
				continue;
			if (scx_bpf_dsq_nr_queued(HL_DSQ_FAIR(j)) > 0 && hl_dsq_move_to_local(HL_DSQ_FAIR(j))) {
				stat_inc(fair_steals);
				return true;
			}
		}
	}
	return false;
}

#endif /* HOTLANE_SCHED_FAIR_BPF_H */
