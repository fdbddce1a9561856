//go:build ignore

/*
 * runqlat.bpf.c - run-queue latency, per class, from the scheduler's own
 * events: how long a runnable task waits until it gets a CPU. The design,
 * and where it departs from bcc's runqlat: docs/design.md, "The tracer".
 *
 * A wait starts at sched_waking (sched_wakeup_new for a new task) or at a
 * sched_switch that leaves its task runnable (the preempt argument, or a
 * prev_state argument of TASK_RUNNING), and ends at the sched_switch that
 * puts the task on a CPU; the idle task is skipped. Wait state lives in
 * task-local storage (tp_btf), or in a pid-keyed hash cleared at
 * sched_process_free (the raw_tp fallback).
 *
 * Each wait goes to the histogram rows of enum hl_row: one if its cause is
 * not known; three for a task woken by its own hrtimer (its wait, its felt
 * wait from the timer's expiry, the timer's delivery). The loader adds the
 * rows up into the views it reports.
 *
 * Runs are numbered by the task's switch-out count (nvcsw + nivcsw), so for
 * every selected task switch-ins = samples + unmeasured + unstamped, even
 * for switches the tracepoint did not report.
 *
 * Classes come from the scheduler's classifier (classify.bpf.h).
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"
#include "hist.bpf.h"
#include "classify.bpf.h"

LICENSE("GPL");

#define HL_MAX_TASKS 1024

/* Settings, written by the loader before load. */
const volatile u64 threshold_ns[HL_MAX_CLASSES]; /* stream waits above this; 0 = none */
const volatile u32 filter_tgid;		/* 0 = every process */
#define HL_MAX_TIDS 16
const volatile u32 filter_tids[HL_MAX_TIDS];	/* threads to trace, */
const volatile u32 filter_nr_tids;	/* how many; 0 = every thread */
const volatile char filter_comm[HL_COMM_LEN];	/* "" = every comm */
const volatile u32 filter_comm_len;
const volatile bool per_task;		/* keep a histogram per task */
const volatile bool explain;		/* keep each CPU's recent history to explain violations */
const volatile bool kernel_has_ext;	/* CONFIG_SCHED_CLASS_EXT: else every other task is fair */

/* Where the kernel's sched_ext class lives, if kallsyms shows it: a task
 * whose sched_class is this one is scheduled by the BPF scheduler. */
extern void ext_sched_class __ksym __weak;

/* The function of every sleeping task's hrtimer (struct hrtimer_sleeper):
 * an expiring timer with this function wakes the task it belongs to. */
extern void hrtimer_wakeup __ksym __weak;

/*
 * Where a felt wait ends. The loader sets this once it has attached the
 * fexit hooks on the sleep calls (fexit may be refused: then the felt
 * wait ends at the switch-in, like the wait).
 */
volatile bool felt_ends_at_return;

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

/* Which waits a histogram row holds: disjoint, so each sample is counted
 * once per view the loader builds from them. */
enum hl_row {
	HL_ROW_WAIT,		/* no known cause: sched_waking (or preemption) to switch-in */
	HL_ROW_CAUSED_WAIT,	/* a known cause: sched_waking to switch-in */
	HL_ROW_CAUSED_FELT,	/* a known cause: from it to switch-in */
	HL_ROW_DELIVERY,	/* a known cause: from it to sched_waking */
	HL_ROWS,
};

/* Which wait the thresholds compare, per class. */
#define HL_THRESHOLD_WAIT 0	/* from the wake-up */
#define HL_THRESHOLD_FELT 1	/* from the cause, where known */
const volatile u8 threshold_view[HL_MAX_CLASSES];

/* Counters of what happened, and of everything that was lost. */
struct rq_counters {
	u64 wakeups;		/* sched_waking and sched_wakeup_new */
	u64 switches;
	u64 samples;
	u64 stamp_failures;	/* could not store a task's wait state */
	u64 task_table_full;	/* task not tracked individually */
	u64 ringbuf_drops;	/* violation not streamed */
	u64 unmeasured_waits;	/* a switch that began or ended it was not reported */
	u64 unstamped_waits;	/* switched in; its wait's start was not seen */
	u64 unreported_switches; /* switches the kernel did not report, any task */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct rq_counters);
} counters SEC(".maps");

/* Histogram buckets, per CPU: index (row * hl_nr_classes + class) *
 * HL_HIST_BUCKETS + bucket (hist_add()). The loader sizes both maps to
 * the policy's classes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HL_ROWS * HL_MAX_CLASSES * HL_HIST_BUCKETS);
	__type(key, u32);
	__type(value, u64);
} hist SEC(".maps");

/* Exact max and sum per row and class (row * hl_nr_classes + class), per CPU. */
struct class_totals {
	u64 max;
	u64 sum;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HL_ROWS * HL_MAX_CLASSES);
	__type(key, u32);
	__type(value, struct class_totals);
} totals SEC(".maps");

/* Per task, keyed by pid and start time so a reused pid is a new task. */
struct task_key {
	u32 pid;
	u32 _pad;
	u64 start_time;
};

/* One view of a task's waits. */
struct task_view {
	u64 max;
	u64 sum;
	u32 buckets[HL_HIST_BUCKETS];
};

/* Identity, and its waits as they were and as it felt them. */
struct task_hist {
	u32 tgid;
	u32 class_id;
	char comm[HL_COMM_LEN];
	struct task_view wait;
	struct task_view felt;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HL_MAX_TASKS);
	__type(key, struct task_key);
	__type(value, struct task_hist);
} tasks SEC(".maps");

/* A zeroed task_hist to insert from; too big for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct task_hist);
} task_hist_zero SEC(".maps");

/*
 * Why a wait was long: what its CPU did from the wait's start to the
 * switch that ended it, from the CPU's recent history. The parts add up to
 * the wait (to the nanosecond, but for the irq time of the oldest
 * segment, shared out in proportion to its overlap).
 */
#define HL_BLAMED 3	/* tasks named, the longest-running first */

enum seg_kind {
	SEG_IDLE,	/* the idle task: nothing runnable, or not yet woken up */
	SEG_FAIR,	/* the kernel's fair class (EEVDF) */
	SEG_EXT,	/* the sched_ext class: the BPF scheduler chose it */
	SEG_RTDL,	/* realtime or deadline priority (PI boosts included) */
	SEG_OTHER,	/* a task whose class could not be told (no ext_sched_class symbol) */
};

