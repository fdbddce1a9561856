//go:build ignore

/*
 * sched.bpf.c - hotlane: a sched_ext scheduler with a high-priority lane.
 *
 * Tasks are put in classes by the shared classifier (classify.bpf.h) using
 * the rule table the loader compiled from the policy. Classes marked high
 * priority ("inference") share one FIFO dispatch queue that every CPU
 * consumes first; all other classes share one weighted-vtime queue. Policy
 * decisions, in the order a task meets them:
 *
 *  1. select_cpu: a waking task that finds an idle CPU is inserted straight
 *     into that CPU's local queue. No shared queue, no lock, no latency.
 *  2. enqueue: per-CPU kthreads go to their CPU's local queue and preempt
 *     whatever runs there: they are short and other work waits on them.
 *     High-priority tasks go to the high queue; if their class may preempt,
 *     a wake-up kicks a CPU for them (an idle one if any, else this CPU or
 *     the one whose lower-class task has run the longest). Other tasks go
 *     to the fair queue in vtime order, with at most one slice of banked
 *     credit and HL_MAX_DEBT slices of debt, stamped with the time they
 *     entered it; an idle CPU, if any, is kicked for them.
 *  3. dispatch: the high queue first, then the fair queue. When a fair
 *     task has waited starvation_ns while high-priority tasks are queued,
 *     a starvation guard gives the longest-waiting fair tasks (up to 8) a
 *     turn on this CPU, shielded from preemption, and kicks another CPU
 *     for the high queue; one turn at a time, at most one per
 *     starvation_ns: high-priority tasks saturating every CPU cannot
 *     starve any other, and the guard never holds more than one CPU.
 *  4. running/stopping: per-CPU bookkeeping for victim selection, and the
 *     vtime charge of fair tasks (time run, scaled by class and task
 *     weight).
 *  5. cpu_online/cpu_offline: a CPU that comes or goes starts idle; with
 *     these, the kernel keeps the scheduler through CPU hotplug.
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
/* The kernel's scheduler tick (1/HZ): a slice only ends on one. */
const volatile u64 tick_ns = 4ULL * 1000 * 1000;
/* Test knob, not a feature: call scx_bpf_error() after this many enqueues. */
const volatile u64 debug_error_after = 0;

/* The fair queue's clock: the largest vtime of a fair task that ran. */
u64 vtime_now;
/* When the starvation guard next needs to look: no fair task is overdue
 * before then, or the last turn is still running. */
u64 guard_next_at;
u64 nr_enqueues;

/* Who runs on each CPU, for choosing a preemption victim. */
struct hl_cpu {
	u64 started_at;
	u32 busy;
	u32 shielded;	/* a high-priority task, or a guard turn: no victim */
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

/* Per fair task, for the starvation guard. */
struct hl_fair_wait {
	u64 queued_at;	/* when it last entered the fair queue */
	u32 guard_turn;	/* moved to a CPU by the guard, not yet running */
	u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hl_fair_wait);
} fair_waits SEC(".maps");

bool bpf_cpumask_test_cpu(u32 cpu, const struct cpumask *cpumask) __ksym;
s32 scx_bpf_pick_idle_cpu(const struct cpumask *cpus_allowed, u64 flags) __ksym;

