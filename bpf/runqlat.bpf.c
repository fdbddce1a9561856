//go:build ignore

/*
 * runqlat.bpf.c - run-queue latency, per class, from the scheduler's own
 * events: how long a runnable task waits until it gets a CPU.
 *
 * The algorithm of bcc's runqlat, with its known faults fixed:
 *  - A task is stamped when it is woken (sched_waking) or created
 *    (sched_wakeup_new), and re-stamped at sched_switch when it leaves the
 *    CPU still runnable.
 *  - The wait starts at the same point under every scheduler:
 *    sched_waking fires in try_to_wake_up() on the waker's CPU before the
 *    wake-up is queued anywhere. sched_wakeup, which bcc uses, fires where
 *    the task is activated: for a queued wake-up (TTWU_QUEUE, EEVDF) that
 *    is on the wakee's CPU after an IPI, under sched_ext on the waker's, so
 *    the same wake-up would measure differently under each.
 *  - "Still runnable" is the sched_switch preempt argument, or a prev_state
 *    argument of TASK_RUNNING (sched_yield, a signal pending), never the
 *    classic tracepoint's prev_state field (TASK_REPORT_MAX when
 *    preempted). A task preempted on its way to sleep, after it set
 *    TASK_INTERRUPTIBLE but before schedule(), has a sleeping prev_state
 *    yet stays queued: the kernel's own __trace_sched_switch_state() counts
 *    it as running, and so does this tracer. If its wake-up comes while it
 *    waits, the wait still began at the preemption.
 *  - A wake-up can fire while its task is still on its way off the CPU
 *    (sched_waking on another CPU before the task's blocking sched_switch):
 *    the blocking switch therefore keeps a stamp taken during the task's
 *    current run, and the switch-in uses it. A stamp from a wake-up that
 *    found the task still running (its timer fired before it slept) is
 *    overwritten by the next wake-up or preemption before it can be used.
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
 * kernel's own count of the task's context switches, nvcsw + nivcsw, which
 * __schedule() increments for every switch away from a task, just before
 * sched_switch fires. A task's k-th run ends at its k-th switch-out, so at
 * every reported switch of a task the tracer knows which run begins or
 * ends, and compares that with the runs it has accounted for:
 *  - runs whose switch-in it never saw: each ended a wait nobody measured;
 *  - a switch-out it never saw: the wait that began there has no known
 *    start, so the next switch-in is not measured either (its stamp, if
 *    any, may be older than that wait).
 * Both are counted as unmeasured waits (of the tasks the filters select),
 * so that for every task, switch-ins = samples + unmeasured + unstamped. A
 * switch-in whose wait start the tracer did not see although it saw the
 * task leave the CPU (its wake-up was not reported) is counted as
 * unstamped. Per CPU, a switch whose prev is not the task the last
 * reported switch put there is counted as an unreported switch. The
 * scheduler's sched_info.pcount is no substitute for the switch count: it
 * counts only arrivals after sched_info saw the task queued, not one after
 * a preemption on the way to sleep.
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
	u32 _pad;
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
		stamp(st, now);
		st->flags |= WS_QUEUED;
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
	if (new_task)
		stamp(st, bpf_ktime_get_ns());
	else
		stamp_wakeup(st, bpf_ktime_get_ns());
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
	struct hl_task_identity id = {};
	struct got_cpu g = {};
	struct wait_state *st;
	u64 now = bpf_ktime_get_ns();

	if (cnt)
		cnt->switches++;
	check_reported(prev, next, cnt);
	if (prev->pid) {
		st = state_btf(prev, true, cnt);
		/* Still runnable: it starts waiting again now. */
		if (st)
			count_unmeasured(prev, left_cpu(st, outs_btf(prev),
							preempt || prev_state == 0 /* TASK_RUNNING */, now), cnt);
	}

	if (!next->pid)
		return 0;
	st = state_btf(next, false, cnt);
	if (!st)
		return 0;
	got_cpu(st, outs_btf(next), now, &g);
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
	if (new_task)
		stamp(st, bpf_ktime_get_ns());
	else
		stamp_wakeup(st, bpf_ktime_get_ns());
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
			count_unmeasured(prev, left_cpu(st, outs_raw(prev),
							preempt || prev_state == 0 /* TASK_RUNNING */, now), cnt);
	}

	pid = CORE_READ(next, pid);
	if (!pid)
		return 0;
	st = state_pid(next, pid, false, cnt);
	if (!st)
		return 0;
	got_cpu(st, outs_raw(next), now, &g);
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