struct blamed {
	u64 ns;		/* its run time in the wait, irq time taken out */
	u32 pid;
	u8 kind;	/* enum seg_kind */
	u8 class_id;	/* hotlane class */
	u16 _pad;
	char comm[HL_COMM_LEN];
};

struct explanation {
	u64 ns[SEG_OTHER + 1];	/* task time by enum seg_kind, irq time taken out */
	u64 irq_ns;		/* hardirq handlers */
	u64 softirq_ns;		/* softirqs, wherever they ran (ksoftirqd included) */
	u64 uncovered_ns;	/* older than the CPU's kept history */
	u64 ext_cb_ns;		/* in sched_ext callbacks, overlapping the above */
	u32 from_cpu;		/* where it last ran; ~0 if not known */
	u32 flags;		/* EX_* */
	struct blamed top[HL_BLAMED];
};

#define EX_DONE 1		/* the explanation was worked out */
#define EX_MIGRATED 2		/* it last ran on from_cpu, not here */
#define EX_EXT_KNOWN 4		/* the kernel's sched_ext class is known */
#define EX_EXT_LEFT 8		/* it waited in sched_ext and ran outside it: sched_ext exited */
#define EX_BYPASS 16		/* sched_ext bypassed the BPF scheduler during the wait */
#define EX_BYPASS_KNOWN 32	/* bypass mode was watched (the sched_ext_event tracepoint) */

/* A wait above its class's threshold. */
struct violation {
	u64 at_ns;
	u64 latency_ns;
	u32 pid;
	u32 tgid;
	u32 class_id;
	u32 cpu;
	u32 prev_pid;		/* what ran on this CPU just before */
	u32 caused;		/* a timer's expiry woke it: felt_ns and delivery_ns hold */
	u64 felt_ns;		/* from the cause to the switch-in */
	u64 delivery_ns;	/* from the cause to sched_waking */
	u64 resume_ns;		/* from the switch-in to the return from the sleep call */
	char comm[HL_COMM_LEN];
	char prev_comm[HL_COMM_LEN];
	struct explanation why;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} violations SEC(".maps");

/*
 * A task's wait, and how many of its trips to the CPU (runs) have been
 * accounted for, as a sample or as unmeasured. Runs are numbered by the
 * kernel's count of the task's switch-outs: run k ends at switch-out k.
 * 32 bits are plenty for comparing counts, which wraps correctly.
 */
struct wait_state {
	u64 at;		/* when the current wait began; 0: none known */
	u64 task;	/* raw_tp: the task_struct the pid-keyed entry is for */
	u64 cause_at;	/* when the timer that woke it expired (CLOCK_MONOTONIC) */
	u64 delivery;	/* from then to sched_waking */
	u32 runs;	/* runs accounted for */
	u32 outs;	/* switch-outs at its last reported switch-out */
	u32 flags;	/* WS_* */
	u32 cpu;	/* where it last ran (explain only) */
};

#define WS_RUNS 1	/* runs is valid */
#define WS_OUTS 2	/* outs is valid */
#define WS_QUEUED 4	/* `at` is when it left the CPU still runnable */
#define WS_CPU 8	/* cpu is valid */
#define WS_EXT 16	/* the wait began in the sched_ext class */
#define WS_CAUSED 32	/* the current wait's cause is known: cause_at and delivery hold */
#define WS_FELT_OPEN 64	/* a caused wait ran; its felt wait ends at the sleep call's return */
#define WS_KEEP (WS_QUEUED | WS_CAUSED | WS_FELT_OPEN) /* what a switch-out leaves */

/* tp_btf: wait state in task-local storage. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct wait_state);
} stamps SEC(".maps");

/*
 * A caused wait that has got the CPU, until its sleep call returns
 * (tp_btf with felt_ends_at_return only): what its felt sample and
 * violation need then. Its own map, so that the wait state of every task
 * stays small; only a task whose wait had a cause gets an entry.
 */
struct open_felt {
	u64 cause_at;
	u64 ran_at;		/* the switch-in */
	u64 wait;		/* sched_waking to the switch-in */
	u64 delivery;
	u32 class_id;
	u32 cpu;		/* where it was switched in */
	u32 prev_pid;
	u32 in_ext;
	char prev_comm[HL_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct open_felt);
} open_felts SEC(".maps");

/* raw_tp fallback: wait state by pid, deleted when the task is freed. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct wait_state);
} stamps_by_pid SEC(".maps");

/*
 * Per CPU: the task the last reported switch put on it, and, to explain
 * violations, its recent history: one segment per task that had the CPU,
 * and how much hardirq and softirq time it has spent in all.
 */
#define HL_SEGMENTS 64	/* a power of two */

struct segment {
	u64 start;		/* when the task got the CPU; 0: slot unused */
	u64 irq;		/* the CPU's irq_ns at start */
	u64 softirq;		/* the CPU's softirq_ns at start */
	u64 ext_cb;		/* the CPU's ext_cb_ns at start */
	u32 pid;
	u8 kind;		/* enum seg_kind */
	u8 class_id;
	u16 _pad;
	char comm[HL_COMM_LEN];
};

struct cpu_state {
	u64 last_next;
	u64 irq_ns;		/* hardirq handler time, all of it */
	u64 softirq_ns;		/* softirq time, nested hardirqs taken out */
	u64 irq_entry;		/* the open hardirq handler's start; 0: none */
	u64 softirq_entry;	/* the open softirq's start; 0: none */
	u64 softirq_irq_base;	/* irq_ns when it started */
	u64 ext_cb_ns;		/* time in sched_ext callbacks, all of it */
	u64 ext_cb_entry;	/* the open callback's start */
	u64 timer_task;		/* the task whose timer is expiring here now; 0: none */
	u64 timer_cause_at;	/* when that timer was due (CLOCK_MONOTONIC) */
	u32 head;		/* the newest segment */
	u32 _pad;
	struct segment seg[HL_SEGMENTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct cpu_state);
} cpus SEC(".maps");

