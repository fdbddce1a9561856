//go:build ignore

/*
 * sched.bpf.c - hotlane: a sched_ext scheduler with a high-priority lane and
 * a fair class for everything else, on machines of any size. How it works,
 * and why: docs/design.md, "The scheduler".
 *
 * This file holds the ops table and the callbacks; the policy is in
 * sched_ctx.bpf.h (settings, topology, per-CPU, per-LLC and per-task
 * contexts, queues, counters), sched_lane.bpf.h, sched_fair.bpf.h and
 * sched_guard.bpf.h, and cgroup cpu.max in sched_quota.bpf.h. Tasks
 * are classed by classify.bpf.h; high-priority classes form the lane. A
 * CPU serves, in order (hl_dispatch):
 *
 *  1. a guard turn, if it owes the fair side one;
 *  2. its LLC's lane queue, else the lane task it runs keeps its CPU;
 *  3. another LLC's lane queue;
 *  4. the earlier deadline of its own and its LLC's fair queue;
 *  5. another LLC's fair queue, its node's first (it would idle otherwise).
 *
 * Compiled once per sched_ext kfunc generation (scx_api.h); the loader
 * chooses the object and fills the read-only settings and the topology.
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"
#include "scx_api.h"
#define HL_CLASSIFY_OWN_STORAGE
#include "classify.bpf.h"
#include "sched_ctx.bpf.h"
#include "sched_fair.bpf.h"
#include "sched_lane.bpf.h"
#include "sched_guard.bpf.h"
#include "sched_quota.bpf.h"

LICENSE("GPL");

#define HL_MIN_RESUME (100 * 1000) /* ns; less slice left than this is used up */

u64 nr_enqueues;

/* Why the scheduler ended, copied from the kernel in ops.exit. */
struct hl_exit_info {
	s64 kind;
	s64 exit_code;
	char reason[128];
	char msg[1024];
	char dump[16384];	/* the kernel's dump of its state at an error exit */
};

struct hl_exit_info exit_info;

SEC("struct_ops/hl_select_cpu")
s32 hl_select_cpu(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	s32 prev = ctx[1], cpu;
	u64 wake_flags = ctx[2];
	struct hl_task *t = task_ctx(p);
	u32 cls = task_class(HL_TASK(p), t);
	const volatile struct hl_class *c = class_get(cls);
	bool idle = false;

	/* A task of a cgroup out of quota goes no further than enqueue. */
	if (quota_throttled(p, hl_now()))
		return prev;
	cpu = scx_bpf_select_cpu_dfl(p, prev, wake_flags, &idle);
	if (idle) {
		/*
		 * A lane task goes through its LLC's lane queue, not the idle
		 * CPU's local one: an RT task that takes that CPU before it
		 * leaves idle calls no cpu_release (only a CPU running one of
		 * ours does), and the lane task would wait out its burst. The
		 * wake-up's IPI still wakes that CPU to take it.
		 */
		if (c->high_priority)
			lane_queue(p, llc_of(cpu), c->slice_ns, 0);
		else
			hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, c->preempt ? HL_ENQ_PREEMPT : 0);
		stat_class_inc(direct_idle, cls);
		return cpu;
	}
	/* A fair wakee goes to its waker's CPU only while no lane task
	 * waits in the waker's LLC: that one runs first there. */
	if (!c->high_priority && !lane_waits(llc_of(bpf_get_smp_processor_id()))) {
		if ((wake_flags & HL_WAKE_SYNC) && fair_affine(HL_TASK(p), t, cls, bpf_get_smp_processor_id())) {
			stat_inc(fair_affine);
			return bpf_get_smp_processor_id();
		}
		/* A waker in another LLC that the wakee would preempt: its
		 * LLC queues the wakee (fair_enqueue preempts the waker's
		 * task). */
		if ((cpu = fair_pull(HL_TASK(p), t, cls, prev)) >= 0) {
			stat_inc(fair_pulls);
			return cpu;
		}
	}
	/* A lane wake-up with no idle CPU preempts fair work, straight into
	 * that CPU's local queue: no enqueue callback, no second IPI. A
	 * migration-disabled task stays where it is. */
	if (c->high_priority && c->preempt && !migration_disabled(p, 1)) {
		cpu = lane_victim(HL_TASK(p), cls, prev, 0);
		if (cpu >= 0) {
			hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, HL_ENQ_PREEMPT);
			stat_inc(preempt_kicks);
			return cpu;
		}
	}
	return prev;
}

