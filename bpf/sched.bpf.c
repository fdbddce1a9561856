//go:build ignore

/*
 * sched.bpf.c - hotlane: a sched_ext scheduler with a high-priority lane.
 *
 * Tasks are put in classes by the shared classifier (classify.bpf.h) using
 * the rule table the loader compiled from the policy. Classes marked high
 * priority (the "lane", e.g. inference) share one FIFO dispatch queue that
 * every CPU consumes first; all other classes share one weighted-vtime
 * queue. Policy decisions, in the order a task meets them:
 *
 *  1. select_cpu: a waking task that finds an idle CPU is inserted straight
 *     into that CPU's local queue. No shared queue, no lock, no latency. A
 *     lane task that finds none is woken on a CPU running fair work (this
 *     one if it may, else the one whose fair task has run longest) and
 *     inserted into its local queue, preempting that task. That CPU is
 *     no victim for the next lane wake-up until it has switched.
 *  2. enqueue: tasks that may not leave their CPU (migration disabled)
 *     and per-CPU kthreads go to their CPU's local queue; kthreads preempt
 *     fair work (other work waits on them) but never the lane. Lane tasks
 *     waking up go straight to a CPU's local queue (an idle one if any,
 *     else this CPU or the one whose fair task has run the longest,
 *     preempting it), or to the high queue when the lane holds every CPU
 *     they may use. A lane task that did not wake (requeued, preempted,
 *     handed back by cpu_release) goes to the high queue with such a CPU
 *     kicked to take it. A fair task the lane just preempted goes back to
 *     its CPU's local queue, behind the lane, with the rest of its
 *     slice. Other tasks go to the fair queue in vtime order, with at
 *     most one slice of banked credit and HL_MAX_DEBT slices
 *     of debt; an idle CPU, if any, is kicked for them.
 *  3. dispatch: the high queue first, then the fair queue. A lane task
 *     whose slice ran out keeps its CPU while no other lane task waits:
 *     the kernel asks dispatch before it requeues it, and pulling a fair
 *     task then would make the lane wait a whole fair slice.
 *     The starvation guard is per CPU: a CPU that has given the lane
 *     starvation_ns of its time since it last served the fair queue,
 *     while fair tasks waited, gives the fair queue a short turn
 *     (starvation_ns / 2 of CPU, however many tasks that takes),
 *     shielded from lane preemption. The
 *     turn goes by age, not vtime (the longest-waiting task, so wake-ups
 *     with credit cannot keep a nice-19 task behind them), and only to a
 *     task whose cpus_ptr holds this CPU and
 *     that is not migration-disabled elsewhere: a pinned task can never
 *     make the kernel eject the scheduler. It is triggered by the lane
 *     taking the CPU, not by fair tasks waiting for each other, so an
 *     oversubscribed machine with an idle lane never pays for it.
 *  4. tick: a lane task whose slice ends gets a new one while no other
 *     lane task waits, the fair side is not owed a guard turn and the
 *     task still classifies into the lane.
 *  5. running/stopping: per-CPU bookkeeping for victim selection and the
 *     guard, and the vtime charge of fair tasks (time run, scaled by class
 *     and task weight) by the class the task ran as.
 *  6. cpu_release: when an RT or DL task takes a CPU, what waits in its
 *     local queue is requeued, so the lane does not wait behind it.
 *  7. cpu_online/cpu_offline: a CPU that comes or goes starts idle; with
 *     these, the kernel keeps the scheduler through CPU hotplug.
 *  8. open/ioctl of a device (fentry, only for policies with device
 *     matchers): the classifier's note that the thread uses the device.
 *
 * Compiled once per sched_ext kfunc generation (scx_api.h); the loader
 * chooses the object and fills the read-only settings below.
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"
#include "scx_api.h"
#include "classify.bpf.h"

LICENSE("GPL");

#define HL_DSQ_HIGH 1
#define HL_DSQ_FAIR 2
#define HL_MAX_CPUS 512
#define PF_KTHREAD 0x00200000 /* include/linux/sched.h; stable since 2.6 */
#define HL_MAX_DEBT 4 /* slices of vtime a fair task may be behind */
#define HL_MIN_RESUME (100 * 1000) /* ns; less slice left than this is used up */

/* Per-class knobs; mirrored by policy.ClassConfig. */
struct hl_class {
	u64 slice_ns;
	u32 weight;
	u8 high_priority;
	u8 preempt;
	u8 _pad[2];
};

