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
 * What the application feels (runqlat_felt.bpf.h): the wait of a task
 * woken by its own timer is also measured from the timer's expiry, and up
 * to the sleep call's return where fexit is allowed. Such a wait goes to
 * three histogram rows (enum hl_row), one without a known cause to one;
 * the loader adds the rows up into the views it reports (the wait, as
 * runqlat measures it, and the felt wait).
 *
 * Why a wait was long (runqlat_explain.bpf.h): with `explain`, each CPU
 * keeps its recent history, and a streamed wait says what ran meanwhile;
 * runqlat_callbacks.bpf.h adds the sched_ext scheduler's own time.
 *
 * Runs are numbered by the task's switch-out count (nvcsw + nivcsw), so for
 * every selected task switch-ins = samples + unmeasured + unstamped, even
 * for switches the tracepoint did not report.
 *
 * Classes come from the same classifier the scheduler uses
 * (classify.bpf.h), so "inference" means the same tasks in both.
 *
 * Layout: the settings, the wait histogram and the violation stream, each
 * task's wait state, the accounting of waits, and last the events, one
 * body each with its tp_btf and raw_tp entry points. The hook families
 * differ in how they read a task (READ_FIELD), where they keep its wait
 * state (task storage or a pid-keyed hash) and whether they can classify
 * through the class cache and defer felt waits (task storage again).
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"
#include "family.bpf.h"
#include "hist.bpf.h"
#include "classify.bpf.h"
#include "runqlat_callbacks.bpf.h"
#include "runqlat_explain.bpf.h"
#include "runqlat_felt.bpf.h"

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

static __always_inline struct rq_counters *counters_get(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

/* Whether the filters select the task. */
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

/* ---- the wait histogram ---------------------------------------------- */

/* Which waits a histogram row holds: disjoint, so each sample is counted
 * once per view the loader builds from them. */
enum hl_row {
	HL_ROW_WAIT,		/* no known cause: sched_waking (or preemption) to switch-in */
	HL_ROW_CAUSED_WAIT,	/* a known cause: sched_waking to switch-in */
	HL_ROW_CAUSED_FELT,	/* a known cause: from it to switch-in */
	HL_ROW_DELIVERY,	/* a known cause: from it to sched_waking */
	HL_ROWS,
};

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

/* ---- the violation stream -------------------------------------------- */

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

/* A ring buffer has no value type: this puts struct violation in the
 * object's BTF, for bpf2go to generate the Go type verify decodes. */
const struct violation *violation_type __attribute__((unused));

/*
 * Streams the wait if it broke its class's threshold, in the view the
 * class's bound checks, with what the CPU did meanwhile (from where the
 * wait began, o). here: it was switched in on this CPU, now.
 */
static __always_inline void stream(const struct hl_task_identity *id, u32 cls, const struct wait_seen *w,
				   const char *prev_comm, const struct wait_origin *o, const bool here,
				   struct rq_counters *cnt)
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
		explain_violation(&v->why, w->cpu, here, o,
				  w->ran_at - (before_run > w->wait ? before_run : w->wait), w->ran_at, w->in_ext);
	else
		__builtin_memset(&v->why, 0, sizeof(v->why));
	bpf_ringbuf_submit(v, 0);
}

/* ---- each task's wait ------------------------------------------------ */

/*
 * A task's wait, and how many of its trips to the CPU (runs) have been
 * accounted for, as a sample or as unmeasured. Runs are numbered by the
 * kernel's count of the task's switch-outs: run k ends at switch-out k.
 * 32 bits are plenty for comparing counts, which wraps correctly.
 */
struct wait_state {
	u64 at;		/* when the current wait began; 0: none known */
	u64 task;	/* raw_tp: the task_struct the pid-keyed entry is for */
	u32 runs;	/* runs accounted for */
	u32 outs;	/* switch-outs at its last reported switch-out */
	u32 flags;	/* WS_* */
	struct wait_origin origin;	/* where it began (explain only) */
	struct felt_wait felt;		/* its cause, if known */
};

#define WS_RUNS 1	/* runs is valid */
#define WS_OUTS 2	/* outs is valid */
#define WS_QUEUED 4	/* `at` is when it left the CPU still runnable */

/* tp_btf: wait state in task-local storage. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct wait_state);
} stamps SEC(".maps");

/* raw_tp fallback: wait state by pid, deleted when the task is freed. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct wait_state);
} stamps_by_pid SEC(".maps");

/*
 * p's entry in raw_tp's hash. sched_process_free, which deletes it, runs an
 * RCU grace period after the pid was released, so a new task with the same
 * pid may find the old task's entry first: the task pointer tells them
 * apart (the old task_struct is freed only after that same hook).
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

/* Task p's (pid's) wait state, created if asked; btf says p is trusted,
 * and its state is in task storage. */
static __always_inline struct wait_state *state_of(struct task_struct *p, u32 pid, bool create,
						   struct rq_counters *cnt, const bool btf)
{
	struct wait_state *st;