SEC("struct_ops/hl_runnable")
int hl_runnable(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	u64 enq_flags = ctx[1];
	struct hl_task *t;

	if (!(enq_flags & HL_ENQ_WAKEUP))
		return 0;
	t = task_ctx(p);
	if (t)
		fair_wake(p, t);
	return 0;
}

/*
 * A fair task that was just preempted (by a lane task or a kthread now in
 * this CPU's local queue) goes back to the end of that queue with the rest
 * of its slice: it keeps its turn, and resuming it costs no shared queue,
 * no dispatch and no migration. The kernel zeroed its slice to preempt it,
 * so "preempted" reads as: it is the task this CPU ran, as a fair task, it
 * is put back rather than woken or requeued, something waits locally, and
 * it had not used up its slice. The rest is counted from the slice this
 * run started with, so a task preempted again and again still runs one
 * slice in all. This is on the lane's wake-up path (the kernel puts the
 * preempted task back before the lane task runs), so it is tried before
 * any classification: the class the task ran as is the one that counts.
 * A task that yielded was not preempted: resumed here, two threads that
 * yield in turn kept each other on one CPU's local queue, which no other
 * CPU serves, while the other CPU idled (sysbench threads).
 */
static __always_inline bool resume_preempted(struct task_struct *p, struct hl_task *t, u64 enq_flags)
{
	s32 self = bpf_get_smp_processor_id();
	struct hl_cpu_own *o;
	struct hl_cpu_shared *s;
	u64 used;

	if (enq_flags & (HL_ENQ_WAKEUP | HL_ENQ_REENQ) || (t && t->yielded))
		return false;
	o = own_get();
	s = shared_of(self);
	if (!o || !s || o->curr_pid != p->pid || o->lane)
		return false;
	used = hl_now() - s->started_at;
	/* Ran here last is not "queued here": a property change can requeue
	 * it from another CPU, and its cpumask may have changed meanwhile. */
	if (used + HL_MIN_RESUME >= o->run_slice || scx_bpf_task_cpu(p) != self ||
	    (p->nr_cpus_allowed < nr_cpus && !bpf_cpumask_test_cpu(self, p->cpus_ptr)) ||
	    scx_bpf_dsq_nr_queued(HL_DSQ_LOCAL) <= 0)
		return false;
	hl_dsq_insert(p, HL_DSQ_LOCAL, o->run_slice - used, enq_flags);
	o->resumed_pid = p->pid;
	stat_class_inc(enqueued, o->class_id);
	stat_inc(fair_resumed);
	return true;
}

/*
 * A lane task that did not go straight to a CPU from select_cpu: an idle
 * CPU's lane queue, else a fair CPU preempted (a wake-up straight into its
 * local queue; a task that did not wake, one requeued or handed back by
 * cpu_release, is still the task this CPU switches away from, so it goes
 * to the victim's lane queue with the victim kicked), else its own LLC's
 * lane queue. A class without preempt takes only a fair task that has run
 * a full min_slice, as a fair wake-up would.
 */
static __always_inline void lane_enqueue(struct task_struct *p, u32 cls, const volatile struct hl_class *c,
					 u64 enq_flags)
{
	s32 cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);

	if (cpu >= 0) {
		lane_queue(p, llc_of(cpu), c->slice_ns, enq_flags);
		scx_bpf_kick_cpu(cpu, HL_KICK_IDLE);
		stat_inc(idle_kicks);
		return;
	}
	cpu = lane_victim(HL_TASK(p), cls, scx_bpf_task_cpu(p), c->preempt ? 0 : min_slice_ns);
	if (cpu >= 0 && (enq_flags & HL_ENQ_WAKEUP)) {
		hl_dsq_insert(p, HL_DSQ_LOCAL_ON | cpu, c->slice_ns, enq_flags | HL_ENQ_PREEMPT);
		stat_inc(preempt_kicks);
		return;
	}
	if (cpu >= 0) {
		lane_queue(p, llc_of(cpu), c->slice_ns, enq_flags);
		scx_bpf_kick_cpu(cpu, HL_KICK_PREEMPT);
		stat_inc(preempt_kicks);
		return;
	}
	lane_queue(p, llc_of(scx_bpf_task_cpu(p)), c->slice_ns, enq_flags);
	stat_inc(lane_queued);
}