/* Settings, written by the loader before load. */
const volatile struct hl_class hl_classes[HL_MAX_CLASSES];
const volatile u64 starvation_ns = 10ULL * 1000 * 1000;
const volatile u32 nr_cpus = 1;
/* Test knob, not a feature: call scx_bpf_error() after this many enqueues. */
const volatile u64 debug_error_after = 0;

/* The fair queue's clock: the largest vtime of a fair task that ran. */
u64 vtime_now;
u64 nr_enqueues;

/* Who runs on each CPU, for choosing a preemption victim and for the
 * starvation guard. Each CPU writes only its own entry, but for the note
 * a lane wake-up leaves for the CPU it woke the task on. */
struct hl_cpu {
	u64 started_at;	/* when the running task started */
	u64 lane_ns;	/* lane time here since this CPU last served the fair queue or found it empty */
	u64 guard_until;	/* end of the guard turn this CPU is serving */
	u64 run_slice;	/* the slice the running fair task started with */
	u32 busy;
	u32 shielded;	/* a lane task, or a guard turn: no victim */
	u32 guard_turn;	/* the next fair task to run here is a guard turn */
	s32 curr_pid;	/* the task running (or last run) here */
	u32 lane;	/* that task runs (or last ran) as a lane task, not a guard turn */
	u32 class_id;	/* and as this class */
	s32 next_lane_pid;	/* a lane task woken into this CPU's local queue: no victim */
	u32 next_lane_class;	/* and its class: running need not look it up */
	s32 resumed_pid;	/* a preempted fair task put back in the local queue */
	u32 resumed;	/* the running task is that one: not a fair-queue turn */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HL_MAX_CPUS);
	__type(key, u32);
	__type(value, struct hl_cpu);
} cpus SEC(".maps");

/* Counters read by `hotlane run` every stats interval; mirrored by sched's statsRecord. */
struct hl_stats {
	u64 enqueued[HL_MAX_CLASSES];
	u64 dispatched[HL_MAX_CLASSES];	/* times a task of the class started running */
	u64 direct_idle[HL_MAX_CLASSES];	/* woken straight onto an idle CPU */
	u64 preempt_kicks;
	u64 idle_kicks;
	u64 guard_dispatches;
	u64 kthread_direct;
	u64 lane_kept;	/* a lane task's slice ran out and it kept its CPU */
	u64 fair_resumed;	/* a fair task the lane preempted went back to its CPU */
	u64 cpu_released;	/* RT/DL took a CPU; its local queue was requeued */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct hl_stats);
} stats SEC(".maps");

/* Why the scheduler ended, copied from the kernel in ops.exit. */
struct hl_exit_info {
	s64 kind;
	s64 exit_code;
	char reason[128];
	char msg[1024];
};

struct hl_exit_info exit_info;

s32 scx_bpf_pick_idle_cpu(const struct cpumask *cpus_allowed, u64 flags) __ksym;
bool scx_bpf_test_and_clear_cpu_idle(s32 cpu) __ksym;
bool bpf_cpumask_test_cpu(u32 cpu, const struct cpumask *cpumask) __ksym;

