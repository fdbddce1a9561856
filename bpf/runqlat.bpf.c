//go:build ignore

/*
 * runqlat.bpf.c - run-queue latency, per class, from the scheduler's own
 * events: how long a runnable task waits until it gets a CPU.
 *
 * The algorithm of bcc's runqlat, with its known faults fixed:
 *  - A task is stamped when it becomes runnable (sched_wakeup,
 *    sched_wakeup_new) and re-stamped at sched_switch when it leaves the CPU
 *    still runnable (preempted). Whether it is still runnable comes from the
 *    tracepoint's prev_state argument, not the classic tracepoint's
 *    prev_state field, which reads TASK_REPORT_MAX for a preempted task.
 *  - The wait is measured when the task is switched in, keyed by that task
 *    (never by `current`); the per-CPU idle task is skipped.
 *  - Stamps live in task-local storage: they die with the task, so a reused
 *    pid never inherits a stale stamp, and there is no map to fill up. The
 *    raw_tp fallback (kernels where tp_btf does not attach) cannot use task
 *    storage and keeps stamps in a pid-keyed hash instead, cleared when the
 *    task is freed; a full hash is counted, never silent.
 *  - Histograms are log-linear (hist.bpf.h, 3.2 % buckets) per class and,
 *    being per-CPU maps, per CPU too; the exact max is kept beside them.
 *  - Every wait above the class's threshold is streamed with what was
 *    running on that CPU meanwhile; a full ring buffer is counted.
 *
 * Switches the kernel does not report. A probe on sched_switch does not
 * always see every context switch: on some kernels switches away from
 * certain tasks never reach the tracepoint's probes (BPF and ftrace alike),
 * and a wait that ended at such a switch cannot be measured. bcc's runqlat
 * loses these silently; here each one is counted, exactly, from the
 * kernel's own per-task counts: sched_info.pcount (times the task got a
 * CPU) and nvcsw + nivcsw (times it left one). At every reported switch of
 * a task the tracer compares them with what it has accounted for:
 *  - switch-ins it never saw: each ended a wait nobody measured;
 *  - a switch-out it never saw: the wait that began there has no known
 *    start, so the next switch-in is not measured either.
 * Both are counted as unmeasured waits (of the tasks the filters select),
 * so that for every task, switch-ins = samples + unmeasured + unstamped
 * (below). A stamp also records the task's switch-in count, so a stamp left
 * over from a wait that ended unseen is never used for a later one. A
 * switch-in whose wait start the tracer did not see although it saw the
 * task leave the CPU is counted as unstamped. Per CPU, a switch whose prev
 * is not the task the last reported switch put there is counted as an
 * unreported switch. Kernels without CONFIG_SCHED_INFO have no pcount:
 * there only unreported switches are counted.
 *
 * Classes come from the same classifier the scheduler uses
 * (classify.bpf.h), so "inference" means the same tasks in both.
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
const volatile char filter_comm[HL_COMM_LEN];	/* "" = every comm */
const volatile u32 filter_comm_len;
const volatile bool per_task;		/* keep a histogram per task */

/* Counters of what happened, and of everything that was lost. */
struct rq_counters {
	u64 wakeups;
	u64 switches;
	u64 samples;
	u64 stamp_failures;	/* could not store a start stamp */
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

/* Histogram buckets: index class * HL_HIST_BUCKETS + bucket, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HL_MAX_CLASSES * HL_HIST_BUCKETS);
	__type(key, u32);
	__type(value, u64);
} hist SEC(".maps");

/* Exact max and sum per class, per CPU. */
struct class_totals {
	u64 max;
	u64 sum;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HL_MAX_CLASSES);
	__type(key, u32);
	__type(value, struct class_totals);
} totals SEC(".maps");

/* Per task, keyed by pid and start time so a reused pid is a new task. */
struct task_key {
	u32 pid;
	u32 _pad;
	u64 start_time;
};