SEC("struct_ops/hl_enqueue")
int hl_enqueue(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	u64 enq_flags = ctx[1], n;
	const volatile struct hl_class *c;
	struct hl_cpu_shared *on;
	struct hl_task *t;
	u64 now, until;
	u32 cls;

	/* The test knob is a load-time constant: off, no shared counter. */
	if (debug_error_after) {
		n = __sync_fetch_and_add(&nr_enqueues, 1) + 1;
		if (n == debug_error_after)
			hl_error("debug: error injected after %llu enqueues", n);
	}
	/*
	 * A task of a cgroup out of its cpu.max quota waits for the next
	 * period, even one preempted with its slice unused. A task that may
	 * not leave its CPU, or may run on one alone as a kthread, runs: the
	 * kernel's work, and a queue only one CPU may serve.
	 */
	if (nr_quotas && !migration_disabled(p, enq_flags & HL_ENQ_REENQ ? 2 : 1) && !is_percpu_kthread(p) &&
	    (until = quota_throttled(p, now = hl_now()))) {
		quota_hold(p, class_get(task_class(HL_TASK(p), task_ctx(p)))->slice_ns, until, enq_flags, now);
		return 0;
	}
	/*
	 * The last task of a CPU that has nothing else to run, its slice
	 * used up: it runs on, as the kernel keeps it unless asked
	 * (SCX_OPS_ENQ_LAST, which the loader asks for with cpu.max, so that
	 * a task out of quota is held above, not kept).
	 */
#if HL_SCX_API >= 700
	if (enq_flags & HL_ENQ_LAST) {
		cls = task_class(HL_TASK(p), task_ctx(p));
		stat_class_inc(enqueued, cls);
		hl_dsq_insert(p, HL_DSQ_LOCAL, class_get(cls)->slice_ns, enq_flags);
		return 0;
	}
#endif
	t = task_ctx(p);
	if (resume_preempted(p, t, enq_flags))
		return 0;
	cls = task_class(HL_TASK(p), t);
	c = class_get(cls);
	stat_class_inc(enqueued, cls);

	/*
	 * A task that may not leave its CPU runs there next, as the kernel
	 * itself queues it when the scheduler does not ask for such tasks.
	 * hotlane asks (SCX_OPS_ENQ_MIGRATION_DISABLED, where the kernel has
	 * it) because on 6.15-6.18 cpu_release's hand-back runs inside this
	 * program's caller, where the task handed back looks migration
	 * disabled to the kernel: without the flag the kernel would put the
	 * lane task straight back behind the RT task, for its whole burst.
	 */
	if (migration_disabled(p, enq_flags & HL_ENQ_REENQ ? 2 : 1)) {
		/* A lane task preempted inside a BPF program (migration is
		 * disabled there) must not wait out the fair task that runs
		 * next on its CPU: it can go nowhere else. */
		on = shared_of(scx_bpf_task_cpu(p));
		if (c->high_priority && on && on->state != HL_CPU_LANE)
			enq_flags |= HL_ENQ_PREEMPT;
		hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, enq_flags);
		stat_inc(pinned_local);
		return 0;
	}
	/*
	 * A per-CPU kthread can run nowhere else, so it goes to its own CPU's
	 * local queue (enqueue runs on that CPU's runqueue). It preempts fair
	 * work, which often waits on it (kworkers, ksoftirqd), but not the
	 * lane or a guard turn: it runs when their slice ends.
	 */
	if (is_percpu_kthread(p)) {
		on = shared_of(scx_bpf_task_cpu(p));
		if (!on || on->state == HL_CPU_FAIR || on->state == HL_CPU_IDLE)
			enq_flags |= HL_ENQ_PREEMPT;
		hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, enq_flags);
		stat_inc(kthread_direct);
		return 0;
	}
	if (c->high_priority)
		lane_enqueue(p, cls, c, enq_flags);
	else
		fair_enqueue(HL_TASK(p), t, cls, enq_flags);
	return 0;
}

/* The class of prev if the kernel is about to requeue it (still runnable,
 * its slice used up), or NULL. Only tasks of ours carry SCX_TASK_QUEUED. */
static __always_inline const volatile struct hl_class *requeued_prev(struct task_struct *prev)
{
	if (!prev || !(prev->scx.flags & HL_TASK_QUEUED))
		return NULL;
	return class_get(task_class(HL_TASK(prev), task_ctx(prev)));
}

/*
 * prev keeps this CPU as a lane task. One that ran as a fair task (it
 * changed class while it ran: renamed, moved, a device used) ends that
 * run here, charged as fair, and a lane run starts, which the guard
 * counts. Kept with no lane run begun, the kernel calls no running() for
 * it, and the guard, which counts lane time only, saw none: two spinners
 * that renamed themselves into the lane held both CPUs of the 2-vCPU
 * guest for 900 ms while the threads pinned there waited (2026-11-27).
 */