static __always_inline struct hl_stats *stats_get(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

static __always_inline struct hl_cpu *cpu_get(s32 cpu)
{
	u32 key = cpu;

	return bpf_map_lookup_elem(&cpus, &key);
}

/*
 * A lane task was just inserted into cpu's local queue, preempting it. The
 * note claims the CPU until its next task runs: a second lane wake-up that
 * took it for a victim too (the fair task is still running there) would
 * queue behind the first, or preempt it, while another CPU runs fair work.
 * Two lane tasks whose timers fire together on one CPU did just that. The
 * note also gives running the class, from the per-CPU entry it touches
 * anyway instead of from task storage.
 */
static __always_inline void note_lane_wakeup(s32 cpu, struct task_struct *p, u32 cls)
{
	struct hl_cpu *c = cpu_get(cpu);

	if (c) {
		c->next_lane_class = cls;
		c->next_lane_pid = p->pid;
	}
}

static __always_inline const volatile struct hl_class *class_get(u32 id)
{
	return &hl_classes[id < HL_MAX_CLASSES ? id : HL_MAX_CLASSES - 1];
}

static __always_inline bool is_percpu_kthread(struct task_struct *p)
{
	return (p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1;
}

/*
 * May p not leave its CPU? A BPF program runs with migration disabled for
 * the task it runs in (the trampoline's migrate_disable()), so the task
 * running a callback counts one more than it holds for every BPF program
 * under way in it: depth is 1 in a callback, and 2 in an enqueue that
 * cpu_release's hand-back calls from inside cpu_release (6.15-6.18), where
 * the task handed back is the one running both. The kernel's own test
 * (is_bpf_migration_disabled) allows for one only; taken at its count, a
 * lane task preempted by an RT task would never leave that CPU (it waited
 * out whole 100 ms bursts on 6.17).
 */
static __always_inline bool migration_disabled(struct task_struct *p, u32 depth)
{
	/* Nearly every task is at 0: no helper call for those. */
	if (!p->migration_disabled)
		return false;
	return p->migration_disabled > (bpf_get_current_task_btf()->pid == p->pid ? depth : 0);
}

/* May p (or, if NULL, any lane task) preempt the task running on cpu: a
 * busy CPU, running neither the lane nor a guard turn, and not claimed by
 * a lane wake-up already? */
static __always_inline struct hl_cpu *preemptible(struct task_struct *p, u32 cpu)
{
	struct hl_cpu *c;

	if (cpu >= nr_cpus || (p && !bpf_cpumask_test_cpu(cpu, p->cpus_ptr)))
		return NULL;
	c = cpu_get(cpu);
	if (!c || !c->busy || c->shielded || c->next_lane_pid)
		return NULL;
	return c;
}

/*
 * The CPU a lane task that just woke should run on now, or -1 for the high
 * queue: an idle CPU if there is one (*idle set; picking it claims it),
 * prev_cpu first for its cache; else this CPU, when it runs fair work,
 * because a local reschedule needs no IPI; else the allowed CPU whose fair
 * task has run the longest, since it has had the most of its share.
 *
 * One pass over the per-CPU bookkeeping finds the victim and tells whether
 * any CPU is not running a task of ours. Only then are the kernel's idle
 * masks searched: on a saturated machine, the case the lane exists for,
 * that search finds nothing and was the dearest part of a wake-up. The
 * pass reads no clock (the longest-running task started first) and tests
 * no cpumask for a task allowed everywhere: every call on the wake-up path
 * is latency the lane pays, and under emulation a dear one.
 */
static s32 lane_target(struct task_struct *p, s32 prev_cpu, bool *idle)
{
	s32 self = bpf_get_smp_processor_id(), victim = -1, cpu, i;
	bool anywhere = p->nr_cpus_allowed >= nr_cpus, all_busy = true, self_ok = false;
	u64 first = 0;

	*idle = false;
	for_each_num(i, 0, nr_cpus) {
		struct hl_cpu *c = cpu_get(i);

		if (!c)
			continue;
		if (!c->busy) {
			all_busy = false;
			continue;
		}
		if (c->shielded || c->next_lane_pid || (!anywhere && !bpf_cpumask_test_cpu(i, p->cpus_ptr)))
			continue;
		if (i == self)
			self_ok = true;
		else if (victim < 0 || c->started_at < first) {
			first = c->started_at;
			victim = i;
		}
	}
	if (!all_busy) {
		if (prev_cpu >= 0 && (anywhere || bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr)) &&
		    scx_bpf_test_and_clear_cpu_idle(prev_cpu)) {
			*idle = true;
			return prev_cpu;
		}
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
		if (cpu >= 0) {
			*idle = true;
			return cpu;
		}
	}
	return self_ok ? self : victim;
}

SEC("struct_ops/hl_select_cpu")
s32 hl_select_cpu(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	s32 prev_cpu = ctx[1];
	u64 wake_flags = ctx[2];
	struct hl_task_class *tc;
	u32 cls = hl_classify(p, &tc);
	const volatile struct hl_class *c = class_get(cls);
	struct hl_stats *st = stats_get();
	bool is_idle = false;
	s32 cpu;

	/*
	 * A lane wake-up is woken on the CPU it will run on, straight into
	 * that CPU's local queue: an idle one, or one whose fair task it
	 * preempts. The wake-up then needs no enqueue callback and no move
	 * between runqueues. A migration-disabled task stays where it is.
	 */
	if (c->high_priority && c->preempt && !migration_disabled(p, 1)) {
		cpu = lane_target(p, prev_cpu, &is_idle);
		if (cpu >= 0 && is_idle) {
			/*
			 * Into the high queue, not the idle CPU's local one: an
			 * RT task that takes that CPU before it leaves idle
			 * calls no cpu_release (only a CPU running one of ours
			 * does), and the lane task would wait out its burst.
			 * The wake-up's IPI still wakes that CPU to take it.
			 */
			hl_dsq_insert(p, HL_DSQ_HIGH, c->slice_ns, 0);
			if (st)
				st->direct_idle[cls < HL_MAX_CLASSES ? cls : 0]++;
			return cpu;
		}
		if (cpu >= 0) {
			hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, HL_ENQ_PREEMPT);
			note_lane_wakeup(cpu, p, cls);
			if (st)
				st->preempt_kicks++;
			return cpu;
		}
		return prev_cpu;
	}

	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle) {
		/* The CPU was idle when picked, but another task may reach it
		 * first; a preempting class must not queue behind it. */
		hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, c->preempt ? HL_ENQ_PREEMPT : 0);
		if (st && cls < HL_MAX_CLASSES)
			st->direct_idle[cls]++;
	}
	return cpu;
}