static __always_inline struct hl_stats *stats_get(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

static __always_inline const volatile struct hl_class *class_get(u32 id)
{
	return &hl_classes[id < HL_MAX_CLASSES ? id : HL_MAX_CLASSES - 1];
}

static __always_inline bool is_percpu_kthread(struct task_struct *p)
{
	return (p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1;
}

/* May p (or, if NULL, any high-priority task) preempt the task running on
 * cpu: a busy CPU, not running high priority or a guard turn? */
static __always_inline struct hl_cpu *preemptible(struct task_struct *p, u32 cpu)
{
	struct hl_cpu *c;

	if (cpu >= nr_cpus || (p && !bpf_cpumask_test_cpu(cpu, p->cpus_ptr)))
		return NULL;
	c = bpf_map_lookup_elem(&cpus, &cpu);
	if (!c || !c->busy || c->shielded)
		return NULL;
	return c;
}

/*
 * Make a CPU pick up a high-priority task that just woke: an idle CPU if
 * there is one; else this CPU, when it runs a lower class, because a local
 * reschedule needs no IPI; else the allowed CPU whose lower-class task has
 * run the longest, since it has had the most of its share.
 */
static void kick_for(struct task_struct *p, struct hl_stats *st)
{
	u64 now = bpf_ktime_get_ns(), longest = 0;
	s32 cpu, victim = -1;

	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu >= 0) {
		scx_bpf_kick_cpu(cpu, HL_KICK_IDLE);
		if (st)
			st->idle_kicks++;
		return;
	}

	cpu = bpf_get_smp_processor_id();
	if (preemptible(p, cpu)) {
		victim = cpu;
	} else {
		for (u32 i = 0; i < HL_MAX_CPUS; i++) {
			struct hl_cpu *c;

			if (i >= nr_cpus)
				break;
			c = preemptible(p, i);
			if (c && now - c->started_at >= longest) {
				longest = now - c->started_at;
				victim = i;
			}
		}
	}
	if (victim >= 0) {
		scx_bpf_kick_cpu(victim, HL_KICK_PREEMPT);
		if (st)
			st->preempt_kicks++;
	}
}

SEC("struct_ops/hl_select_cpu")
s32 hl_select_cpu(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	s32 prev_cpu = ctx[1];
	u64 wake_flags = ctx[2];
	bool is_idle = false;
	s32 cpu;

	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle) {
		u32 cls = hl_classify(p);
		const volatile struct hl_class *c = class_get(cls);
		struct hl_stats *st = stats_get();

		/* The CPU was idle when picked, but another task may reach it
		 * first; a preempting class must not queue behind it. */
		hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, c->preempt ? HL_ENQ_PREEMPT : 0);
		if (st && cls < HL_MAX_CLASSES)
			st->direct_idle[cls]++;
	}
	return cpu;
}

SEC("struct_ops/hl_enqueue")
int hl_enqueue(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	u64 enq_flags = ctx[1];
	u32 cls = hl_classify(p);
	const volatile struct hl_class *c = class_get(cls);
	struct hl_stats *st = stats_get();
	struct hl_fair_wait *w;
	u64 vtime, n;
	s32 idle;

	/* The test knob is a load-time constant: off, no shared counter. */
	if (debug_error_after) {
		n = __sync_fetch_and_add(&nr_enqueues, 1) + 1;
		if (n == debug_error_after)
			hl_error("debug: error injected after %llu enqueues", n);
	}
	if (st && cls < HL_MAX_CLASSES)
		st->enqueued[cls]++;

	if (is_percpu_kthread(p)) {
		hl_dsq_insert(p, HL_DSQ_LOCAL, c->slice_ns, enq_flags | HL_ENQ_PREEMPT);
		if (st)
			st->kthread_direct++;
		return 0;
	}

	if (c->high_priority) {
		hl_dsq_insert(p, HL_DSQ_HIGH, c->slice_ns, enq_flags);
		/* Only wake-ups kick: a task whose slice ran out is requeued on
		 * its own CPU, which serves the high queue first anyway. */
		if (c->preempt && (enq_flags & HL_ENQ_WAKEUP))
			kick_for(p, st);
		return 0;
	}

	/*
	 * Credit for time spent sleeping is capped at one slice, and debt at
	 * HL_MAX_DEBT slices: a very low weight (nice 19 is 1/100 of nice 0)
	 * would otherwise put a task so far ahead in vtime that, while the
	 * starvation guard is all the fair queue gets, it never reaches the
	 * head before the watchdog fires.
	 */
	vtime = p->scx.dsq_vtime;
	if ((s64)(vtime - (vtime_now - c->slice_ns)) < 0)
		vtime = vtime_now - c->slice_ns;
	if ((s64)(vtime - (vtime_now + HL_MAX_DEBT * c->slice_ns)) > 0)
		vtime = vtime_now + HL_MAX_DEBT * c->slice_ns;
	/* Without storage (out of memory) the guard sees no stamp and takes
	 * the task for the longest waiting: served early, never starved. */
	w = bpf_task_storage_get(&fair_waits, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (w) {
		w->queued_at = bpf_ktime_get_ns();
		/* A guard turn it never started (it left the CPU's queue
		 * first) must not shield its next ordinary run. */
		w->guard_turn = 0;
	}
	hl_dsq_insert_vtime(p, HL_DSQ_FAIR, c->slice_ns, vtime, enq_flags);

	/* A queued task must not wait while a CPU idles. */
	idle = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (idle >= 0)
		scx_bpf_kick_cpu(idle, HL_KICK_IDLE);
	return 0;
}

#define HL_GUARD_BATCH 8

/*
 * The guard's scratch: the longest-waiting task found by a walk of the fair
 * queue. It lives in a per-CPU map, not in registers or on the stack: the
 * verifier tracks those exactly, so a value that changes as the walk goes
 * gives it a new state per step and the walk never converges; map values
 * it does not track.
 */
struct hl_guard_scan {
	u64 oldest_at;
	s32 pid;
	u32 found;
	u32 overdue;	/* tasks that have waited starvation_ns */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct hl_guard_scan);
} guard_scans SEC(".maps");