static __always_inline void lane_keeps(struct task_struct *prev, const volatile struct hl_class *c,
				       struct hl_cpu_own *o, struct hl_cpu_shared *s, s32 cpu, u64 now)
{
	struct hl_task *t;

	if (!o->lane) {
		t = task_ctx(prev);
		if (t && prev) {
			fair_charge(prev, t, class_get(o->class_id), now - s->started_at, cpu);
			o->class_id = t->cls.class_id; /* requeued_prev just classified it */
		}
		o->lane = 1;
		s->state = HL_CPU_LANE;
		s->started_at = now;
	}
	prev->scx.slice = c->slice_ns;
	stat_inc(lane_kept);
}

/* Makes a CPU of llc other than self, running fair work, take the lane
 * queue while self serves a guard turn. */
__hl_global int kick_fair_cpu(u32 llc, s32 self)
{
	u32 n, first, start, k;
	struct hl_cpu_shared *s;
	s32 cpu;

	llc &= HL_MAX_LLCS - 1;
	n = llc_size[llc];
	first = llc_first[llc];
	start = n ? bpf_get_prandom_u32() % n : 0;
	for (k = 0; k < HL_LANE_PROBES && k < n; k++) {
		cpu = llc_cpus[(first + (start + k) % n) & (HL_MAX_CPUS - 1)];
		s = shared_of(cpu);
		if (cpu != self && s && s->state == HL_CPU_FAIR && !s->claim) {
			scx_bpf_kick_cpu(cpu, HL_KICK_PREEMPT);
			return 1;
		}
	}
	return 0;
}

SEC("struct_ops/hl_dispatch")
int hl_dispatch(u64 *ctx)
{
	s32 cpu = ctx[0];
	struct task_struct *prev = (void *)ctx[1];
	struct hl_cpu_shared *s = shared_of(cpu);
	struct hl_cpu_own *o = own_get();
	u32 llc = llc_of(cpu);
	u64 now = hl_now();
	/* Tasks whose cgroups' quota refilled go back to their queues first. */
	int released = release_due(now) ? quota_release(now) : 0;
	bool lane_here = scx_bpf_dsq_nr_queued(HL_DSQ_LANE(llc)) > 0;
	bool lane_far = lane_llcs & ~(1ULL << (llc & 63));
	/* A task out of quota is not kept: the kernel requeues it, held. */
	const volatile struct hl_class *pc = lane_here || (prev && quota_throttled(prev, now)) ? NULL : requeued_prev(prev);
	bool keep_prev = pc && pc->high_priority;
	bool fair_here = fair_waits(cpu, llc);
	struct hl_task *t;
	u64 slice;

	if (!s || !o)
		return released;
	if (!lane_here && (lane_llcs & (1ULL << (llc & 63))) && nr_llcs <= 64)
		__sync_fetch_and_and(&lane_llcs, ~(1ULL << (llc & 63)));
	if (!fair_here)
		fair_served(o, s, now);
	else if (guard_due(o, s, now, lane_here || lane_far || keep_prev) && fair_take(cpu, llc)) {
		guard_turn(o, s, now);
		if (lane_here)
			kick_fair_cpu(llc, cpu);
		return 0;
	}
	if (lane_here && hl_dsq_move_to_local(HL_DSQ_LANE(llc)))
		return 0;
	/*
	 * A lane task whose slice ran out and no other lane task waits: it
	 * keeps the CPU with a new slice. Returning without one would let the
	 * kernel requeue it behind whatever the fair queue gave this CPU.
	 */
	if (keep_prev) {
		lane_keeps(prev, pc, o, s, cpu, now);
		return 0;
	}
	if (lane_far && lane_steal(llc))
		return 0;
	/*
	 * A fair task whose slice ran out runs on, its run charged as a turn
	 * of its own, while its deadline is the earliest for this CPU. It
	 * runs as a plain fair task: one kept after a guard turn is a lane
	 * wake-up's victim again.
	 */
	if (pc && !o->lane && fair_here && prev && (t = task_ctx(prev)) &&
	    (slice = fair_keep(HL_TASK(prev), t, o->class_id, cpu, now - s->started_at))) {
		fair_charge(prev, t, class_get(o->class_id), now - s->started_at, cpu);
		s->started_at = now;
		s->deadline = fair_start(HL_TASK(prev), t, o->class_id, cpu, 0);
		s->state = HL_CPU_FAIR;
		prev->scx.slice = slice;
		o->run_slice = slice;
		stat_inc(fair_kept);
		return 0;
	}
	/* The fair queues' kfuncs only where they can find something: this
	 * CPU's own queues when fair_waits said so, other LLCs' when there
	 * are others. A CPU going idle dispatches at every ping-pong
	 * wake-up. */
	if ((fair_here && fair_take(cpu, llc)) || (nr_llcs > 1 && fair_steal(llc)))
		return 0;
	/*
	 * Nothing else to run and prev, a fair task, is still runnable: it
	 * keeps the CPU with a slice of its class. Left to the kernel, it
	 * would get the default 20 ms slice, and a lane task that the tick
	 * cannot see (queued on this CPU alone) would wait it out.
	 */
	if (pc && prev)
		prev->scx.slice = pc->slice_ns;
	else if (scx_bpf_dsq_nr_queued(HL_DSQ_PINNED(cpu)) > 0) {
		/*
		 * This CPU's own queue holds tasks, yet none moved: it happens
		 * (some tens of times a minute with 64 tasks pinned to one CPU
		 * on 7.3), and only this CPU will ever serve that queue. Left
		 * idle, it would sleep until the watchdog ejected the
		 * scheduler. Kick it to balance again.
		 */
		stat_inc(pinned_unserved);
		scx_bpf_kick_cpu(cpu, 0);
	}
	return 0;
}