static __always_inline struct rq_counters *counters_get(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

static __always_inline bool wanted(const struct hl_task_identity *id)
{
	if (filter_tgid && id->tgid != filter_tgid)
		return false;
	if (filter_nr_tids) {
		bool found = false;

		for (u32 i = 0; i < HL_MAX_TIDS && i < filter_nr_tids; i++)
			if (filter_tids[i] == id->pid)
				found = true;
		if (!found)
			return false;
	}
	if (filter_comm_len && !hl_prefix_eq((const char *)id->comm, filter_comm, filter_comm_len))
		return false;
	return true;
}

/* ---- explaining a violation ------------------------------------------ */

/* What kind of CPU time a task's run is. */
static __always_inline u8 seg_kind(u32 pid, int prio, u64 sched_class)
{
	if (!pid)
		return SEG_IDLE;
	if (prio < 100)		/* MAX_RT_PRIO: realtime and deadline, PI boosts too */
		return SEG_RTDL;
	if (!kernel_has_ext)
		return SEG_FAIR;
	if (!ksym_exists(&ext_sched_class))
		return SEG_OTHER;
	return sched_class == (u64)&ext_sched_class ? SEG_EXT : SEG_FAIR;
}

/* A task got this CPU: open its segment of the history. */
static __always_inline void push_segment(struct cpu_state *c, u64 now, u32 pid, u8 kind, u32 class_id,
					 const u64 *comm)
{
	u32 h = (c->head + 1) & (HL_SEGMENTS - 1);
	struct segment *s = &c->seg[h];

	s->start = now;
	s->irq = c->irq_ns;
	s->softirq = c->softirq_ns;
	s->ext_cb = c->ext_cb_ns;
	s->pid = pid;
	s->kind = kind;
	s->class_id = class_id;
	__builtin_memcpy(s->comm, comm, sizeof(s->comm));
	c->head = h;
}

/* Adds run ns of segment s's task to the named tasks, which keep the
 * HL_BLAMED longest-running (a task pushed out loses what it had). */
static __always_inline void blame(struct explanation *ex, const struct segment *s, u64 run)
{
	u64 least = ~0ULL;
	u32 least_at = 0;

#pragma unroll
	for (u32 j = 0; j < HL_BLAMED; j++) {
		struct blamed *b = &ex->top[j];

		if (b->ns && b->pid == s->pid) {
			b->ns += run;
			return;
		}
		if (b->ns < least) {
			least = b->ns;
			least_at = j;
		}
	}
	if (run <= least || least_at >= HL_BLAMED)
		return;
	ex->top[least_at].ns = run;
	ex->top[least_at].pid = s->pid;
	ex->top[least_at].kind = s->kind;
	ex->top[least_at].class_id = s->class_id;
	__builtin_memcpy(ex->top[least_at].comm, s->comm, sizeof(s->comm));
}

/*
 * What this CPU did from at to now: walk its segments from the newest
 * (the task leaving the CPU now) back to the one running at `at`. A
 * segment's irq time is the CPU's irq total at the next segment's start
 * minus at its own; the oldest, cut at `at`, gets its share in proportion.
 */
static __always_inline void explain_wait(struct explanation *ex, const struct cpu_state *c, u64 at, u64 now)
{
	u64 end = now, irq_end = c->irq_ns, soft_end = c->softirq_ns, cb_end = c->ext_cb_ns;
	u32 h = c->head;

	for (u32 i = 0; i < HL_SEGMENTS; i++) {
		const struct segment *s = &c->seg[(h - i) & (HL_SEGMENTS - 1)];
		u64 start = s->start, len, irq, soft, cb, run;
		u8 kind = s->kind;

		if (end <= at || !start)
			break;
		if (start > end) {
			/* It came after the window (a felt wait is explained
			 * up to its switch-in): the one before ends here. */
			irq_end = s->irq;
			soft_end = s->softirq;
			cb_end = s->ext_cb;
			continue;
		}
		irq = irq_end - s->irq;
		soft = soft_end - s->softirq;
		cb = cb_end - s->ext_cb;
		len = end - start;
		if (start < at) {
			irq = irq * (end - at) / len;
			soft = soft * (end - at) / len;
			cb = cb * (end - at) / len;
			len = end - at;
		}
		ex->ext_cb_ns += cb < len ? cb : len;
		if (irq > len)
			irq = len;
		if (soft > len - irq)
			soft = len - irq;
		run = len - irq - soft;
		ex->irq_ns += irq;
		ex->softirq_ns += soft;
		if (kind > SEG_OTHER)
			kind = SEG_OTHER;
		ex->ns[kind] += run;
		if (s->pid && run)
			blame(ex, s, run);
		end = start;
		irq_end = s->irq;
		soft_end = s->softirq;
		cb_end = s->ext_cb;
	}
	if (end > at)
		ex->uncovered_ns = end - at;
}

/* The explanation of a wait from `at` to now of a task whose wait state
 * is st, switched in on cpu, whose state is c; in_ext says it is in the
 * sched_ext class. */
static __always_inline void explain_violation(struct explanation *ex, const struct cpu_state *c, u32 cpu,
					      const struct wait_state *st, u64 at, u64 now, bool in_ext)
{
	__builtin_memset(ex, 0, sizeof(*ex));
	ex->from_cpu = ~0U;
	if (!c)
		return;
	explain_wait(ex, c, at, now);
	ex->flags = EX_DONE;
	if (st->flags & WS_CPU) {
		ex->from_cpu = st->cpu;
		if (st->cpu != cpu)
			ex->flags |= EX_MIGRATED;
	}
	if (ksym_exists(&ext_sched_class)) {
		ex->flags |= EX_EXT_KNOWN;
		if ((st->flags & WS_EXT) && !in_ext)
			ex->flags |= EX_EXT_LEFT;
	}
	if (bypass_watched) {
		u64 began = bypass_began, ended = bypass_ended;

		ex->flags |= EX_BYPASS_KNOWN;
		if (began && began < now && (ended < began || ended > at))
			ex->flags |= EX_BYPASS;
	}
}

/* The start of a wait of a task in (or not in) the sched_ext class. */
static __always_inline void note_wait_class(struct wait_state *st, bool in_ext)
{
	if (in_ext)
		st->flags |= WS_EXT;
	else
		st->flags &= ~WS_EXT;
}

/* A task left this CPU. */
static __always_inline void note_cpu(struct wait_state *st)
{
	st->cpu = bpf_get_smp_processor_id();
	st->flags |= WS_CPU;
}

static __always_inline struct cpu_state *cpu_get(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&cpus, &zero);
}