/* Without storage (out of memory) a task has no stamp: it counts as the
 * longest waiting, so it is served early, never starved. */
static __always_inline u64 queued_at(struct task_struct *p)
{
	struct hl_fair_wait *w = bpf_task_storage_get(&fair_waits, p, NULL, 0);

	return w ? w->queued_at : 0;
}

/*
 * The guard works by age, not vtime: while guard turns are all the fair
 * queue gets, tasks that wake with a slice of credit would keep landing
 * ahead of one that ran up debt. guard_find() walks the fair queue for the
 * longest-waiting task and counts the overdue ones (a task queued on
 * another CPU after now was read has a stamp after now: signed compares).
 */
static __always_inline void guard_find(struct hl_guard_scan *sc, u64 now)
{
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	u64 at;

	sc->found = 0;
	sc->overdue = 0;
	if (bpf_iter_scx_dsq_new(&it, HL_DSQ_FAIR, 0) == 0) {
		while ((p = bpf_iter_scx_dsq_next(&it))) {
			at = queued_at(p);
			if ((s64)(now - at) >= (s64)starvation_ns)
				sc->overdue++;
			if (!sc->found || at < sc->oldest_at) {
				sc->found = 1;
				sc->oldest_at = at;
				sc->pid = p->pid;
			}
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
}

/* Move the task guard_find() found to this CPU for turn_ns, marked so that
 * running shields it from preemption. The move needs the iterator that
 * yields the task, so this walks again. */
static __always_inline bool guard_move(struct hl_guard_scan *sc, u64 turn_ns)
{
	struct bpf_iter_scx_dsq it;
	struct hl_fair_wait *w;
	struct task_struct *p;
	bool moved = false;

	if (bpf_iter_scx_dsq_new(&it, HL_DSQ_FAIR, 0) == 0) {
		while ((p = bpf_iter_scx_dsq_next(&it))) {
			if (p->pid != sc->pid)
				continue;
			hl_dsq_move_set_slice(&it, turn_ns);
			moved = hl_dsq_move(&it, p, HL_DSQ_LOCAL, 0);
			if (moved) {
				w = bpf_task_storage_get(&fair_waits, p, NULL, 0);
				if (w)
					w->guard_turn = 1;
			}
			break;
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	return moved;
}

/* Make a CPU other than this one, running neither high priority nor a
 * guard turn, pick up the high queue while this one serves the guard. */
static void kick_for_high_queue(void)
{
	u32 self = bpf_get_smp_processor_id();

	for (u32 i = 0; i < HL_MAX_CPUS; i++) {
		if (i >= nr_cpus)
			break;
		if (i != self && preemptible(NULL, i)) {
			scx_bpf_kick_cpu(i, HL_KICK_PREEMPT);
			return;
		}
	}
}

/*
 * The starvation guard, called while high-priority tasks are queued. If a
 * fair task has waited starvation_ns, the longest-waiting ones, oldest
 * first and up to HL_GUARD_BATCH of those overdue, move to this CPU and
 * share starvation_ns / 2, and another CPU is kicked for the high queue.
 * A slice only ends on a tick, so each takes at least a tick, and the next
 * turn waits for this one to end: one CPU at most serves the guard, and
 * then for at most half the time unless ticks are coarse. Returns how many
 * tasks moved.
 */
static u32 guard(u64 now)
{
	struct hl_guard_scan *sc;
	struct hl_stats *st;
	u32 zero = 0, moved = 0, n;
	u64 turn_ns;

	sc = bpf_map_lookup_elem(&guard_scans, &zero);
	if (!sc)
		return 0;
	guard_find(sc, now);
	if (!sc->found) {
		guard_next_at = now + starvation_ns;
		return 0;
	}
	if ((s64)(now - sc->oldest_at) < (s64)starvation_ns) {
		guard_next_at = sc->oldest_at + starvation_ns;
		return 0;
	}
	n = sc->overdue < HL_GUARD_BATCH ? sc->overdue : HL_GUARD_BATCH;
	turn_ns = starvation_ns / 2 / (n ?: 1);
	if (turn_ns < tick_ns)
		turn_ns = tick_ns;
	for (u32 i = 0; i < HL_GUARD_BATCH && i < n; i++) {
		if (i > 0) {
			guard_find(sc, now);
			if (!sc->found || (s64)(now - sc->oldest_at) < (s64)starvation_ns)
				break;
		}
		/* A task that left the queue meanwhile is not moved; the next
		 * walk finds the next oldest. */
		if (guard_move(sc, turn_ns))
			moved++;
	}
	if (!moved)
		return 0;
	guard_next_at = now + (moved * turn_ns > starvation_ns ? moved * turn_ns : starvation_ns);
	kick_for_high_queue();
	st = stats_get();
	if (st)
		st->guard_dispatches += moved;
	return moved;
}

SEC("struct_ops/hl_dispatch")
int hl_dispatch(u64 *ctx)
{
	u64 now = bpf_ktime_get_ns(), next = guard_next_at;

	/*
	 * The guard only matters when the high queue would go first. The CPU
	 * that moves guard_next_at on takes the turn: two CPUs dispatching at
	 * once cannot both start one.
	 */
	if (now >= next && scx_bpf_dsq_nr_queued(HL_DSQ_HIGH) > 0 && scx_bpf_dsq_nr_queued(HL_DSQ_FAIR) > 0 &&
	    __sync_val_compare_and_swap(&guard_next_at, next, now + starvation_ns) == next &&
	    guard(now))
		return 0;
	if (hl_dsq_move_to_local(HL_DSQ_HIGH))
		return 0;
	hl_dsq_move_to_local(HL_DSQ_FAIR);
	return 0;
}

SEC("struct_ops/hl_running")
int hl_running(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	u32 cls = hl_classify(p), key = bpf_get_smp_processor_id();
	const volatile struct hl_class *c = class_get(cls);
	struct hl_stats *st = stats_get();
	struct hl_cpu *cpu = bpf_map_lookup_elem(&cpus, &key);
	u64 now = bpf_ktime_get_ns();
	struct hl_fair_wait *w;

	if (cpu) {
		cpu->started_at = now;
		cpu->busy = 1;
		cpu->shielded = c->high_priority;
	}
	if (st && cls < HL_MAX_CLASSES)
		st->dispatched[cls]++;
	if (!c->high_priority) {
		if ((s64)(p->scx.dsq_vtime - vtime_now) > 0)
			vtime_now = p->scx.dsq_vtime;
		/* A guard turn runs to its end: a wake-up that preempted it at
		 * once would make the guard's service worthless. */
		w = bpf_task_storage_get(&fair_waits, p, NULL, 0);
		if (w && w->guard_turn) {
			w->guard_turn = 0;
			if (cpu)
				cpu->shielded = 1;
		}
	}
	return 0;
}

SEC("struct_ops/hl_stopping")
int hl_stopping(u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	u32 cls = hl_classify(p), key = bpf_get_smp_processor_id();
	const volatile struct hl_class *c = class_get(cls);
	struct hl_cpu *cpu = bpf_map_lookup_elem(&cpus, &key);
	u64 now = bpf_ktime_get_ns(), used, weight;

	if (!cpu)
		return 0;
	cpu->busy = 0;
	if (c->high_priority)
		return 0;

	/* Charge the time run (a guard turn may be shorter than the class's
	 * slice), scaled down by class weight and nice weight. */
	used = now - cpu->started_at;
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
		c->shielded = 0;
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
 * flags and timeout_ms are rewritten by the loader (partial mode, the
 * watchdog timeout); the values here are the defaults.
 */
SEC(".struct_ops.link")
struct sched_ext_ops hotlane_ops = {
	.select_cpu = (void *)hl_select_cpu,
	.enqueue = (void *)hl_enqueue,
	.dispatch = (void *)hl_dispatch,
	.running = (void *)hl_running,
	.stopping = (void *)hl_stopping,
	.enable = (void *)hl_enable,
	.cpu_online = (void *)hl_cpu_online,
	.cpu_offline = (void *)hl_cpu_offline,
	.init = (void *)hl_init,
	.exit = (void *)hl_exit,
	.timeout_ms = 5000,
	.name = "hotlane",
};