/*
 * At a tick: a fair task gives way to a lane task waiting in a lane queue,
 * which no wake-up brought here. A lane task whose slice ends gets a new
 * one here, before the kernel looks, if no other lane task waits, the fair
 * side is not owed a guard turn and the task still classifies into the
 * lane: it keeps running with no dispatch and no requeue.
 */
SEC("struct_ops/hl_tick")
int hl_tick(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	s32 cpu = bpf_get_smp_processor_id();
	struct hl_cpu_shared *s = shared_of(cpu);
	struct hl_cpu_own *o = own_get();
	const volatile struct hl_class *c;
	u32 llc = llc_of(cpu);
	u64 now;

	if (!s || !o)
		return 0;
	now = hl_now();
	/* Out of quota: the slice ends, and the kernel requeues it, held. */
	if (quota_charge(p, o, now)) {
		p->scx.slice = 0;
		return 0;
	}
	if (!o->lane) {
		if (s->state == HL_CPU_FAIR && lane_waits(llc))
			p->scx.slice = 0;
		return 0;
	}
	/* A release due is a dispatch's work: the slice ends for one. */
	if (p->scx.slice || scx_bpf_dsq_nr_queued(HL_DSQ_LANE(llc)) > 0 || release_due(now))
		return 0;
	if (!fair_waits(cpu, llc) && scx_bpf_dsq_nr_queued(HL_DSQ_LOCAL) <= 0)
		fair_served(o, s, now);
	else if (lane_owed(o, s, now) >= starvation_ns)
		return 0;
	/* A task that never sleeps is classified here, once a slice: one
	 * that left the lane (renamed, moved, its device idle) gives way. */
	c = class_get(task_class(HL_TASK(p), task_ctx(p)));
	if (!c->high_priority)
		return 0;
	p->scx.slice = c->slice_ns;
	stat_inc(lane_kept);
	return 0;
}