/*
 * A task's timer expired on this CPU: hrtimer_wakeup() is about to wake
 * it, here, before anything else runs. The timer was due at softexpires
 * on its clock base, whose offset from CLOCK_MONOTONIC is base_offset.
 * The task pointer is only compared, never read through: it may be a
 * task that is not woken after all (it was awake already).
 */
static __always_inline void timer_expiring(u64 task, s64 softexpires, s64 base_offset)
{
	struct cpu_state *c = cpu_get();

	if (!c)
		return;
	c->timer_task = task;
	c->timer_cause_at = softexpires - base_offset;
}

/* The timer's function returned: a task it did not wake (one awake
 * already) must not be taken for woken by it later. */
static __always_inline void timer_expired(void)
{
	struct cpu_state *c = cpu_get();

	if (c)
		c->timer_task = 0;
}

/*
 * A wake-up of the task p: it is the one of the timer expiring on this
 * CPU, or it has no known cause.
 */
static __always_inline void note_cause(struct wait_state *st, u64 p, u64 now)
{
	struct cpu_state *c = cpu_get();

	if (c && c->timer_task && c->timer_task == p) {
		st->cause_at = c->timer_cause_at;
		st->delivery = now > st->cause_at ? now - st->cause_at : 0;
		st->flags |= WS_CAUSED;
		c->timer_task = 0;
		return;
	}
	st->flags &= ~WS_CAUSED;
}

/* Interrupt time per CPU. Hardirq handlers do not nest; a softirq can be
 * interrupted, and its handlers' time is taken out of the softirq's. */
static __always_inline void irq_entry(void)
{
	struct cpu_state *c = cpu_get();

	if (c)
		c->irq_entry = bpf_ktime_get_ns();
}

static __always_inline void irq_exit(void)
{
	struct cpu_state *c = cpu_get();

	if (c && c->irq_entry) {
		c->irq_ns += bpf_ktime_get_ns() - c->irq_entry;
		c->irq_entry = 0;
	}
}

static __always_inline void softirq_entry(void)
{
	struct cpu_state *c = cpu_get();

	if (c) {
		c->softirq_entry = bpf_ktime_get_ns();
		c->softirq_irq_base = c->irq_ns;
	}
}

static __always_inline void softirq_exit(void)
{
	struct cpu_state *c = cpu_get();
	u64 d, nested;

	if (!c || !c->softirq_entry)
		return;
	d = bpf_ktime_get_ns() - c->softirq_entry;
	nested = c->irq_ns - c->softirq_irq_base;
	c->softirq_ns += d > nested ? d - nested : 0;
	c->softirq_entry = 0;
}

static __always_inline void task_view_add(struct task_view *tv, u64 delta)
{
	u32 bucket = hl_hist_bucket(delta);

	if (delta > tv->max)
		tv->max = delta;
	__sync_fetch_and_add(&tv->sum, delta);
	if (bucket < HL_HIST_BUCKETS)
		__sync_fetch_and_add(&tv->buckets[bucket], 1);
}

/* The task's own histograms, created on its first sample. */
static __always_inline struct task_hist *task_hist_get(struct task_struct *p, const struct hl_task_identity *id,
						       u32 class_id, struct rq_counters *cnt)
{
	struct task_key key = { .pid = id->pid, .start_time = CORE_READ(p, start_time) };
	struct task_hist *th;
	u32 zero = 0;

	th = bpf_map_lookup_elem(&tasks, &key);
	if (!th) {
		struct task_hist *z = bpf_map_lookup_elem(&task_hist_zero, &zero);

		if (!z)
			return NULL;
		/* Another CPU may insert first (EEXIST): the lookup finds it. */
		bpf_map_update_elem(&tasks, &key, z, BPF_NOEXIST);
		th = bpf_map_lookup_elem(&tasks, &key);
		if (!th) {
			if (cnt)
				cnt->task_table_full++;
			return NULL;
		}
		th->tgid = id->tgid;
	}
	th->class_id = class_id;
	__builtin_memcpy(th->comm, id->comm, sizeof(th->comm));
	return th;
}

/* One sample in a row of class cls's histograms. */
static __always_inline void hist_add(u32 hrow, u32 cls, u64 delta)
{
	u32 row = hrow * hl_nr_classes + cls, key;
	struct class_totals *tot;
	u64 *slot;

	key = row * HL_HIST_BUCKETS + hl_hist_bucket(delta);
	slot = bpf_map_lookup_elem(&hist, &key);
	if (slot)
		*slot += 1;
	tot = bpf_map_lookup_elem(&totals, &row);
	if (tot) {
		if (delta > tot->max)
			tot->max = delta;
		tot->sum += delta;
	}
}

/* A wait, as far as it is known when it is streamed. */
struct wait_seen {
	u64 end;	/* where its felt wait ended: the switch-in or the sleep call's return */
	u64 ran_at;	/* the switch-in */
	u64 wait;	/* from the wake-up or preemption to the switch-in */
	u64 felt;	/* from the cause (else the same as wait) to end */
	u64 delivery;	/* from the cause to the wake-up */
	u32 prev_pid;	/* what had the CPU before it */
	u32 cpu;	/* the CPU it was switched in on */
	bool caused;
	bool in_ext;	/* it runs in the sched_ext class */
};

/*
 * Streams the wait if it broke its class's threshold, in the view the
 * class's bound checks, with what the CPU did meanwhile.
 */
static __always_inline void stream(const struct hl_task_identity *id, u32 cls, const struct wait_seen *w,
				   const char *prev_comm, const struct cpu_state *c,
				   const struct wait_state *st, struct rq_counters *cnt)
{
	/* The mask restates cls < HL_MAX_CLASSES (a power of two) for the
	 * verifier, which loses the bound when cls is spilled. */
	u32 k = cls & (HL_MAX_CLASSES - 1);
	u64 limit = threshold_ns[k], before_run;
	struct violation *v;

	if (!limit || (threshold_view[k] == HL_THRESHOLD_FELT ? w->felt : w->wait) <= limit)
		return;
	v = bpf_ringbuf_reserve(&violations, sizeof(*v), 0);
	if (!v) {
		if (cnt)
			cnt->ringbuf_drops++;
		return;
	}
	v->at_ns = w->end;
	v->latency_ns = w->wait;
	v->pid = id->pid;
	v->tgid = id->tgid;
	v->class_id = k;
	v->cpu = w->cpu;
	v->prev_pid = w->prev_pid;
	v->caused = w->caused;
	v->felt_ns = w->felt;
	v->delivery_ns = w->caused ? w->delivery : 0;
	v->resume_ns = w->end - w->ran_at;
	__builtin_memcpy(v->comm, id->comm, sizeof(v->comm));
	__builtin_memcpy(v->prev_comm, prev_comm, sizeof(v->prev_comm));
	/* Explain, up to the switch-in, the longer of the two: the CPU's
	 * history since the wait began or since the cause, whichever came
	 * first. What came after the switch-in was the task's own. */
	before_run = w->felt > v->resume_ns ? w->felt - v->resume_ns : 0;
	if (explain)
		explain_violation(&v->why, c, w->cpu, st, w->ran_at - (before_run > w->wait ? before_run : w->wait),
				  w->ran_at, w->in_ext);
	else
		__builtin_memset(&v->why, 0, sizeof(v->why));
	bpf_ringbuf_submit(v, 0);
}