/* The task's class cache entry, which also records the class it ran as. */
static __always_inline struct hl_task_class *task_class(struct task_struct *p)
{
	return bpf_task_storage_get(&hl_task_classes, p, NULL, 0);
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
 */
static __always_inline bool resume_preempted(struct task_struct *p, u64 enq_flags, struct hl_stats *st)
{
	struct hl_cpu *on;
	s32 self;
	u64 used;

	if (enq_flags & (HL_ENQ_WAKEUP | HL_ENQ_REENQ))
		return false;
	self = bpf_get_smp_processor_id();
	on = cpu_get(self);
	if (!on || on->curr_pid != p->pid || on->lane)
		return false;
	used = bpf_ktime_get_ns() - on->started_at;
	/* Ran here last is not "queued here": a property change can requeue
	 * it from another CPU. Its cpumask may also have changed meanwhile
	 * (tested only when it is not every CPU). */
	if (used + HL_MIN_RESUME >= on->run_slice || scx_bpf_task_cpu(p) != self ||
	    (p->nr_cpus_allowed < nr_cpus && !bpf_cpumask_test_cpu(self, p->cpus_ptr)) ||
	    scx_bpf_dsq_nr_queued(HL_DSQ_LOCAL) <= 0)
		return false;
	hl_dsq_insert(p, HL_DSQ_LOCAL, on->run_slice - used, enq_flags);
	on->resumed_pid = p->pid;
	if (st) {
		st->enqueued[on->class_id < HL_MAX_CLASSES ? on->class_id : 0]++;
		st->fair_resumed++;
	}
	return true;
}

SEC("struct_ops/hl_enqueue")
int hl_enqueue(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	u64 enq_flags = ctx[1];
	struct hl_stats *st = stats_get();
	const volatile struct hl_class *c;
	struct hl_task_class *tc;
	struct hl_cpu *on;
	bool idle = false;
	u64 vtime, n;
	s32 target;
	u32 cls;

	/* The test knob is a load-time constant: off, no shared counter. */
	if (debug_error_after) {
		n = __sync_fetch_and_add(&nr_enqueues, 1) + 1;
		if (n == debug_error_after)
			hl_error("debug: error injected after %llu enqueues", n);
	}
	if (resume_preempted(p, enq_flags, st))
		return 0;
	cls = hl_classify(p, &tc);
	c = class_get(cls);
	if (st && cls < HL_MAX_CLASSES)
		st->enqueued[cls]++;

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
		hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, enq_flags);
		return 0;
	}

	/*
	 * A per-CPU kthread can run nowhere else, so it goes to its own CPU's
	 * local queue (enqueue runs on that CPU's runqueue). It preempts fair
	 * work, which often waits on it (kworkers, ksoftirqd), but not the
	 * lane or a guard turn: it runs when their slice ends.
	 */
	if (is_percpu_kthread(p)) {
		on = cpu_get(scx_bpf_task_cpu(p));
		if (!on || !on->shielded)
			enq_flags |= HL_ENQ_PREEMPT;
		hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, enq_flags);
		if (st)
			st->kthread_direct++;
		return 0;
	}

	/*
	 * A lane wake-up goes straight to the local queue of the CPU it should
	 * run on, preempting the fair task there: no shared queue, no
	 * dispatch callback, no second IPI. lane_target() only offers CPUs in
	 * p's cpus_ptr (migration-disabled tasks were queued above).
	 */
	if (c->high_priority) {
		if (c->preempt) {
			target = lane_target(p, scx_bpf_task_cpu(p), &idle);
			/*
			 * Through the high queue, with the target kicked to take
			 * it, for an idle target (for the reason select_cpu
			 * gives) and for a task that did not wake: one requeued
			 * (its slice ran out while another lane task waited, a
			 * guard turn took its CPU, a lane wake-up preempted it)
			 * or handed back by cpu_release. Such a task is still
			 * the one this CPU is switching away from, so no other
			 * CPU can take it yet; the kick makes the target ask
			 * dispatch once it has. Without the kick it waited for
			 * that CPU's next tick, or its whole slice if shielded.
			 */
			if (target >= 0 && (!(enq_flags & HL_ENQ_WAKEUP) || idle)) {
				hl_dsq_insert(p, HL_DSQ_HIGH, c->slice_ns, enq_flags);
				scx_bpf_kick_cpu(target, idle ? HL_KICK_IDLE : HL_KICK_PREEMPT);
				if (st && idle)
					st->idle_kicks++;
				return 0;
			}
			if (target >= 0) {
				hl_dsq_insert(p, HL_DSQ_LOCAL_ON | target, c->slice_ns, enq_flags | HL_ENQ_PREEMPT);
				note_lane_wakeup(target, p, cls);
				if (st)
					st->preempt_kicks++;
				return 0;
			}
		}
		/* No CPU to take: the lane holds every allowed one, and every
		 * CPU serves the high queue before the fair one. */
		hl_dsq_insert(p, HL_DSQ_HIGH, c->slice_ns, enq_flags);
		return 0;
	}

	/*
	 * Credit for time spent sleeping is capped at one slice, and debt at
	 * HL_MAX_DEBT slices: a very low weight (nice 19 is 1/100 of nice 0)
	 * would otherwise put a task so far behind in vtime that, while guard
	 * turns are all the fair queue gets, it never reaches the head.
	 */
	vtime = p->scx.dsq_vtime;
	if ((s64)(vtime - (vtime_now - c->slice_ns)) < 0)
		vtime = vtime_now - c->slice_ns;
	if ((s64)(vtime - (vtime_now + HL_MAX_DEBT * c->slice_ns)) > 0)
		vtime = vtime_now + HL_MAX_DEBT * c->slice_ns;
	if (tc)
		tc->queued_at = bpf_ktime_get_ns();
	hl_dsq_insert_vtime(p, HL_DSQ_FAIR, c->slice_ns, vtime, enq_flags);

	/* A queued task must not wait while a CPU idles. */
	target = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (target >= 0)
		scx_bpf_kick_cpu(target, HL_KICK_IDLE);
	return 0;
}