SEC("struct_ops/hl_running")
int hl_running(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	s32 cpu = scx_bpf_task_cpu(p);
	struct hl_cpu_shared *s = shared_of(cpu);
	struct hl_cpu_own *o = own_of(cpu);
	struct hl_task *t = task_ctx(p);
	/* Called from another CPU, the task running there restarts in
	 * place (own_of): nothing new runs there. */
	bool restarted = cpu != bpf_get_smp_processor_id();
	const volatile struct hl_class *c;
	u64 now, turn;
	s64 claim;
	u32 cls;

	if (!s || !o)
		return 0;
	/* A lane wake-up left its class in the claim; whoever runs, the
	 * claim ends here: the CPU is a victim again by what runs now. */
	claim = restarted ? 0 : s->claim;
	if (claim) {
		s->claim = 0;
		cls = (claim >> 8) == p->pid ? claim & 0xff : task_class(HL_TASK(p), t);
	} else {
		cls = t && t->cls.valid ? t->cls.class_id : task_class(HL_TASK(p), t);
	}
	c = class_get(cls);
	if (!restarted) /* a restart in place is the same run */
		stat_class_inc(dispatched, cls);
	now = hl_now();
	s->started_at = now;
	o->quota_from = now;
	o->curr_pid = p->pid;
	o->class_id = cls;
	o->lane = c->high_priority;
	/*
	 * Queued before its cgroup ran out of quota: it stops at once, and
	 * dispatch sends it to be held. Left to its tick, every thread of a
	 * cgroup queued at that moment would run over the quota by a tick.
	 */
	if (quota_throttled(p, now)) {
		p->scx.slice = 0;
		scx_bpf_kick_cpu(cpu, HL_KICK_PREEMPT);
	}
	if (c->high_priority) {
		s->state = HL_CPU_LANE;
		return 0;
	}

	/*
	 * A fair task resuming the rest of its slice after the lane
	 * preempted it is not a turn of the fair side: counting it as one
	 * would let a CPU alternate between the lane and the task it
	 * preempts while a task pinned here waits forever.
	 */
	if (p->pid == o->resumed_pid)
		o->resumed_pid = 0;
	else
		fair_served(o, s, now);
	if (t)
		s->deadline = fair_start(HL_TASK(p), t, cls, cpu, restarted);
	/*
	 * A guard turn runs to its end, shielded: a lane wake-up that
	 * preempted it at once would make the guard worthless. It ends with
	 * the turn's budget, so the lane keeps most of a CPU it saturates.
	 */
	s->state = HL_CPU_FAIR;
	if (o->guard_turn) {
		o->guard_turn = 0;
		s->state = HL_CPU_SHIELDED;
		turn = o->guard_until - now;
		if ((s64)turn > 0 && turn < p->scx.slice)
			p->scx.slice = turn;
	}
	o->run_slice = p->scx.slice;
	return 0;
}

SEC("struct_ops/hl_stopping")
int hl_stopping(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	bool runnable = ctx[1];
	s32 cpu = scx_bpf_task_cpu(p);
	struct hl_cpu_shared *s = shared_of(cpu);
	struct hl_cpu_own *o = own_of(cpu);
	struct hl_task *t = task_ctx(p);
	u64 now, used;

	if (!s || !o)
		return 0;
	/*
	 * Charged as the class it ran as, which running noted for this CPU.
	 * A task that blocks is classified again, so one that renamed itself
	 * or changed cgroup while running shows its new class while it
	 * sleeps. One merely preempted is not: the lane's wake-up waits on
	 * this stop, and the task is classified when it is next queued.
	 * o->lane stays set until the next task runs: enqueue reads it to
	 * tell a preempted fair task.
	 */
	if (!runnable)
		task_class(HL_TASK(p), t);
	s->state = HL_CPU_IDLE;
	now = hl_now();
	used = now - s->started_at;
	quota_charge(p, o, now);
	if (o->lane)
		o->lane_ns += used;
	else if (t)
		fair_charge(p, t, class_get(o->class_id), used, cpu);
	return 0;
}

SEC("struct_ops/hl_yield")
bool hl_yield(u64 *ctx)
{
	struct task_struct *from = (void *)ctx[0];
	s32 cpu = bpf_get_smp_processor_id();
	u32 llc = llc_of(cpu);
	struct hl_task *t;

	/*
	 * With nothing waiting that this CPU could run instead, a yield
	 * changes nothing, as on EEVDF's own runqueue: the task keeps its
	 * slice and the kernel keeps running it without a dispatch. Threads
	 * that yield in a loop (sysbench threads, spin-then-yield locks) did
	 * 0.27x EEVDF's work on 2 CPUs, paying a dispatch for every yield.
	 */
	if (!fair_waits(cpu, llc) && !lane_waits(llc) && scx_bpf_dsq_nr_queued(HL_DSQ_LOCAL) <= 0)
		return false;
	t = task_ctx(from);
	if (t)
		fair_yield(t);
	from->scx.slice = 0;
	return false; /* no yield_to(): the kernel picks what runs next */
}

SEC("struct_ops/hl_quiescent")
int hl_quiescent(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	u64 deq_flags = ctx[1];
	struct hl_task *t;

	if (!(deq_flags & HL_DEQ_SLEEP))
		return 0;
	t = task_ctx(p);
	if (t)
		fair_sleep(p, t, class_get(t->cls.class_id));
	return 0;
}

/* The kernfs id of a cgroup: the id cgroup matchers and cpu.weight use. */
static __always_inline u64 cgroup_id(struct cgroup *cgrp)
{
	return cgrp && cgrp->kn ? cgrp->kn->id : 0;
}