/* Identity, exact max and sum, and a histogram. */
struct task_hist {
	u32 tgid;
	u32 class_id;
	char comm[HL_COMM_LEN];
	u64 max;
	u64 sum;
	u32 buckets[HL_HIST_BUCKETS];
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

/* A wait above its class's threshold. */
struct violation {
	u64 at_ns;
	u64 latency_ns;
	u32 pid;
	u32 tgid;
	u32 class_id;
	u32 cpu;
	u32 prev_pid;		/* what ran on this CPU just before */
	u32 _pad;
	char comm[HL_COMM_LEN];
	char prev_comm[HL_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} violations SEC(".maps");

/*
 * A task's wait, and how many of its trips to the CPU have been accounted
 * for (as a sample or as unmeasured). runs and outs mirror the kernel's
 * counts; 32 bits are plenty for comparing them, which wraps correctly.
 */
struct wait_state {
	u64 at;		/* when the current wait began; 0: none known */
	u32 at_runs;	/* the task's switch-in count when `at` was taken */
	u32 runs;	/* switch-ins accounted for */
	u32 outs;	/* switch-outs at its last reported switch-out */
	u32 seen;	/* WS_RUNS, WS_OUTS: runs, outs are valid */
	u64 task;	/* raw_tp: the task_struct the pid-keyed entry is for */
};

#define WS_RUNS 1
#define WS_OUTS 2

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

/* Per CPU: the task the last reported switch put on it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} cpu_last_next SEC(".maps");

static __always_inline struct rq_counters *counters_get(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

static __always_inline bool wanted(const struct hl_task_identity *id)
{
	if (filter_tgid && id->tgid != filter_tgid)
		return false;
	if (filter_comm_len && !hl_prefix_eq((const char *)id->comm, filter_comm, filter_comm_len))
		return false;
	return true;
}

static __always_inline void record_task(struct task_struct *p, const struct hl_task_identity *id,
					u32 class_id, u64 delta, u32 bucket, struct rq_counters *cnt)
{
	struct task_key key = { .pid = id->pid, .start_time = CORE_READ(p, start_time) };
	struct task_hist *th;
	u32 zero = 0;

	th = bpf_map_lookup_elem(&tasks, &key);
	if (!th) {
		struct task_hist *z = bpf_map_lookup_elem(&task_hist_zero, &zero);

		if (!z)
			return;
		/* Another CPU may insert first (EEXIST): the lookup finds it. */
		bpf_map_update_elem(&tasks, &key, z, BPF_NOEXIST);
		th = bpf_map_lookup_elem(&tasks, &key);
		if (!th) {
			if (cnt)
				cnt->task_table_full++;
			return;
		}
		th->tgid = id->tgid;
	}
	th->class_id = class_id;
	__builtin_memcpy(th->comm, id->comm, sizeof(th->comm));
	if (delta > th->max)
		th->max = delta;
	__sync_fetch_and_add(&th->sum, delta);
	if (bucket < HL_HIST_BUCKETS)
		__sync_fetch_and_add(&th->buckets[bucket], 1);
}

/*
 * A task got the CPU after waiting delta ns: account it to its class, CPU
 * and (optionally) itself, and stream it if it broke the threshold.
 */
static __always_inline void record(struct task_struct *next, struct task_struct *prev,
				   const struct hl_task_identity *id, u32 class_id, u64 delta,
				   u64 now, struct rq_counters *cnt)
{
	u32 bucket = hl_hist_bucket(delta), key, cls = class_id, tkey;
	struct class_totals *tot;
	struct violation *v;
	u64 *slot, limit;

	if (cls >= HL_MAX_CLASSES)
		cls = HL_MAX_CLASSES - 1;
	key = cls * HL_HIST_BUCKETS + bucket;
	slot = bpf_map_lookup_elem(&hist, &key);
	if (slot)
		*slot += 1;
	tkey = cls;
	tot = bpf_map_lookup_elem(&totals, &tkey);
	if (tot) {
		if (delta > tot->max)
			tot->max = delta;
		tot->sum += delta;
	}
	if (cnt)
		cnt->samples++;
	if (per_task)
		record_task(next, id, cls, delta, bucket, cnt);

	/* The mask restates cls < HL_MAX_CLASSES (a power of two) for the
	 * verifier, which loses the bound when cls is spilled. */
	limit = threshold_ns[cls & (HL_MAX_CLASSES - 1)];
	if (!limit || delta <= limit)
		return;
	v = bpf_ringbuf_reserve(&violations, sizeof(*v), 0);
	if (!v) {
		if (cnt)
			cnt->ringbuf_drops++;
		return;
	}
	v->at_ns = now;
	v->latency_ns = delta;
	v->pid = id->pid;
	v->tgid = id->tgid;
	v->class_id = cls;
	v->cpu = bpf_get_smp_processor_id();
	v->prev_pid = CORE_READ(prev, pid);
	v->_pad = 0;
	__builtin_memcpy(v->comm, id->comm, sizeof(v->comm));
	CORE_READ_INTO(&v->prev_comm, &prev->comm);
	bpf_ringbuf_submit(v, 0);
}