	if (!btf)
		return state_pid(p, pid, create, cnt);
	st = bpf_task_storage_get(&stamps, p, NULL, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!st && create && cnt)
		cnt->stamp_failures++;
	return st;
}

/* The task's context switches so far: run k ends at switch-out k. */
static __always_inline u32 switch_outs(struct task_struct *p, const bool btf)
{
	return READ_FIELD(btf, p, nvcsw) + READ_FIELD(btf, p, nivcsw);
}

/* ---- recording a wait ------------------------------------------------ */

/*
 * A task got the CPU after waiting delta ns: account it to its class, CPU
 * and (optionally) itself, in each view, and stream it if it broke the
 * threshold. A caused wait's felt sample waits for its sleep call's
 * return where that is hooked (felt_defer()) and the task is trusted
 * (can_defer).
 */
static __always_inline void record(struct task_struct *next, struct task_struct *prev,
				   const struct hl_task_identity *id, u32 class_id, u64 delta,
				   u64 now, struct rq_counters *cnt, struct wait_state *st,
				   bool is_ext, bool can_defer)
{
	u32 cls = class_id;
	struct wait_seen w = {
		.end = now, .ran_at = now, .wait = delta, .felt = delta,
		.cpu = bpf_get_smp_processor_id(), .caused = st->felt.flags & FELT_CAUSED, .in_ext = is_ext,
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
		if (st->felt.cause_at <= now)
			w.felt = now - st->felt.cause_at;
		w.delivery = st->felt.delivery;
		hist_add(HL_ROW_CAUSED_WAIT, cls, delta);
		hist_add(HL_ROW_DELIVERY, cls, st->felt.delivery);
		deferred = can_defer && felt_defer(next, &st->felt, cls, &w, prev_comm);
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
		stream(id, cls, &w, prev_comm, &st->origin, true, cnt);
}

/*
 * The felt wait of trusted task p, deferred at its switch-in, ends at end
 * (0: at the switch-in): its felt sample, in the histograms and the
 * stream. The explanation reads the history of the CPU it was switched in
 * on, which that CPU may be writing meanwhile (it is only read).
 */
static __always_inline void record_felt(struct task_struct *p, struct wait_state *st, u64 end)
{
	struct hl_task_identity id = {};
	struct wait_seen w = {};
	struct rq_counters *cnt;
	struct open_felt *of;
	u32 cls;

	of = felt_close(p, &st->felt, end, &w);
	if (!of)
		return;
	cls = of->class_id & (HL_MAX_CLASSES - 1);
	hist_add(HL_ROW_CAUSED_FELT, cls, w.felt);
	cnt = counters_get();
	hl_read_identity_trusted(p, &id);
	if (per_task) {
		struct task_hist *th = task_hist_get(p, &id, cls, cnt);

		if (th)
			task_view_add(&th->felt, w.felt);
	}
	stream(&id, cls, &w, of->prev_comm, &st->origin, false, cnt);
}

/* ---- accounting shared by both hook families ------------------------- */

/* Per CPU, the task the last reported switch put there. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} last_next SEC(".maps");

/*
 * A reported switch on this CPU whose prev is not what the last reported
 * switch put here means at least one switch in between was not reported.
 */
static __always_inline void check_reported(struct task_struct *prev, struct task_struct *next,
					   struct rq_counters *cnt)
{
	u32 zero = 0;
	u64 *last = bpf_map_lookup_elem(&last_next, &zero);

	if (!last)
		return;
	if (*last && *last != (u64)prev && cnt)
		cnt->unreported_switches++;
	*last = (u64)next;
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
		felt_uncaused(&st->felt);
		return;
	}
	stamp_wakeup(st, now);
	felt_woken(&st->felt, p, now);
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
	st->flags = (st->flags & WS_QUEUED) | WS_RUNS | WS_OUTS;
	if (runnable) {
		/* A preemption: its wait has no cause but the scheduler. */
		stamp(st, now);
		st->flags |= WS_QUEUED;
		felt_uncaused(&st->felt);
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
					     struct wait_state *st, u32 outs, u64 sched_class, const bool btf,
					     u64 now, struct rq_counters *cnt)
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
	record(next, prev, &id, class_id, g.delta, now, cnt, st, in_ext(sched_class), btf);
	return class_id;
}

/* The same, and the wait's cause is spent, measured or not. */
static __always_inline u32 switch_in(struct task_struct *prev, struct task_struct *next, struct wait_state *st,
				     u32 outs, u64 sched_class, const bool btf, u64 now, struct rq_counters *cnt)
{
	u32 class_id = measure_switch_in(prev, next, st, outs, sched_class, btf, now, cnt);

	felt_uncaused(&st->felt);
	return class_id;
}

/* ---- the events ------------------------------------------------------- */

/*
 * sched_waking and sched_wakeup_new (new_task): p's wait begins. A task
 * with a felt wait still open blocked again before a sleep call the tracer
 * hooks returned: that felt wait ended at its switch-in.
 */