/*
 * A task's context is created here, where sleeping is allowed: the other
 * callbacks only look it up. A task without one (no memory) is scheduled
 * all the same, classified afresh each time and queued at the clock.
 */
SEC("struct_ops.s/hl_init_task")
s32 hl_init_task(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	struct scx_init_task_args *args = (void *)ctx[1];
	struct hl_task *t;

	t = bpf_task_storage_get(&hl_tasks, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		__sync_fetch_and_add(&hl_classify_storage_failures, 1);
		return 0;
	}
	t->frame = frame_of(scx_bpf_task_cpu(p), p->nr_cpus_allowed == 1);
	t->vruntime = frame_clock(t->frame);
	t->burst = min_slice_ns;
	if (__builtin_preserve_field_info(args->cgroup, 2 /* BPF_FIELD_EXISTS */))
		t->cgroup_id = cgroup_id(args->cgroup);
	return 0;
}

/* cpu.weight: only weights other than the default are kept. */
static __always_inline void cgroup_weight_set(struct cgroup *cgrp, u32 weight)
{
	u64 id = cgroup_id(cgrp);

	if (weight == HL_WEIGHT_NICE0)
		bpf_map_delete_elem(&cgroup_weights, &id);
	else
		bpf_map_update_elem(&cgroup_weights, &id, &weight, 0 /* BPF_ANY */);
}

SEC("struct_ops.s/hl_cgroup_init")
s32 hl_cgroup_init(u64 *ctx)
{
	struct cgroup *cgrp = (void *)ctx[0];
	struct scx_cgroup_init_args *args = (void *)ctx[1];

	cgroup_weight_set(cgrp, args->weight);
#if HL_SCX_API >= 700
	quota_set(cgroup_id(cgrp), args->bw_period_us, args->bw_quota_us, args->bw_burst_us);
#endif
	return 0;
}

SEC("struct_ops/hl_cgroup_exit")
int hl_cgroup_exit(u64 *ctx)
{
	u64 id = cgroup_id((struct cgroup *)ctx[0]);

	bpf_map_delete_elem(&cgroup_weights, &id);
	quota_forget(id);
	return 0;
}

SEC("struct_ops/hl_cgroup_set_weight")
int hl_cgroup_set_weight(u64 *ctx)
{
	cgroup_weight_set((struct cgroup *)ctx[0], ctx[1]);
	return 0;
}

#if HL_SCX_API >= 700
SEC("struct_ops/hl_cgroup_set_bandwidth")
int hl_cgroup_set_bandwidth(u64 *ctx)
{
	quota_set(cgroup_id((struct cgroup *)ctx[0]), ctx[1], ctx[2], ctx[3]);
	return 0;
}
#endif

SEC("struct_ops/hl_cgroup_move")
int hl_cgroup_move(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	struct hl_task *t = task_ctx(p);

	if (t)
		t->cgroup_id = cgroup_id((struct cgroup *)ctx[2]);
	return 0;
}

/*
 * An RT or DL task took this CPU. Tasks already in its local queue, a lane
 * task woken here included, would wait until it lets go: hand them back
 * to enqueue, which finds the lane another CPU (preempting fair work
 * there) and puts fair tasks back in their queues.
 */
SEC("struct_ops/hl_cpu_release")
int hl_cpu_release(u64 *ctx)
{
	hl_reenqueue_local();
	stat_inc(cpu_released);
	return 0;
}

/*
 * CPU hotplug. Without these two callbacks the kernel ends the scheduler
 * whenever a CPU goes offline or comes online. The queues need no change
 * (the kernel moves an offline CPU's local tasks away, and idle picking
 * follows the online mask); a CPU that comes or goes starts idle, so that
 * no wake-up takes it for a victim.
 */
static __always_inline void cpu_reset(s32 cpu)
{
	struct hl_cpu_shared *s = shared_of(cpu);

	if (s) {
		s->state = HL_CPU_IDLE;
		s->claim = 0;
	}
}

SEC("struct_ops/hl_cpu_online")
int hl_cpu_online(u64 *ctx)
{
	cpu_reset(ctx[0]);
	return 0;
}

#define HL_DRAIN_MAX 65536	/* tasks an offline CPU's own queue is emptied of, at most */

/*
 * A CPU going offline leaves its own queue behind, and nothing else may
 * take those tasks (they may run on it alone): the kernel waits for the
 * CPU to empty and never dispatches to it again, so the hot-unplug hung,
 * and every sched_setaffinity() with it. They go to the global queue,
 * which the dying CPU still drains; the kernel then moves them elsewhere
 * (breaking their affinity, as it does for every task of a dying CPU).
 * cpu_offline runs unlocked, where moving tasks between queues is allowed.
 */