/* Make a CPU other than this one, running neither the lane nor a guard
 * turn, pick up the high queue while this one serves the guard. */
static void kick_for_high_queue(s32 self)
{
	s32 i;

	for_each_num(i, 0, nr_cpus) {
		if (i != self && preemptible(NULL, i)) {
			scx_bpf_kick_cpu(i, HL_KICK_PREEMPT);
			return;
		}
	}
}

#define HL_GUARD_SCAN 64 /* fair tasks one guard turn looks at, at most */

/* Can p be moved to this CPU's local queue? A task outside its cpus_ptr
 * (taskset, cpusets) or migration-disabled on another CPU would make the
 * kernel eject the scheduler. */
static __always_inline bool may_run_here(struct task_struct *p, s32 self)
{
	if (!bpf_cpumask_test_cpu(self, p->cpus_ptr))
		return false;
	return !migration_disabled(p, 1) || scx_bpf_task_cpu(p) == self;
}

/* Without storage (out of memory) a task has no stamp: it counts as the
 * longest waiting, so it is served early, never starved. */
static __always_inline u64 queued_at(struct task_struct *p)
{
	struct hl_task_class *tc = task_class(p);

	return tc ? tc->queued_at : 0;
}

/*
 * The guard's scratch: the longest-waiting task a walk of the fair queue
 * found, and how many tasks the walk has seen. It lives in a per-CPU map,
 * not in registers or on the stack: the verifier tracks those exactly, so
 * a value that changes as the walk goes gives it a new state per step and
 * the walk never converges; map values it does not track. The count on
 * the stack made hl_dispatch cost the verifier 95k instructions, 7k in
 * the map.
 */
struct hl_guard_scan {
	u64 oldest_at;
	s32 pid;
	u32 found;
	u32 seen;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct hl_guard_scan);
} guard_scans SEC(".maps");

/*
 * A guard turn goes to the longest-waiting fair task that may run here, by
 * age, not vtime: while guard turns are all the fair queue gets, wake-ups
 * with a slice of credit would keep landing ahead of a task that ran up
 * debt (nice 19), and tasks that keep waking would keep becoming overdue
 * ahead of it. One walk finds it and another moves it (a move needs the
 * iterator that yields the task), each over at most HL_GUARD_SCAN tasks,
 * at most once per starvation_ns per CPU and only while the lane keeps
 * this CPU.
 */