static __always_inline void wakeup(struct task_struct *p, bool new_task, const bool btf)
{
	struct rq_counters *cnt = counters_get();
	u32 pid = READ_FIELD(btf, p, pid);
	struct wait_state *st;

	if (cnt)
		cnt->wakeups++;
	if (!pid)
		return;
	st = state_of(p, pid, true, cnt, btf);
	if (!st)
		return;
	/* Only tp_btf defers felt waits: raw_tp has no task storage. */
	if (btf && (st->felt.flags & FELT_OPEN))
		record_felt(p, st, 0);
	woken(st, (u64)p, new_task);
	if (explain && st->at)
		explain_wait_began(&st->origin, p, btf);
}

/* TP_PROTO(struct task_struct *p) */
SEC("tp_btf/sched_waking")
int rq_waking_btf(u64 *ctx)
{
	wakeup((struct task_struct *)ctx[0], false, true);
	return 0;
}

SEC("raw_tp/sched_waking")
int rq_waking_raw(u64 *ctx)
{
	wakeup((struct task_struct *)ctx[0], false, false);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int rq_wakeup_new_btf(u64 *ctx)
{
	wakeup((struct task_struct *)ctx[0], true, true);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int rq_wakeup_new_raw(u64 *ctx)
{
	wakeup((struct task_struct *)ctx[0], true, false);
	return 0;
}

/*
 * The class of next, which got the CPU, for its segment of the history:
 * the one switch_in() found, or classified now. tp_btf classifies through
 * the class cache; raw_tp, which has no task storage, afresh, and keeps
 * the comm it read in id.
 */
static __always_inline u32 switched_in_class(struct task_struct *next, u32 pid, u32 class_id,
					     struct hl_task_identity *id, const bool btf)
{
	if (btf) {
		if (!pid || class_id < HL_MAX_CLASSES)
			return class_id;
		hl_read_identity_trusted(next, id);
		return hl_classify_cached(next, id);
	}
	hl_read_identity(next, id);
	if (pid && class_id >= HL_MAX_CLASSES)
		class_id = hl_classify_identity(id);
	return class_id;
}

/*
 * sched_switch: prev leaves the CPU, still runnable (preempted, or a
 * prev_state of TASK_RUNNING: sched_yield, a signal pending) or not; next
 * gets it, and its wait, if any, ends.
 * TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next,
 *          unsigned int prev_state)
 */
static __always_inline void on_switch(u64 *ctx, const bool btf)
{
	bool preempt = (u8)ctx[0];
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = ctx[3];
	struct rq_counters *cnt = counters_get();
	struct cpu_history *c = explain ? history_here() : NULL;
	struct wait_state *st;
	u64 now = bpf_ktime_get_ns();
	u32 pid, class_id = HL_MAX_CLASSES;

	if (cnt)
		cnt->switches++;
	check_reported(prev, next, cnt);
	pid = READ_FIELD(btf, prev, pid);
	if (pid && (st = state_of(prev, pid, true, cnt, btf))) {
		bool runnable = preempt || prev_state == 0 /* TASK_RUNNING */;

		count_unmeasured(prev, left_cpu(st, switch_outs(prev, btf), runnable, now), cnt);
		if (explain)
			explain_left_cpu(&st->origin, prev, runnable, btf);
	}

	/* Before next's wait is explained, from this history. */
	if (c && !c->seg[c->head & (HL_SEGMENTS - 1)].start) {
		struct hl_task_identity id = {};

		if (!btf)
			hl_read_identity(prev, &id);
		explain_history_begins(c, READ_FIELD(btf, prev, pid), READ_FIELD(btf, prev, prio),
				       (u64)READ_FIELD(btf, prev, sched_class), btf ? (const u64 *)prev->comm : id.comm);
	}

	pid = READ_FIELD(btf, next, pid);
	if (pid && (st = state_of(next, pid, false, cnt, btf)))
		class_id = switch_in(prev, next, st, switch_outs(next, btf), (u64)READ_FIELD(btf, next, sched_class),
				     btf, now, cnt);

	if (c) {
		struct hl_task_identity id = {};

		class_id = switched_in_class(next, pid, class_id, &id, btf);
		explain_switched_in(c, now, pid, READ_FIELD(btf, next, prio), (u64)READ_FIELD(btf, next, sched_class),
				    class_id, btf ? (const u64 *)next->comm : id.comm);
	}
}

SEC("tp_btf/sched_switch")
int rq_switch_btf(u64 *ctx)
{
	on_switch(ctx, true);
	return 0;
}

SEC("raw_tp/sched_switch")
int rq_switch_raw(u64 *ctx)
{
	on_switch(ctx, false);
	return 0;
}

/* TP_PROTO(struct task_struct *p): raw_tp's pid-keyed state goes, for the
 * pid may be reused after this. */
SEC("raw_tp/sched_process_free")
int rq_free_raw(u64 *ctx)
{
	u32 pid = CORE_READ((struct task_struct *)ctx[0], pid);

	bpf_map_delete_elem(&stamps_by_pid, &pid);
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

	if (st && (st->felt.flags & FELT_OPEN))
		record_felt(p, st, bpf_ktime_get_ns());
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