/* ---- accounting shared by both hook families ------------------------- */

/* BPF_FIELD_EXISTS: the loader resolves it against the running kernel. */
#define FIELD_EXISTS(f) __builtin_preserve_field_info(f, 2)

/*
 * A reported switch on this CPU whose prev is not what the last reported
 * switch put here means at least one switch in between was not reported.
 */
static __always_inline void check_reported(struct task_struct *prev, struct task_struct *next,
					   struct rq_counters *cnt)
{
	u32 zero = 0;
	u64 *last = bpf_map_lookup_elem(&cpu_last_next, &zero);

	if (!last)
		return;
	if (*last && *last != (u64)prev && cnt)
		cnt->unreported_switches++;
	*last = (u64)next;
}

static __always_inline void stamp(struct wait_state *st, u32 runs, u64 now)
{
	st->at = now;
	st->at_runs = runs;
}

/*
 * A task left the CPU in a reported switch, with runs switch-ins and outs
 * switch-outs to its name; if it is still runnable its next wait begins now.
 * Returns how many of its switch-ins were never reported: each ended a wait
 * that went unmeasured.
 */
static __always_inline u32 left_cpu(struct wait_state *st, u32 runs, u32 outs, bool runnable, u64 now)
{
	u32 unseen = 0;

	if (st->seen & WS_RUNS)
		unseen = runs - st->runs;
	st->runs = runs;
	st->outs = outs;
	st->seen = WS_RUNS | WS_OUTS;
	if (runnable)
		stamp(st, runs, now);
	return unseen;
}

/* What a reported switch-in amounts to. */
struct got_cpu {
	u64 delta;		/* the wait, if measured */
	bool measured;
	u32 unmeasured;		/* waits nobody could measure, this one included */
	u32 unstamped;		/* this wait's start was not seen (0 or 1) */
};