/*
 * A caused wait got the CPU: keep what its felt sample needs until its
 * sleep call returns. False if there is nowhere to keep it.
 */
static __always_inline bool open_felt(struct task_struct *p, struct wait_state *st, u32 cls,
				      const struct wait_seen *w, const char *prev_comm)
{
	struct open_felt *of = bpf_task_storage_get(&open_felts, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!of)
		return false;
	of->cause_at = w->ran_at - w->felt;
	of->ran_at = w->ran_at;
	of->wait = w->wait;
	of->delivery = w->delivery;
	of->class_id = cls;
	of->cpu = w->cpu;
	of->prev_pid = w->prev_pid;
	of->in_ext = w->in_ext;
	__builtin_memcpy(of->prev_comm, prev_comm, sizeof(of->prev_comm));
	st->flags |= WS_FELT_OPEN;
	return true;
}

/*
 * The felt wait of p, open since its switch-in, ends at end: at its sleep
 * call's return (fexit), or, at its next wake-up if it blocked elsewhere
 * first (end 0), at the switch-in. p is trusted. Not done at the blocking
 * switch-out: a second violation stream in the sched_switch program makes
 * the verifier's work on it grow tenfold. The explanation reads the
 * history of the CPU it was switched in on, which that CPU may be
 * writing meanwhile (it is only read).
 */
static __always_inline void close_felt(struct task_struct *p, struct wait_state *st, u64 end)
{
	struct open_felt *of;
	struct rq_counters *cnt;
	struct hl_task_identity id = {};
	struct wait_seen w = {};
	const struct cpu_state *c;
	u32 cls, zero = 0;

	st->flags &= ~WS_FELT_OPEN;
	of = bpf_task_storage_get(&open_felts, p, NULL, 0);
	if (!of || !of->ran_at)
		return;
	cls = of->class_id & (HL_MAX_CLASSES - 1);
	w.end = end > of->ran_at ? end : of->ran_at;
	w.ran_at = of->ran_at;
	w.wait = of->wait;
	w.felt = w.end > of->cause_at ? w.end - of->cause_at : 0;
	w.delivery = of->delivery;
	w.prev_pid = of->prev_pid;
	w.cpu = of->cpu;
	w.caused = true;
	w.in_ext = of->in_ext;
	of->ran_at = 0;

	hist_add(HL_ROW_CAUSED_FELT, cls, w.felt);
	cnt = counters_get();
	hl_read_identity_trusted(p, &id);
	if (per_task) {
		struct task_hist *th = task_hist_get(p, &id, cls, cnt);

		if (th)
			task_view_add(&th->felt, w.felt);
	}
	c = bpf_map_lookup_percpu_elem(&cpus, &zero, w.cpu);
	stream(&id, cls, &w, of->prev_comm, c, st, cnt);
}

/*
 * A task got the CPU after waiting delta ns: account it to its class, CPU
 * and (optionally) itself, in each view, and stream it if it broke the
 * threshold. A caused wait's felt sample waits for its sleep call's
 * return where that is hooked (close_felt()).
 */
static __always_inline void record(struct task_struct *next, struct task_struct *prev,
				   const struct hl_task_identity *id, u32 class_id, u64 delta,
				   u64 now, struct rq_counters *cnt, const struct cpu_state *c,
				   struct wait_state *st, bool in_ext, bool can_defer)
{
	u32 cls = class_id;
	struct wait_seen w = {
		.end = now, .ran_at = now, .wait = delta, .felt = delta,
		.cpu = bpf_get_smp_processor_id(), .caused = st->flags & WS_CAUSED, .in_ext = in_ext,
	};
	char prev_comm[HL_COMM_LEN];
	struct task_hist *th = NULL;
	bool deferred = false;

	if (cls >= HL_MAX_CLASSES)
		cls = HL_MAX_CLASSES - 1;
	w.prev_pid = CORE_READ(prev, pid);
	CORE_READ_INTO(&prev_comm, &prev->comm);
	if (w.caused) {
		/* A timer that expired while the task was still queued from
		 * a preemption comes after the wait's start: the task felt
		 * only the part since its timer. */
		if (st->cause_at <= now)
			w.felt = now - st->cause_at;
		w.delivery = st->delivery;
		hist_add(HL_ROW_CAUSED_WAIT, cls, delta);
		hist_add(HL_ROW_DELIVERY, cls, st->delivery);
		deferred = can_defer && felt_ends_at_return && open_felt(next, st, cls, &w, prev_comm);
		if (!deferred)
			hist_add(HL_ROW_CAUSED_FELT, cls, w.felt);
	} else {
		hist_add(HL_ROW_WAIT, cls, delta);
	}
	if (cnt)
		cnt->samples++;
	if (per_task)
		th = task_hist_get(next, id, cls, cnt);
	if (th) {
		task_view_add(&th->wait, delta);
		if (!deferred)
			task_view_add(&th->felt, w.felt);
	}
	if (!deferred)
		stream(id, cls, &w, prev_comm, c, st, cnt);
}

/* ---- accounting shared by both hook families ------------------------- */

/*
 * A reported switch on this CPU whose prev is not what the last reported
 * switch put here means at least one switch in between was not reported.
 */
static __always_inline struct cpu_state *check_reported(struct task_struct *prev, struct task_struct *next,
							struct rq_counters *cnt)
{
	u32 zero = 0;
	struct cpu_state *c = bpf_map_lookup_elem(&cpus, &zero);

