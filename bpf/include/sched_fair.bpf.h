/*
 * sched_fair.bpf.h - the fair class: every task not in the lane, by EEVDF's
 * rules per queue (docs/design.md, "The fair class"): vruntime charged by
 * weight (class x nice x cgroup cpu.weight), a clock per queue, lag kept
 * across sleep and bounded, queues in deadline order, slices that shrink
 * with the queue and with weight, and wake-up preemption of a later
 * deadline.
 *
 * Frames: a vruntime is relative to the clock of the queue t->frame (an
 * LLC's, or a CPU's own). A task that moves to another queue keeps its
 * distance from the clock (rebase()).
 */
#ifndef HOTLANE_SCHED_FAIR_BPF_H
#define HOTLANE_SCHED_FAIR_BPF_H

/* The kernel's nice-to-weight ratio (1.25 per step), nice -20..19, nice 0
 * = 1024; written by the loader. */
const volatile u32 nice_weight[40];
#define HL_WEIGHT_SCALE 1024

/* Weight of p as its class, nice level and cgroup give it (1024: nice 0
 * in a weight-100 class and cgroup). */
__hl_global u64 task_weight(struct task_struct___arg *task __arg_trusted, struct hl_task *t, u32 class_weight)
{
	struct task_struct *p = (void *)task;
	u32 nice = (u32)(p->static_prio - 100);
	u64 w = nice < 40 ? nice_weight[nice] : HL_WEIGHT_SCALE;
	u32 *cg;

	if (p->policy == 5 /* SCHED_IDLE */)
		w = 3;
	w = w * (class_weight ?: 1) / HL_WEIGHT_NICE0;
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
 * min_slice. sched_ext ends a slice only at a tick, so a run lasts up to
 * a tick past its slice, which the bound counts (sched.Bound). A BPF
 * timer that ended short slices on time halved perf bench sched
 * messaging's throughput on 8 vCPUs (docs/results.md, 2026-11-27).
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

/* The request a deadline is measured with, as vtime: its usual burst,
 * within [min_slice, slice]. */
static __always_inline u64 fair_request(struct hl_task *t, u64 weight, u64 slice)
{
	u64 req = t->yielded ? slice : t->burst;

	if (req < min_slice_ns)
		req = min_slice_ns;
	if (req > slice)
		req = slice;
	return to_vtime(req, weight);
}

static __always_inline u64 fair_deadline(struct hl_task *t, u64 weight, u64 slice)
{
	return t->vruntime + fair_request(t, weight, slice);
}

static __always_inline u64 frame_clock(u32 f)
{
	struct hl_frame *fr = bpf_map_lookup_elem(&frames, &f);

	return fr ? fr->vclock : 0;
}

/* Moves t's vruntime into frame f, at the same distance from its clock. */
static __always_inline void rebase(struct hl_task *t, u32 f)
{
	if (t->frame == f)
		return;
	t->vruntime = t->vruntime - frame_clock(t->frame) + frame_clock(f);
	t->frame = f;
}

/*
 * A task wakes at its lag from the clock of the queue it wakes into. Debt
 * (a lag below zero: it ran ahead of its share) is paid off as the clock
 * of the queue it slept from moved on meanwhile, as EEVDF keeps such a
 * task queued until it is due (delayed dequeue): a nice-19 kthread that
 * ran to a tick owes 273 ms of vruntime, and woke seconds later as far
 * behind, until the watchdog ejected the scheduler (khugepaged on 16
 * CPUs). Credit is kept whole.
 */
static __always_inline void fair_wake(struct task_struct *p, struct hl_task *t)
{
	s64 lag = t->lag, paid;

	if (lag < 0) {
		paid = (s64)(frame_clock(t->frame) - t->slept_clock);
		lag = paid >= -lag ? 0 : lag + (paid > 0 ? paid : 0);
	}
	t->frame = frame_of(scx_bpf_task_cpu(p), p->nr_cpus_allowed == 1);
	t->vruntime = frame_clock(t->frame) - lag;
	t->ran = 0;
}

/*
 * Debt a light task may carry, as others' CPU time: what the lightest one
 * (nice 19) owes for a run to the tick past its shortest slice ((tick +
 * min_slice) x 1024/15, 307 ms at 250 Hz); written by the loader, which
 * also keeps it within a fraction of the watchdog timeout.
 */
const volatile u64 debt_budget_ns = 307ULL * 1000 * 1000;

/*
 * How far a task's vruntime may stand from its clock: at most one request
 * ahead of it (credit), and behind it (debt) two of its slices (a nice-0
 * task's two for a lighter one) or, for a light task, the debt budget
 * shared among the tasks of its queue, whichever allows more.
 *
 * Debt is paid by every other task of the queue running as long, so n
 * others make it a wait n times as long. The kernel ejects a scheduler
 * that leaves any task waiting for its watchdog timeout, which EEVDF need
 * not fear: the debt of a nice-19 task that ran a tick (273 ms of
 * vruntime) kept khugepaged waiting 5 s among a 16-CPU guest's crowds,
 * and the watchdog fired. Held to two nice-0 slices, a nice-19 spinner
 * beside one nice-0 spinner got 5.8x its weight's share (counted on its
 * process's busiest thread, often the Go runtime's; docs/results.md,
 * 2026-11-26); the budget split
 * by the queue keeps its whole debt while few wait and its wait within
 * the budget (ForWeight in sched/bound.go) however many do.
 */
__hl_global s64 clamp_lag(u64 burst, u64 slice, u64 w, s64 lag, s32 waiting)
{
	s64 ahead = to_vtime(burst > min_slice_ns ? burst : min_slice_ns, w);
	s64 behind = 2 * (s64)to_vtime(slice, w > HL_WEIGHT_SCALE ? w : HL_WEIGHT_SCALE);
	s64 share = (s64)(debt_budget_ns / (waiting > 1 ? waiting : 1));

	if (w < HL_WEIGHT_SCALE && share > behind)
		behind = share;
	return lag > ahead ? ahead : lag < -behind ? -behind : lag;
}

/*
 * A task goes to sleep: its lag is kept, bounded (as if alone: it is
 * bounded by its queue when it is queued again), and its burst joins the
 * running average its next deadlines are measured with.
 */
static __always_inline void fair_sleep(struct task_struct *p, struct hl_task *t,
				       const volatile struct hl_class *c)
{
	t->slept_clock = frame_clock(t->frame);
	t->lag = clamp_lag(t->burst, c->slice_ns, task_weight(HL_TASK(p), t, c->weight), (s64)(t->slept_clock - t->vruntime), 1);
	t->burst = (3 * t->burst + t->ran) / 4;
	t->ran = 0;
}

/*
 * Every task queued or started stands within the same bounds of its
 * queue's clock as a sleeper wakes in: one request ahead, two class
 * slices behind. A task that came from another queue, or ran far ahead
 * while alone, would otherwise wait for every task of its queue to catch
 * up with it: threads newly pinned to one CPU starved for 6 s that way,
 * and a spinner 45 s of vruntime ahead of its queue, until the watchdog
 * ejected the scheduler. The bound is the class's slice (clamp_lag), not
 * the shorter one a crowded queue hands out.
 */
static __always_inline void fair_bound(struct hl_task *t, const volatile struct hl_class *c, u64 w, u32 f, u64 dsq)
{
	u64 clock = frame_clock(f);

	t->vruntime = clock - clamp_lag(t->burst, c->slice_ns, w, (s64)(clock - t->vruntime), scx_bpf_dsq_nr_queued(dsq));
}

/*
 * A queue's clock is the furthest a task stood when it started from it
 * (held to its bounds first). Tasks start in deadline order, so the clock
 * is where the head of the queue stands. It never moves back: a task
 * that started with credit (behind the clock) set it back by that credit,
 * the tasks queued after it were held to the lower clock, and a task
 * among 64 spinners pinned to one CPU waited 6 s for the queue's front to
 * reach its deadline. A clock at the largest vruntime that ever
 * ran put every wake-up behind every waiting CPU hog (ping-pong wakers did
 * 0.07-0.6x EEVDF's work beside them), and ran away from the queue so far
 * that every task was held at its bound and weights stopped counting; one
 * clock for an LLC's shared queue and its CPUs' own queues spread a CPU's
 * queue over 80 ms of vruntime, which its last tasks waited 5 s to reach.
 */
static __always_inline void fair_started(struct hl_task *t, const volatile struct hl_class *c, u64 w, u32 f, u64 dsq)
{
	struct hl_frame *fr;

	rebase(t, f);
	fair_bound(t, c, w, f, dsq);
	fr = bpf_map_lookup_elem(&frames, &f);
	if (fr && (s64)(t->vruntime - fr->vclock) > 0)
		fr->vclock = t->vruntime;
}

/*
 * A fair task starts on cpu: it is held to its queue's bounds, moves that
 * queue's clock on, and runs to the deadline returned, measured from that
 * clock (for wake-up preemption, in hl_cpu_shared.deadline). One that the
 * kernel stopped and restarted where it ran, for a change made from
 * another CPU (its nice value, affinity or cgroup), starts no run: moving
 * the clock to it would cut the credit of the tasks waiting behind it to
 * one request at each change, and a spinner reniced every 10 ms took an
 * equal share beside a heavier one (TestGuestFairRemoteReniceCharges-
 * TheTasksCPU).
 */
__hl_global s64 fair_start(struct task_struct___arg *task __arg_trusted, struct hl_task *t, u32 cls, s32 cpu,
			   u32 restarted)
{
	struct task_struct *p = (void *)task;
	const volatile struct hl_class *c = class_get(cls);
	bool pinned = p->nr_cpus_allowed == 1;
	u32 f = frame_of(cpu, pinned);
	u64 w;

	if (!t)
		return 0;
	w = task_weight(HL_TASK(p), t, c->weight);
	if (restarted)
		rebase(t, f);
	else
		fair_started(t, c, w, f, pinned ? HL_DSQ_PINNED(cpu) : HL_DSQ_FAIR(llc_of(cpu)));
	return (s64)(fair_deadline(t, w, p->scx.slice) - frame_clock(f));
}

/*
 * Charges the CPU time a fair task used on cpu. Time the CPU gave a task
 * from elsewhere (its LLC's queue) also moves its own queue's clock on, as
 * much as a nice-0 task's vruntime would move: the tasks waiting there are
 * measured from that clock, which otherwise moves only when one of them
 * starts. Without it, a task pinned here with a later deadline than the
 * LLC's stream of short wake-ups (a nice-19 spinner; a thread that sleeps
 * between 1 ms rounds) waited 5 s while the CPU served the LLC, until the
 * watchdog ejected the scheduler.
 */
static __always_inline void fair_charge(struct task_struct *p, struct hl_task *t,
					const volatile struct hl_class *c, u64 used, s32 cpu)
{
	u32 own = frame_of(cpu, true);
	struct hl_frame *fr;

	t->vruntime += to_vtime(used, task_weight(HL_TASK(p), t, c->weight));
	t->ran += used;
	if (t->frame != own) {
		fr = bpf_map_lookup_elem(&frames, &own);
		if (fr)
			fr->vclock += used;
	}
}

/*
 * Which CPU should a fair task with deadline dl (from its queue's clock),
 * queued for llc, preempt, if any? The one that wakes it, if that CPU
 * serves llc and runs a fair task with a later deadline that has run
 * min_slice (without that floor, two wakers would take turns preempting
 * each other), as EEVDF's wake-affine does: a kick of the calling CPU
 * needs no IPI. Other CPUs are not looked at: a remote kick costs an IPI
 * and two switches there, and looking also at the wakee's CPU and two
 * others of its LLC, perf bench sched messaging took 3.4-8.4 s a run on
 * the 8-vCPU guest against 2.6-4.4 s for this rule and 0.7-1.2 s under
 * EEVDF (docs/results.md, 2026-11-27). A wakee that preempts nothing
 * waits for the next CPU of its LLC to finish a slice; slices shrink as
 * the queue grows. A task that may run on cpu alone looks at cpu instead,
 * whoever wakes it: no other CPU will take it.
 */
static __always_inline s32 fair_victim(struct task_struct *p, s32 cpu, u32 llc, bool pinned, s64 dl)
{
	s32 c = pinned ? cpu : bpf_get_smp_processor_id();
	struct hl_cpu_shared *s = shared_of(c);

	if (s && llc_of(c) == llc && s->state == HL_CPU_FAIR && s->deadline > dl &&
	    (s64)(hl_now() - s->started_at) >= (s64)min_slice_ns && allowed_on(p, c))
		return c;
	return -1;
}

/*
 * Queues a fair task: on its CPU's own queue if it may run nowhere else,
 * else on its LLC's, in deadline order; then makes a CPU take it: one
 * whose task it preempts (fair_victim), else an idle one.
 */
__hl_global int fair_enqueue(struct task_struct___arg *task __arg_trusted, struct hl_task *t, u32 cls, u64 enq_flags)
{
	struct task_struct *p = (void *)task;
	const volatile struct hl_class *c = class_get(cls);
	s32 cpu = scx_bpf_task_cpu(p), target, idle;
	bool pinned = p->nr_cpus_allowed == 1;
	u64 w, slice, dl, dsq, clock;
	u32 llc, f;

	if (!allowed_on(p, cpu))
		cpu = bpf_cpumask_first(p->cpus_ptr);
	llc = llc_of(cpu);
	f = frame_of(cpu, pinned);
	dsq = pinned ? HL_DSQ_PINNED(cpu) : HL_DSQ_FAIR(llc);
	w = task_weight(HL_TASK(p), t, c->weight);
	slice = fair_slice(c, w, dsq, pinned ? 1 : llc_size[llc]);
	clock = frame_clock(f);
	if (t) {
		rebase(t, f);
		fair_bound(t, c, w, f, dsq);
		dl = fair_deadline(t, w, slice);
		t->yielded = 0;
	} else {
		dl = clock; /* no context: queued as if at the clock */
	}
	hl_dsq_insert_vtime(p, dsq, slice, dl, enq_flags);

	if (enq_flags & HL_ENQ_WAKEUP) {
		target = fair_victim(p, cpu, llc, pinned, (s64)(dl - clock));
		if (target >= 0) {
			scx_bpf_kick_cpu(target, HL_KICK_PREEMPT);
			stat_inc(fair_preempts);
			return 0;
		}
	}
	/*
	 * A queued task must not wait while a CPU it may use idles. A task
	 * that may run on one CPU alone always kicks it: an idle kick wakes
	 * a CPU that is idle or still deciding to be (in balance), and only
	 * that CPU will ever serve its queue. Asking the idle mask first
	 * raced with that CPU going idle and stranded the queue for good.
	 */
	idle = pinned ? cpu : scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (idle >= 0) {
		scx_bpf_kick_cpu(idle, HL_KICK_IDLE);
		stat_inc(idle_kicks);
	}
	return 0;
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

#define HL_PEEK_MAX 16	/* tasks of a shared queue looked at for one this CPU may run */

/*
 * The deadline of the first task in dsq that may run on cpu, if one of
 * the first HL_PEEK_MAX may. The head of an LLC's queue may be a task
 * confined elsewhere (a cpuset); compared by its deadline, it would keep
 * this CPU from its own queue while the kernel moved some later task in
 * its place. Its own queue starved for seconds that way, behind a
 * cpuset-confined spinner, until the watchdog ejected the scheduler.
 */
__hl_global int first_deadline(u64 dsq, s32 cpu, u64 *dl)
{
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	bool found = false;
	int i;

	if (bpf_iter_scx_dsq_new(&it, dsq, 0) == 0) {
		for_each_num(i, 0, HL_PEEK_MAX) {
			p = bpf_iter_scx_dsq_next(&it);
			if (!p)
				break;
			if (p->nr_cpus_allowed >= nr_cpus || bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
				if (dl)
					*dl = p->scx.dsq_vtime;
				found = true;
				break;
			}
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	return found;
}

/*
 * Moves the first task of a CPU's own queue into that CPU's local queue,
 * through the iterator that yields it. (scx_bpf_dsq_move_to_local() on
 * such a queue failed hundreds of times a minute on 7.3 with its first
 * task on this CPU and runnable here, leaving the CPU idle beside 64
 * tasks until the watchdog fired.)
 */
__hl_global int move_first(u64 dsq, s32 cpu)
{
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	bool moved = false;

	if (bpf_iter_scx_dsq_new(&it, dsq, 0) == 0) {
		p = bpf_iter_scx_dsq_next(&it);
		if (p)
			moved = hl_dsq_move(&it, p, HL_DSQ_LOCAL_ON | cpu, 0);
	}
	bpf_iter_scx_dsq_destroy(&it);
	return moved;
}

/*
 * Moves the fair task with the earliest deadline this CPU may run into
 * its local queue: from its own queue or its LLC's, whichever offers the
 * earlier deadline, each measured from its queue's clock.
 */
__hl_global int fair_take(s32 cpu, u32 llc)
{
	u64 pinned = HL_DSQ_PINNED(cpu), shared = HL_DSQ_FAIR(llc), dp, ds;

	if (scx_bpf_dsq_nr_queued(pinned) > 0 && first_deadline(pinned, cpu, &dp) &&
	    (!first_deadline(shared, cpu, &ds) ||
	     (s64)(dp - frame_clock(frame_of(cpu, true))) <= (s64)(ds - frame_clock(llc))) &&
	    move_first(pinned, cpu))
		return true;
	if (hl_dsq_move_to_local(shared))
		return true;
	return move_first(pinned, cpu);
}

/*
 * A fair task whose slice ran out, still runnable on cpu after ran ns of
 * this run: the slice it keeps the CPU with if its deadline, charged for
 * the run, is still no later than the first one waiting for this CPU (its
 * own queue's and its LLC's, each from its clock), else 0. EEVDF picks
 * among the running task and the queued ones alike. The kernel asks
 * ops.dispatch before it requeues the task, so moving the queue's first
 * task in whatever its deadline made CPU-bound tasks take turns slice by
 * slice, and weights counted only through the slices' lengths: a nice-19
 * spinner beside a nice-0 one on one CPU got 18x its weight's share, one
 * of cpu.weight 100 beside 300 1.7x (both counted as clamp_lag's 5.8x).
 * A task that yielded gives way.
 */
__hl_global u64 fair_keep(struct task_struct___arg *task __arg_trusted, struct hl_task *t, u32 cls, s32 cpu, u64 ran)
{
	struct task_struct *p = (void *)task;
	const volatile struct hl_class *c = class_get(cls);
	u32 llc = llc_of(cpu);
	u64 w, slice, dl;
	bool pinned;
	s64 mine;

	if (!t || t->yielded)
		return 0;
	pinned = p->nr_cpus_allowed == 1;
	w = task_weight(HL_TASK(p), t, c->weight);
	slice = fair_slice(c, w, pinned ? HL_DSQ_PINNED(cpu) : HL_DSQ_FAIR(llc), pinned ? 1 : llc_size[llc]);
	mine = (s64)(fair_deadline(t, w, slice) + to_vtime(ran, w) - frame_clock(t->frame));
	/* An iterator locks its queue, even an empty one: count first. */
	if (scx_bpf_dsq_nr_queued(HL_DSQ_PINNED(cpu)) > 0 && first_deadline(HL_DSQ_PINNED(cpu), cpu, &dl) &&
	    (s64)(dl - frame_clock(frame_of(cpu, true))) < mine)
		return 0;
	if (scx_bpf_dsq_nr_queued(HL_DSQ_FAIR(llc)) > 0 && first_deadline(HL_DSQ_FAIR(llc), cpu, &dl) &&
	    (s64)(dl - frame_clock(llc)) < mine)
		return 0;
	return slice;
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
__hl_global int fair_steal(u32 llc)
{
	u32 node = llc_node[llc & (HL_MAX_LLCS - 1)], j;
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

/*
 * Wake-affine: a fair task that a fair task of this CPU wakes
 * synchronously (the waker is about to sleep: a pipe, a futex hand-over)
 * runs here next, from this CPU's local queue, as EEVDF puts it on the
 * waker's runqueue: no shared queue, no dispatch, no IPI, and the pair
 * keeps its cache. Only while nothing else waits here, the task owes no
 * debt and its deadline, from its lag, is no later than the first one
 * waiting in this CPU's LLC queue: a pair that wakes each other in turn
 * runs as long as EEVDF would let it, not ahead of the queue. Returns
 * the slice it was queued with, or 0.
 */
__hl_global u64 fair_affine(struct task_struct___arg *task __arg_trusted, struct hl_task *t, u32 cls, s32 cpu)
{
	struct task_struct *p = (void *)task;
	const volatile struct hl_class *c = class_get(cls);
	struct hl_cpu_shared *s = shared_of(cpu);
	u32 llc = llc_of(cpu);
	u64 w, slice, dl, first;

	if (!t || t->lag < 0 || !s || s->state != HL_CPU_FAIR || !allowed_on(p, cpu) ||
	    scx_bpf_dsq_nr_queued(HL_DSQ_LOCAL) > 0 || scx_bpf_dsq_nr_queued(HL_DSQ_PINNED(cpu)) > 0)
		return 0;
	w = task_weight(HL_TASK(p), t, c->weight);
	slice = fair_slice(c, w, HL_DSQ_FAIR(llc), llc_size[llc]);
	/* Where runnable (fair_wake) will place it: a lag of no debt. */
	dl = frame_clock(llc) - t->lag + fair_request(t, w, slice);
	if (scx_bpf_dsq_nr_queued(HL_DSQ_FAIR(llc)) > 0 && first_deadline(HL_DSQ_FAIR(llc), cpu, &first) &&
	    (s64)(first - dl) < 0)
		return 0;
	hl_dsq_insert(p, HL_DSQ_LOCAL, slice, 0);
	/* The waker may run on before it sleeps: it gives way as to any
	 * wake-up with an earlier deadline (fair_victim). */
	if (fair_victim(p, cpu, llc, false, (s64)(dl - frame_clock(llc))) >= 0) {
		scx_bpf_kick_cpu(cpu, HL_KICK_PREEMPT);
		stat_inc(fair_preempts);
	}
	return slice;
}

/*
 * A fair wakee whose waker runs in another LLC, where it would preempt
 * the waker's task (fair_victim): the CPU to run it on, the waker's, as
 * EEVDF's wake-affine pulls a wakee to its waker; else -1, and it is
 * queued in its own LLC, where it waits for a slice to end.
 */
__hl_global s32 fair_pull(struct task_struct___arg *task __arg_trusted, struct hl_task *t, u32 cls, s32 prev)
{
	struct task_struct *p = (void *)task;
	const volatile struct hl_class *c = class_get(cls);
	s32 self = bpf_get_smp_processor_id();
	u32 llc = llc_of(self);
	u64 w, slice;

	if (!t || llc == llc_of(prev))
		return -1;
	w = task_weight(HL_TASK(p), t, c->weight);
	slice = fair_slice(c, w, HL_DSQ_FAIR(llc), llc_size[llc]);
	return fair_victim(p, self, llc, false, (s64)fair_request(t, w, slice) - t->lag);
}

#endif /* HOTLANE_SCHED_FAIR_BPF_H */