static __always_inline void drain_pinned(s32 cpu)
{
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	int i;

	if (bpf_iter_scx_dsq_new(&it, HL_DSQ_PINNED(cpu), 0) == 0) {
		for_each_num(i, 0, HL_DRAIN_MAX) {
			p = bpf_iter_scx_dsq_next(&it);
			if (!p)
				break;
			hl_dsq_move(&it, p, HL_DSQ_GLOBAL, 0);
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
}

SEC("struct_ops/hl_cpu_offline")
int hl_cpu_offline(u64 *ctx)
{
	cpu_reset(ctx[0]);
	drain_pinned(ctx[0]);
	return 0;
}

/* The queues: per LLC a lane and a fair queue, per CPU a pinned queue,
 * each on its LLC's NUMA node; the throttled queue and its timer. */
SEC("struct_ops.s/hl_init")
s32 hl_init(u64 *ctx)
{
	s32 err;
	int i;

	for_each_num(i, 0, nr_llcs) {
		s32 node = llc_node[i & (HL_MAX_LLCS - 1)];

		err = scx_bpf_create_dsq(HL_DSQ_LANE(i), node);
		if (!err)
			err = scx_bpf_create_dsq(HL_DSQ_FAIR(i), node);
		if (err) {
			hl_error("create the queues of LLC %d: %d", i, err);
			return err;
		}
	}
	for_each_num(i, 0, nr_cpus) {
		err = scx_bpf_create_dsq(HL_DSQ_PINNED(i), llc_node[llc_of(i)]);
		if (err) {
			hl_error("create the pinned queue of CPU %d: %d", i, err);
			return err;
		}
	}
	err = quota_init();
	if (err)
		hl_error("ready cpu.max's throttled queue and timer: %d", err);
	return err;
}

SEC("struct_ops/hl_exit")
int hl_exit(u64 *ctx)
{
	struct scx_exit_info *ei = (void *)ctx[0];

	exit_info.kind = ei->kind;
	exit_info.exit_code = ei->exit_code;
	bpf_probe_read_kernel_str(exit_info.reason, sizeof(exit_info.reason), ei->reason);
	bpf_probe_read_kernel_str(exit_info.msg, sizeof(exit_info.msg), ei->msg);
	if (ei->dump)
		bpf_probe_read_kernel_str(exit_info.dump, sizeof(exit_info.dump), ei->dump);
	return 0;
}

/*
 * Device matchers: a thread that opens a device of a set, or issues an
 * ioctl on one, is stamped for the classifier. Loaded and attached only
 * when the policy has device matchers.
 */
SEC("fentry/security_file_open")
int hl_device_open(u64 *ctx)
{
	hl_device_used((struct file *)ctx[0]);
	return 0;
}

SEC("fentry/security_file_ioctl")
int hl_device_ioctl(u64 *ctx)
{
	hl_device_used((struct file *)ctx[0]);
	return 0;
}

/*
 * flags and timeout_ms are rewritten by the loader (partial mode, the
 * watchdog timeout); the values here are the defaults.
 */
SEC(".struct_ops.link")
struct sched_ext_ops hotlane_ops = {
	.select_cpu = (void *)hl_select_cpu,
	.enqueue = (void *)hl_enqueue,
	.dispatch = (void *)hl_dispatch,
	.tick = (void *)hl_tick,
	.runnable = (void *)hl_runnable,
	.running = (void *)hl_running,
	.stopping = (void *)hl_stopping,
	.quiescent = (void *)hl_quiescent,
	.yield = (void *)hl_yield,
	.cpu_release = (void *)hl_cpu_release,
	.init_task = (void *)hl_init_task,
	.cgroup_init = (void *)hl_cgroup_init,
	.cgroup_exit = (void *)hl_cgroup_exit,
	.cgroup_set_weight = (void *)hl_cgroup_set_weight,
#if HL_SCX_API >= 700
	.cgroup_set_bandwidth = (void *)hl_cgroup_set_bandwidth,
#endif
	.cgroup_move = (void *)hl_cgroup_move,
	.cpu_online = (void *)hl_cpu_online,
	.cpu_offline = (void *)hl_cpu_offline,
	.init = (void *)hl_init,
	.exit = (void *)hl_exit,
	.timeout_ms = 5000,
	.name = "hotlane",
};