	if (!c)
		return NULL;
	if (c->last_next && c->last_next != (u64)prev && cnt)
		cnt->unreported_switches++;
	c->last_next = (u64)next;
	return c;
}

static __always_inline void stamp(struct wait_state *st, u64 now)
{
	st->at = now;
	st->flags &= ~WS_QUEUED;
}

/*
 * A wake-up. A task that was preempted on its way to sleep is queued and
 * waiting already: its wait began when it left the CPU, and that stamp
 * stays. Any other stamp is from an earlier wait. (A preemption stamp
 * left over from a switch-in that was not reported is never used: the
 * task's next reported switch replaces or drops it, or it is not measured
 * for want of a reported switch-out.)
 */
static __always_inline void stamp_wakeup(struct wait_state *st, u64 now)
{
	if (st->at && (st->flags & WS_QUEUED))
		return;
	stamp(st, now);
}

/* Task p was woken (or created, new_task): its wait starts, with its
 * cause if this is its timer's wake-up. */
static __always_inline void woken(struct wait_state *st, u64 p, bool new_task)
{
	u64 now = bpf_ktime_get_ns();

	if (new_task) {
		stamp(st, now);
		st->flags &= ~WS_CAUSED;
		return;
	}
	stamp_wakeup(st, now);
	note_cause(st, p, now);
}

/* n runs of a task, newer than its last accounted run: how many. */
static __always_inline u32 runs_since(struct wait_state *st, u32 n)
{
	s32 d = n - st->runs;

	return (st->flags & WS_RUNS) && d > 0 ? d : 0;
}

/*
 * A task left the CPU in a reported switch: its run number outs (its
 * switch-out count, already counting this one) ends. If it is still
 * runnable its next wait begins now. Returns how many of its runs began
 * with a switch-in nobody reported: each ended a wait that went
 * unmeasured.
 */
static __always_inline u32 left_cpu(struct wait_state *st, u32 outs, bool runnable, u64 now)
{
	u32 unseen = runs_since(st, outs);

	st->runs = outs;
	st->outs = outs;
	st->flags = (st->flags & WS_KEEP) | WS_RUNS | WS_OUTS;
	if (runnable) {
		/* A preemption: its wait has no cause but the scheduler. */
		stamp(st, now);
		st->flags = (st->flags & ~WS_CAUSED) | WS_QUEUED;
	} else {
		/* Blocked: a stamp taken during this run is a wake-up in
		 * flight, from another CPU, and stays. */
		st->flags &= ~WS_QUEUED;
	}
	return unseen;
}

/* What a reported switch-in amounts to. */
struct got_cpu {
	u64 delta;		/* the wait, if measured */
	bool measured;
	u32 unmeasured;		/* waits nobody could measure, this one included */
	u32 unstamped;		/* this wait's start was not seen (0 or 1) */
};

/*
 * A task got the CPU in a reported switch, after outs switch-outs: run
 * outs + 1 begins.
 */
static __always_inline void got_cpu(struct wait_state *st, u32 outs, u64 now, struct got_cpu *g)
{
	g->unmeasured = runs_since(st, outs); /* runs whose switch-in was not reported */
	if ((st->flags & WS_OUTS) && outs != st->outs)
		g->unmeasured++;	/* it left the CPU unreported: this wait's start is unknown */
	else if (st->at) {
		g->delta = now - st->at;
		g->measured = true;
	} else if (st->flags & WS_OUTS)
		g->unstamped = 1;
	st->at = 0;
	st->runs = outs + 1;
	/* WS_CAUSED stays for record(); switch_in() drops it. */
	st->flags = (st->flags & ~WS_QUEUED) | WS_RUNS;
}

/* Counts waits of p that were not measured, if the filters select p. */
static __always_inline void count_unmeasured(struct task_struct *p, u32 n, struct rq_counters *cnt)
{
	struct hl_task_identity id = {};

	if (!n || !cnt)
		return;
	hl_read_identity(p, &id);
	if (wanted(&id))
		cnt->unmeasured_waits += n;
}

/*
 * next got the CPU after outs switch-outs; st is its wait state. Measures
 * the wait if there is one and the filters select next, and returns
 * next's class if it classified it (HL_MAX_CLASSES if not). sched_class
 * is next's, to tell whether sched_ext runs it; btf says task storage
 * (the class cache, open felt waits) can be used: tp_btf only.
 */
static __always_inline u32 measure_switch_in(struct task_struct *prev, struct task_struct *next,
					     struct wait_state *st, u32 outs, u64 sched_class, bool btf,
					     u64 now, struct rq_counters *cnt, const struct cpu_state *c)
{
	struct hl_task_identity id = {};
	struct got_cpu g = {};
	u32 class_id;

	got_cpu(st, outs, now, &g);
	if (!g.measured && !g.unmeasured && !g.unstamped)
		return HL_MAX_CLASSES;

	hl_read_identity(next, &id);
	if (!wanted(&id))
		return HL_MAX_CLASSES;
	if (cnt) {
		cnt->unmeasured_waits += g.unmeasured;
		cnt->unstamped_waits += g.unstamped;
	}
	if (!g.measured)
		return HL_MAX_CLASSES;
	class_id = btf ? hl_classify_cached(next, &id) : hl_classify_identity(&id);
	record(next, prev, &id, class_id, g.delta, now, cnt, c, st,
	       ksym_exists(&ext_sched_class) && sched_class == (u64)&ext_sched_class, btf);
	return class_id;
}

/* The same, and the wait's cause is spent. */
static __always_inline u32 switch_in(struct task_struct *prev, struct task_struct *next, struct wait_state *st,
				     u32 outs, u64 sched_class, bool btf, u64 now, struct rq_counters *cnt,
				     const struct cpu_state *c)
{
	u32 class_id = measure_switch_in(prev, next, st, outs, sched_class, btf, now, cnt, c);

	st->flags &= ~WS_CAUSED;
	return class_id;
}

/* ---- tp_btf: typed arguments, task-local stamps, cached classes ------- */

/* The task's context switches so far: run k ends at switch-out k. */
static __always_inline u32 outs_btf(struct task_struct *p)
{
	return p->nvcsw + p->nivcsw;
}

static __always_inline struct wait_state *state_btf(struct task_struct *p, bool create,
						    struct rq_counters *cnt)
{
	struct wait_state *st;