static __always_inline bool guard_serve(s32 self)
{
	struct bpf_iter_scx_dsq it;
	struct hl_guard_scan *sc;
	struct task_struct *p;
	bool moved = false;
	u32 zero = 0;
	u64 at;

	sc = bpf_map_lookup_elem(&guard_scans, &zero);
	if (!sc)
		return false;
	sc->found = 0;
	sc->seen = 0;
	if (bpf_iter_scx_dsq_new(&it, HL_DSQ_FAIR, 0) == 0) {
		while ((p = bpf_iter_scx_dsq_next(&it))) {
			if (++sc->seen > HL_GUARD_SCAN)
				break;
			if (!may_run_here(p, self))
				continue;
			at = queued_at(p);
			if (!sc->found || at < sc->oldest_at) {
				sc->found = 1;
				sc->oldest_at = at;
				sc->pid = p->pid;
			}
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	if (!sc->found)
		return false;

	sc->seen = 0;
	if (bpf_iter_scx_dsq_new(&it, HL_DSQ_FAIR, 0) == 0) {
		while ((p = bpf_iter_scx_dsq_next(&it))) {
			if (++sc->seen > HL_GUARD_SCAN)
				break;
			if (p->pid != sc->pid)
				continue;
			/* Checked again: the walks do not hold the queue. */
			if (may_run_here(p, self))
				moved = hl_dsq_move(&it, p, HL_DSQ_LOCAL, 0);
			break;
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	return moved;
}

/* The class of prev if the kernel is about to requeue it (still runnable,
 * its slice used up), or NULL. Only tasks of ours carry SCX_TASK_QUEUED. */
static __always_inline const volatile struct hl_class *requeued_prev(struct task_struct *prev)
{
	struct hl_task_class *tc;

	if (!prev || !(prev->scx.flags & HL_TASK_QUEUED))
		return NULL;
	return class_get(hl_classify(prev, &tc));
}

/*
 * The guard's clock: lane time on this CPU since it last served the fair
 * queue or found it empty, the running lane task's so far included. Lane
 * time, not wall time: between lane runs, a fair task the lane preempted
 * runs the rest of its slice, which is no turn of the fair queue but is
 * not the lane's doing either. Counted in wall time, it made a CPU that
 * gave the lane a tenth of its time owe guard turns, each one shielding
 * it from the lane for starvation_ns / 2.
 */
static __always_inline u64 lane_owed(struct hl_cpu *c, u64 now)
{
	return c->lane_ns + (c->lane && c->busy ? now - c->started_at : 0);
}

/* This CPU served the fair queue, or found it empty: it owes it nothing,
 * and a lane task running here counts from now. */
static __always_inline void fair_served(struct hl_cpu *c, u64 now)
{
	c->lane_ns = 0;
	if (c->lane && c->busy)
		c->started_at = now;
}

SEC("struct_ops/hl_dispatch")
int hl_dispatch(u64 *ctx)
{
	s32 self = ctx[0];
	struct task_struct *prev = (void *)ctx[1];
	struct hl_cpu *c = cpu_get(self);
	u64 now = bpf_ktime_get_ns();
	bool fair_waits = scx_bpf_dsq_nr_queued(HL_DSQ_FAIR) > 0;
	bool lane_waits = scx_bpf_dsq_nr_queued(HL_DSQ_HIGH) > 0;
	const volatile struct hl_class *pc = lane_waits ? NULL : requeued_prev(prev);
	bool keep_prev = pc && pc->high_priority;
	struct hl_stats *st;
	bool in_turn;

	if (!c)
		return 0;
	/* Nobody waits for a fair turn: this CPU owes the fair queue nothing. */
	if (!fair_waits)
		fair_served(c, now);

	/*
	 * The starvation guard. This CPU has given the lane starvation_ns
	 * since it last served the fair queue, while fair tasks waited: for
	 * the next starvation_ns / 2 it serves the fair queue, oldest first, before the
	 * lane, each task shielded at running. A turn is a time budget, not
	 * one task: fair tasks that block at once do not use it up. Someone
	 * else is kicked to take the lane from a fair task meanwhile.
	 */
	in_turn = (s64)(now - c->guard_until) < 0;
	if (fair_waits && (in_turn || ((lane_waits || keep_prev) && lane_owed(c, now) >= starvation_ns)) &&
	    guard_serve(self)) {
		c->guard_turn = 1;
		fair_served(c, now);
		if (!in_turn) {
			c->guard_until = now + starvation_ns / 2;
			if (lane_waits)
				kick_for_high_queue(self);
			st = stats_get();
			if (st)
				st->guard_dispatches++;
		}
		return 0;
	}
	if (lane_waits && hl_dsq_move_to_local(HL_DSQ_HIGH))
		return 0;
	/*
	 * A lane task whose slice ran out and no other lane task waits: it
	 * keeps the CPU with a new slice. Returning without one would let the
	 * kernel requeue it behind whatever the fair queue gave this CPU.
	 */
	if (keep_prev) {
		prev->scx.slice = pc->slice_ns;
		st = stats_get();
		if (st)
			st->lane_kept++;
		return 0;
	}
	hl_dsq_move_to_local(HL_DSQ_FAIR);
	return 0;
}

/*
 * A lane task's slice ends at a tick. If no other lane task waits and the
 * fair side is not owed a guard turn, it gets a new slice here, before the
 * kernel looks: it keeps running with no dispatch, no requeue, and no
 * chance of the fair task it preempted (waiting in the local queue, which
 * the kernel runs without asking dispatch) going first.
 */
SEC("struct_ops/hl_tick")
int hl_tick(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	struct hl_cpu *cpu = cpu_get(bpf_get_smp_processor_id());
	struct hl_task_class *tc;
	struct hl_stats *st;
	u64 now;
	u32 cls;

	if (!cpu)
		return 0;
	/* A fair task gives way at the tick to a lane task waiting in the
	 * high queue, which no kick has yet brought here. */
	if (!cpu->lane) {
		if (!cpu->shielded && scx_bpf_dsq_nr_queued(HL_DSQ_HIGH) > 0)
			p->scx.slice = 0;
		return 0;
	}
	if (p->scx.slice)
		return 0;
	if (scx_bpf_dsq_nr_queued(HL_DSQ_HIGH) > 0)
		return 0;
	now = bpf_ktime_get_ns();
	if (scx_bpf_dsq_nr_queued(HL_DSQ_FAIR) <= 0 && scx_bpf_dsq_nr_queued(HL_DSQ_LOCAL) <= 0)
		fair_served(cpu, now);
	else if (lane_owed(cpu, now) >= starvation_ns)
		return 0;
	/* A task that never sleeps is classified here, once a slice: one
	 * that left the lane (renamed, moved, its device idle) gives way. */
	cls = hl_classify(p, &tc);
	if (!class_get(cls)->high_priority)
		return 0;
	p->scx.slice = class_get(cls)->slice_ns;
	st = stats_get();
	if (st)
		st->lane_kept++;
	return 0;
}

SEC("struct_ops/hl_running")
int hl_running(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	struct hl_cpu *cpu = cpu_get(bpf_get_smp_processor_id());
	const volatile struct hl_class *c;
	struct hl_task_class *tc;
	struct hl_stats *st;
	u64 now, turn;
	u32 cls;

	if (!cpu)
		return 0;
	/* Classified a moment ago, when it woke or was queued; a lane
	 * wake-up left its class in this CPU's entry. Whoever runs, the
	 * CPU's claim ends here: it is a victim again by what runs now. */
	if (cpu->next_lane_pid == p->pid) {
		cls = cpu->next_lane_class;
	} else {
		tc = task_class(p);
		cls = tc && tc->valid ? tc->class_id : hl_classify(p, &tc);
	}
	cpu->next_lane_pid = 0;
	c = class_get(cls);
	st = stats_get();
	if (st && cls < HL_MAX_CLASSES)
		st->dispatched[cls]++;
	now = bpf_ktime_get_ns();
	cpu->started_at = now;
	cpu->curr_pid = p->pid;
	cpu->busy = 1;
	cpu->shielded = c->high_priority;
	cpu->lane = c->high_priority;
	cpu->class_id = cls;
	cpu->resumed = 0;
	if (c->high_priority)
		return 0;

	/*
	 * A fair task resuming the rest of its slice after the lane
	 * preempted it is not a turn of the fair queue: counting it as one
	 * would let a CPU alternate between the lane and the task it
	 * preempts while a task pinned here waits in the fair queue forever.
	 */
	if (p->pid == cpu->resumed_pid) {
		cpu->resumed_pid = 0;
		cpu->resumed = 1;
	} else {
		fair_served(cpu, now);
	}
	if ((s64)(p->scx.dsq_vtime - vtime_now) > 0)
		vtime_now = p->scx.dsq_vtime;
	/*
	 * A guard turn runs to its end, shielded: a lane wake-up that
	 * preempted it at once would make the guard worthless. It ends with
	 * the turn's budget (a slice only ends on a tick), so the lane keeps
	 * most of a CPU it saturates.
	 */
	if (cpu->guard_turn) {
		cpu->guard_turn = 0;
		cpu->shielded = 1;
		turn = cpu->guard_until - now;
		if ((s64)turn > 0 && turn < p->scx.slice)
			p->scx.slice = turn;
	}
	cpu->run_slice = p->scx.slice;
	return 0;
}

SEC("struct_ops/hl_stopping")
int hl_stopping(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	bool runnable = ctx[1];
	struct hl_task_class *tc;
	struct hl_cpu *cpu = cpu_get(bpf_get_smp_processor_id());
	const volatile struct hl_class *c;
	u64 now, used, weight;

	if (!cpu)
		return 0;
	/*
	 * Charged as the class it ran as, which running noted for this CPU.
	 * A task that blocks is classified again, so one that renamed itself
	 * or changed cgroup while running shows its new class while it
	 * sleeps. One merely preempted is not: the lane's wake-up waits on
	 * this stop, and the task is classified when it is next woken or
	 * requeued.
	 * cpu->lane stays set until the next task runs: enqueue reads it to
	 * tell a preempted fair task.
	 */
	if (!runnable)
		hl_classify(p, &tc);
	cpu->busy = 0;
	now = bpf_ktime_get_ns();
	used = now - cpu->started_at;
	if (cpu->lane) {
		cpu->lane_ns += used;
		return 0;
	}
	c = class_get(cpu->class_id);

	/* Charge the time run (a guard turn may be shorter than the class's
	 * slice), scaled down by class weight and nice weight. */
	weight = (u64)(c->weight ?: 1) * (p->scx.weight ?: 1);
	hl_set_dsq_vtime(p, p->scx.dsq_vtime + used * 100 * 100 / weight);
	return 0;
}

SEC("struct_ops/hl_enable")
int hl_enable(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];

	hl_set_dsq_vtime(p, vtime_now);
	return 0;
}

/*
 * An RT or DL task took this CPU. Tasks already in its local queue, a lane
 * task woken here included, would wait until it lets go: hand them back
 * to enqueue, which finds the lane another CPU (preempting fair work
 * there) and puts fair tasks back in the fair queue.
 */
SEC("struct_ops/hl_cpu_release")
int hl_cpu_release(u64 *ctx)
{
	struct hl_stats *st = stats_get();

	hl_reenqueue_local();
	if (st)
		st->cpu_released++;
	return 0;
}

/*
 * CPU hotplug. Without these two callbacks the kernel ends the scheduler
 * whenever a CPU goes offline or comes online. Nothing here is per-CPU
 * except the victim bookkeeping: the shared queues need no change, the
 * kernel moves an offline CPU's local tasks away, and picking idle CPUs
 * follows the online mask. An offline CPU is marked idle so that no
 * wake-up kicks it; one coming online starts idle too.
 */
static __always_inline void cpu_reset(s32 cpu)
{
	u32 key = cpu;
	struct hl_cpu *c = bpf_map_lookup_elem(&cpus, &key);

	if (c) {
		c->busy = 0;
		c->lane = 0;
		c->resumed = 0;
		c->resumed_pid = 0;
		c->next_lane_pid = 0;
		c->shielded = 0;
		c->guard_turn = 0;
		c->guard_until = 0;
	}
}

SEC("struct_ops/hl_cpu_online")
int hl_cpu_online(u64 *ctx)
{
	cpu_reset(ctx[0]);
	return 0;
}

SEC("struct_ops/hl_cpu_offline")
int hl_cpu_offline(u64 *ctx)
{
	cpu_reset(ctx[0]);
	return 0;
}

SEC("struct_ops.s/hl_init")
s32 hl_init(u64 *ctx)
{
	s32 err;

	err = scx_bpf_create_dsq(HL_DSQ_HIGH, -1);
	if (err) {
		hl_error("create high-priority DSQ: %d", err);
		return err;
	}
	err = scx_bpf_create_dsq(HL_DSQ_FAIR, -1);
	if (err) {
		hl_error("create fair DSQ: %d", err);
		return err;
	}
	return 0;
}

SEC("struct_ops/hl_exit")
int hl_exit(u64 *ctx)
{
	struct scx_exit_info *ei = (void *)ctx[0];

	exit_info.kind = ei->kind;
	exit_info.exit_code = ei->exit_code;
	bpf_probe_read_kernel_str(exit_info.reason, sizeof(exit_info.reason), ei->reason);
	bpf_probe_read_kernel_str(exit_info.msg, sizeof(exit_info.msg), ei->msg);
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
	.running = (void *)hl_running,
	.stopping = (void *)hl_stopping,
	.enable = (void *)hl_enable,
	.cpu_release = (void *)hl_cpu_release,
	.cpu_online = (void *)hl_cpu_online,
	.cpu_offline = (void *)hl_cpu_offline,
	.init = (void *)hl_init,
	.exit = (void *)hl_exit,
	.timeout_ms = 5000,
	.name = "hotlane",
};