/* A task got the CPU in a reported switch, with runs switch-ins so far. */
static __always_inline void got_cpu(struct wait_state *st, u32 runs, u32 outs, u64 now, struct got_cpu *g)
{
	if (st->seen & WS_RUNS)
		g->unmeasured = runs - st->runs; /* switch-ins since the last reported one */
	if ((st->seen & WS_OUTS) && outs != st->outs)
		g->unmeasured++;	/* it left the CPU unreported: this wait's start is unknown */
	else if (st->at && st->at_runs == runs) {
		g->delta = now - st->at;
		g->measured = true;
	} else if (st->seen & WS_OUTS)
		g->unstamped = 1;
	st->at = 0;
	st->runs = runs + 1;
	st->seen |= WS_RUNS;
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

/* ---- tp_btf: typed arguments, task-local stamps, cached classes ------- */

static __always_inline u32 runs_btf(struct task_struct *p)
{
	if (!FIELD_EXISTS(p->sched_info))
		return 0;
	return p->sched_info.pcount;
}

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

static __always_inline void wakeup_btf(struct task_struct *p)
{
	struct rq_counters *cnt = counters_get();
	struct wait_state *st;

	if (cnt)
		cnt->wakeups++;
	if (!p->pid)
		return;
	st = state_btf(p, true, cnt);
	if (st)
		stamp(st, runs_btf(p), bpf_ktime_get_ns());
}

SEC("tp_btf/sched_wakeup")
int rq_wakeup_btf(u64 *ctx)
{
	wakeup_btf((struct task_struct *)ctx[0]);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int rq_wakeup_new_btf(u64 *ctx)
{
	wakeup_btf((struct task_struct *)ctx[0]);
	return 0;
}

/* TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next,
 *          unsigned int prev_state) */
SEC("tp_btf/sched_switch")
int rq_switch_btf(u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = ctx[3];
	struct rq_counters *cnt = counters_get();
	struct hl_task_identity id = {};
	struct got_cpu g = {};
	struct wait_state *st;
	u64 now = bpf_ktime_get_ns();

	if (cnt)
		cnt->switches++;
	check_reported(prev, next, cnt);
	if (prev->pid) {
		st = state_btf(prev, true, cnt);
		/* Still runnable (preempted): it starts waiting again now. */
		if (st)
			count_unmeasured(prev, left_cpu(st, runs_btf(prev), outs_btf(prev),
							prev_state == 0 /* TASK_RUNNING */, now), cnt);
	}

	if (!next->pid)
		return 0;
	st = state_btf(next, false, cnt);
	if (!st)
		return 0;
	got_cpu(st, runs_btf(next), outs_btf(next), now, &g);
	if (!g.measured && !g.unmeasured && !g.unstamped)
		return 0;

	hl_read_identity(next, &id);
	if (!wanted(&id))
		return 0;
	if (cnt) {
		cnt->unmeasured_waits += g.unmeasured;
		cnt->unstamped_waits += g.unstamped;
	}
	if (g.measured)
		record(next, prev, &id, hl_classify_cached(next, &id), g.delta, now, cnt);
	return 0;
}

/* ---- raw_tp fallback: untyped arguments, pid-keyed stamps ------------- */

static __always_inline u32 runs_raw(struct task_struct *p)
{
	if (!FIELD_EXISTS(p->sched_info))
		return 0;
	return CORE_READ(p, sched_info.pcount);
}

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

static __always_inline void wakeup_raw(struct task_struct *p)
{
	struct rq_counters *cnt = counters_get();
	u32 pid = CORE_READ(p, pid);
	struct wait_state *st;

	if (cnt)
		cnt->wakeups++;
	if (!pid)
		return;
	st = state_pid(p, pid, true, cnt);
	if (st)
		stamp(st, runs_raw(p), bpf_ktime_get_ns());
}

SEC("raw_tp/sched_wakeup")
int rq_wakeup_raw(u64 *ctx)
{
	wakeup_raw((struct task_struct *)ctx[0]);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int rq_wakeup_new_raw(u64 *ctx)
{
	wakeup_raw((struct task_struct *)ctx[0]);
	return 0;
}

SEC("raw_tp/sched_switch")
int rq_switch_raw(u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	unsigned int prev_state = ctx[3];
	struct rq_counters *cnt = counters_get();
	struct hl_task_identity id = {};
	struct got_cpu g = {};
	struct wait_state *st;
	u64 now = bpf_ktime_get_ns();
	u32 pid;

	if (cnt)
		cnt->switches++;
	check_reported(prev, next, cnt);
	pid = CORE_READ(prev, pid);
	if (pid) {
		st = state_pid(prev, pid, true, cnt);
		if (st)
			count_unmeasured(prev, left_cpu(st, runs_raw(prev), outs_raw(prev),
							prev_state == 0 /* TASK_RUNNING */, now), cnt);
	}

	pid = CORE_READ(next, pid);
	if (!pid)
		return 0;
	st = state_pid(next, pid, false, cnt);
	if (!st)
		return 0;
	got_cpu(st, runs_raw(next), outs_raw(next), now, &g);
	if (!g.measured && !g.unmeasured && !g.unstamped)
		return 0;

	hl_read_identity(next, &id);
	if (!wanted(&id))
		return 0;
	if (cnt) {
		cnt->unmeasured_waits += g.unmeasured;
		cnt->unstamped_waits += g.unstamped;
	}
	/* No task storage here: classify afresh each time. */
	if (g.measured)
		record(next, prev, &id, hl_classify_identity(&id), g.delta, now, cnt);
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