	st = bpf_task_storage_get(&stamps, p, NULL, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!st && create && cnt)
		cnt->stamp_failures++;
	return st;
}

static __always_inline void wakeup_btf(struct task_struct *p, bool new_task)
{
	struct rq_counters *cnt = counters_get();
	struct wait_state *st;

	if (cnt)
		cnt->wakeups++;
	if (!p->pid)
		return;
	st = state_btf(p, true, cnt);
	if (!st)
		return;
	/* It blocked again before a sleep call the tracer hooks returned:
	 * its last felt wait ended at its switch-in. */
	if (st->flags & WS_FELT_OPEN)
		close_felt(p, st, 0);
	woken(st, (u64)p, new_task);
	if (explain && st->at && ksym_exists(&ext_sched_class))
		note_wait_class(st, (u64)p->sched_class == (u64)&ext_sched_class);
}

/* TP_PROTO(struct task_struct *p) */
SEC("tp_btf/sched_waking")
int rq_waking_btf(u64 *ctx)
{
	wakeup_btf((struct task_struct *)ctx[0], false);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int rq_wakeup_new_btf(u64 *ctx)
{
	wakeup_btf((struct task_struct *)ctx[0], true);
	return 0;
}

/* TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next,
 *          unsigned int prev_state) */
SEC("tp_btf/sched_switch")
int rq_switch_btf(u64 *ctx)
{
	bool preempt = (u8)ctx[0];
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = ctx[3];
	struct rq_counters *cnt = counters_get();
	struct cpu_state *c;
	struct wait_state *st;
	u64 now = bpf_ktime_get_ns();
	u32 class_id = HL_MAX_CLASSES;

	if (cnt)
		cnt->switches++;
	c = check_reported(prev, next, cnt);
	if (prev->pid) {
		st = state_btf(prev, true, cnt);
		if (st) {
			/* Still runnable: it starts waiting again now. */
			bool runnable = preempt || prev_state == 0 /* TASK_RUNNING */;

			count_unmeasured(prev, left_cpu(st, outs_btf(prev), runnable, now), cnt);
			if (explain) {
				note_cpu(st);
				if (runnable && ksym_exists(&ext_sched_class))
					note_wait_class(st, (u64)prev->sched_class == (u64)&ext_sched_class);
			}
		}
	}
	if (next->pid && (st = state_btf(next, false, cnt)))
		class_id = switch_in(prev, next, st, outs_btf(next), (u64)next->sched_class, true, now, cnt, c);

	if (explain && c) {
		if (next->pid && class_id >= HL_MAX_CLASSES) {
			struct hl_task_identity id = {};

			hl_read_identity_trusted(next, &id);
			class_id = hl_classify_cached(next, &id);
		}
		push_segment(c, now, next->pid, seg_kind(next->pid, next->prio, (u64)next->sched_class),
			     class_id, (const u64 *)next->comm);
	}
	return 0;
}

/* Device matchers' notes for the classifier, as the scheduler takes them;
 * attached only for policies with device matchers. */
SEC("fentry/security_file_open")
int device_open(u64 *ctx)
{
	hl_device_used((struct file *)ctx[0]);
	return 0;
}

SEC("fentry/security_file_ioctl")
int device_ioctl(u64 *ctx)
{
	hl_device_used((struct file *)ctx[0]);
	return 0;
}

/*
 * fentry/fexit on each callback of the sched_ext scheduler that runs (its
 * struct_ops programs), loaded by the tracer once per callback with the
 * callback as the target: the CPU's time in them, which explanations
 * report beside the parts (a callback runs in a task's or an interrupt's
 * time). One start stamp per CPU, cleared at the exit: a sleepable
 * callback (ops.init_task) may return on another CPU, and a stamp that
 * outlived it must not hold the next one back. A callback nested in it
 * from an interrupt (ops.tick) is counted; the outer one then is not.
 */
SEC("fentry/hl_ext_callback")
int rq_ext_cb_enter(u64 *ctx)
{
	struct cpu_state *c = cpu_get();

	if (c)
		c->ext_cb_entry = bpf_ktime_get_ns();
	return 0;
}

SEC("fexit/hl_ext_callback")
int rq_ext_cb_exit(u64 *ctx)
{
	struct cpu_state *c = cpu_get();

	if (c && c->ext_cb_entry) {
		c->ext_cb_ns += bpf_ktime_get_ns() - c->ext_cb_entry;
		c->ext_cb_entry = 0;
	}
	return 0;
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

/* TP_PROTO(const char *name, __s64 delta) */
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

/* TP_PROTO(int irq, struct irqaction *action) and (..., int ret) */
SEC("tp_btf/irq_handler_entry")
int rq_irq_entry_btf(u64 *ctx)
{
	irq_entry();
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int rq_irq_exit_btf(u64 *ctx)
{
	irq_exit();
	return 0;
}

/* TP_PROTO(unsigned int vec_nr) */
SEC("tp_btf/softirq_entry")
int rq_softirq_entry_btf(u64 *ctx)
{
	softirq_entry();
	return 0;
}

SEC("tp_btf/softirq_exit")
int rq_softirq_exit_btf(u64 *ctx)
{
	softirq_exit();
	return 0;
}

/*
 * TP_PROTO(struct hrtimer *hrtimer, ktime_t *now). A sleeping task's
 * timer is the first member of its struct hrtimer_sleeper, and the task
 * follows it.
 */
SEC("tp_btf/hrtimer_expire_entry")
int rq_timer_btf(u64 *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx[0];

	if (!ksym_exists(&hrtimer_wakeup) || (u64)timer->function != (u64)&hrtimer_wakeup)
		return 0;
	timer_expiring((u64)CORE_READ((struct hrtimer_sleeper *)timer, task), timer->_softexpires,
		       timer->base->offset);
	return 0;
}

/* TP_PROTO(struct hrtimer *hrtimer) */
SEC("tp_btf/hrtimer_expire_exit")
int rq_timer_exit_btf(u64 *ctx)
{
	timer_expired();
	return 0;
}

/*
 * The sleep calls whose timer is a struct hrtimer_sleeper return: the
 * felt wait of a task their timer woke ends here, where the task is about
 * to go back to what called it, as the application sees it. Between the
 * switch-in and here lie the context switch's own end (on a virtual
 * machine, the new address space's first accesses) and the sleep call's
 * way out, which cyclictest and its like count.
 */
static __always_inline void sleep_returned(void)
{
	struct task_struct *p = bpf_get_current_task_btf();
	struct wait_state *st = bpf_task_storage_get(&stamps, p, NULL, 0);

	if (st && (st->flags & WS_FELT_OPEN))
		close_felt(p, st, bpf_ktime_get_ns());
}

/* nanosleep, clock_nanosleep (CLOCK_MONOTONIC and CLOCK_REALTIME, and
 * CLOCK_BOOTTIME), usleep(). */
SEC("fexit/hrtimer_nanosleep")
int rq_nanosleep_ret(u64 *ctx)
{
	sleep_returned();
	return 0;
}

/* poll, select, epoll_wait timeouts; usleep_range in the kernel. */
SEC("fexit/schedule_hrtimeout_range_clock")
int rq_hrtimeout_ret(u64 *ctx)
{
	sleep_returned();
	return 0;
}

/* ---- raw_tp fallback: untyped arguments, pid-keyed stamps ------------- */

static __always_inline u32 outs_raw(struct task_struct *p)
{
	return CORE_READ(p, nvcsw) + CORE_READ(p, nivcsw);
}

/*
 * p's entry. sched_process_free, which deletes it, runs an RCU grace period
 * after the pid was released, so a new task with the same pid may find the
 * old task's entry first: the task pointer tells them apart (the old
 * task_struct is freed only after that same hook).
 */
static __always_inline struct wait_state *state_pid(struct task_struct *p, u32 pid, bool create,
						    struct rq_counters *cnt)
{
	struct wait_state *st = bpf_map_lookup_elem(&stamps_by_pid, &pid);
	struct wait_state fresh = { .task = (u64)p };

	if (st) {
		if (st->task != (u64)p)
			*st = fresh;
		return st;
	}
	if (!create)
		return NULL;
	/* Another CPU may insert first (EEXIST): the lookup finds it. */
	bpf_map_update_elem(&stamps_by_pid, &pid, &fresh, BPF_NOEXIST);
	st = bpf_map_lookup_elem(&stamps_by_pid, &pid);
	if (!st && cnt)
		cnt->stamp_failures++;
	return st;
}

static __always_inline void wakeup_raw(struct task_struct *p, bool new_task)
{
	struct rq_counters *cnt = counters_get();
	u32 pid = CORE_READ(p, pid);
	struct wait_state *st;

	if (cnt)
		cnt->wakeups++;
	if (!pid)
		return;
	st = state_pid(p, pid, true, cnt);
	if (!st)
		return;
	woken(st, (u64)p, new_task);
	if (explain && st->at && ksym_exists(&ext_sched_class))
		note_wait_class(st, (u64)CORE_READ(p, sched_class) == (u64)&ext_sched_class);
}

SEC("raw_tp/sched_waking")
int rq_waking_raw(u64 *ctx)
{
	wakeup_raw((struct task_struct *)ctx[0], false);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int rq_wakeup_new_raw(u64 *ctx)
{
	wakeup_raw((struct task_struct *)ctx[0], true);
	return 0;
}

SEC("raw_tp/sched_switch")
int rq_switch_raw(u64 *ctx)
{
	bool preempt = (u8)ctx[0];
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = ctx[3];
	struct rq_counters *cnt = counters_get();
	struct cpu_state *c;
	struct wait_state *st;
	u64 now = bpf_ktime_get_ns();
	u32 pid, class_id = HL_MAX_CLASSES;

	if (cnt)
		cnt->switches++;
	c = check_reported(prev, next, cnt);
	pid = CORE_READ(prev, pid);
	if (pid) {
		st = state_pid(prev, pid, true, cnt);
		if (st) {
			bool runnable = preempt || prev_state == 0 /* TASK_RUNNING */;

			count_unmeasured(prev, left_cpu(st, outs_raw(prev), runnable, now), cnt);
			if (explain) {
				note_cpu(st);
				if (runnable && ksym_exists(&ext_sched_class))
					note_wait_class(st, (u64)CORE_READ(prev, sched_class) == (u64)&ext_sched_class);
			}
		}
	}

	/* No task storage here: classify afresh each time. */
	pid = CORE_READ(next, pid);
	if (pid && (st = state_pid(next, pid, false, cnt)))
		class_id = switch_in(prev, next, st, outs_raw(next), (u64)CORE_READ(next, sched_class), false,
				     now, cnt, c);

	if (explain && c) {
		struct hl_task_identity id = {};

		hl_read_identity(next, &id);
		if (pid && class_id >= HL_MAX_CLASSES)
			class_id = hl_classify_identity(&id);
		push_segment(c, now, pid, seg_kind(pid, CORE_READ(next, prio), (u64)CORE_READ(next, sched_class)),
			     class_id, id.comm);
	}
	return 0;
}

SEC("raw_tp/irq_handler_entry")
int rq_irq_entry_raw(u64 *ctx)
{
	irq_entry();
	return 0;
}

SEC("raw_tp/irq_handler_exit")
int rq_irq_exit_raw(u64 *ctx)
{
	irq_exit();
	return 0;
}

SEC("raw_tp/softirq_entry")
int rq_softirq_entry_raw(u64 *ctx)
{
	softirq_entry();
	return 0;
}

SEC("raw_tp/softirq_exit")
int rq_softirq_exit_raw(u64 *ctx)
{
	softirq_exit();
	return 0;
}

SEC("raw_tp/hrtimer_expire_entry")
int rq_timer_raw(u64 *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx[0];
	struct hrtimer_clock_base *base;

	if (!ksym_exists(&hrtimer_wakeup) || (u64)CORE_READ(timer, function) != (u64)&hrtimer_wakeup)
		return 0;
	base = CORE_READ(timer, base);
	timer_expiring((u64)CORE_READ((struct hrtimer_sleeper *)timer, task), CORE_READ(timer, _softexpires),
		       CORE_READ(base, offset));
	return 0;
}

SEC("raw_tp/hrtimer_expire_exit")
int rq_timer_exit_raw(u64 *ctx)
{
	timer_expired();
	return 0;
}

/* TP_PROTO(struct task_struct *p): the pid may be reused after this. */
SEC("raw_tp/sched_process_free")
int rq_free_raw(u64 *ctx)
{
	u32 pid = CORE_READ((struct task_struct *)ctx[0], pid);

	bpf_map_delete_elem(&stamps_by_pid, &pid);
	return 0;
}
