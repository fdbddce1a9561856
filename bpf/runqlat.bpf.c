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

/* tp_btf: start stamps in task-local storage. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u64);
} stamps SEC(".maps");

/* raw_tp fallback: start stamps by pid, deleted when the task is freed. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u64);
} stamps_by_pid SEC(".maps");

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

/* ---- tp_btf: typed arguments, task-local stamps, cached classes ------- */

static __always_inline void stamp_btf(struct task_struct *p, struct rq_counters *cnt)
{
	u64 *ts;

	if (!p->pid)
		return;
	ts = bpf_task_storage_get(&stamps, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts) {
		if (cnt)
			cnt->stamp_failures++;
		return;
	}
	*ts = bpf_ktime_get_ns();
}

SEC("tp_btf/sched_wakeup")
int rq_wakeup_btf(u64 *ctx)
{
	struct rq_counters *cnt = counters_get();

	if (cnt)
		cnt->wakeups++;
	stamp_btf((struct task_struct *)ctx[0], cnt);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int rq_wakeup_new_btf(u64 *ctx)
{
	struct rq_counters *cnt = counters_get();

	if (cnt)
		cnt->wakeups++;
	stamp_btf((struct task_struct *)ctx[0], cnt);
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
	u64 *ts, now, delta;

	if (cnt)
		cnt->switches++;
	/* Preempted, i.e. still runnable: it starts waiting again now. */
	if (prev_state == 0 /* TASK_RUNNING */)
		stamp_btf(prev, cnt);

	if (!next->pid)
		return 0;
	ts = bpf_task_storage_get(&stamps, next, NULL, 0);
	if (!ts || !*ts)
		return 0;
	now = bpf_ktime_get_ns();
	delta = now - *ts;
	*ts = 0;

	hl_read_identity(next, &id);
	if (!wanted(&id))
		return 0;
	record(next, prev, &id, hl_classify_cached(next, &id), delta, now, cnt);
	return 0;
}

/* ---- raw_tp fallback: untyped arguments, pid-keyed stamps ------------- */

static __always_inline void stamp_pid(struct task_struct *p, struct rq_counters *cnt)
{
	u32 pid = CORE_READ(p, pid);
	u64 ts;

	if (!pid)
		return;
	ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&stamps_by_pid, &pid, &ts, BPF_ANY) && cnt)
		cnt->stamp_failures++;
}

SEC("raw_tp/sched_wakeup")
int rq_wakeup_raw(u64 *ctx)
{
	struct rq_counters *cnt = counters_get();

	if (cnt)
		cnt->wakeups++;
	stamp_pid((struct task_struct *)ctx[0], cnt);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int rq_wakeup_new_raw(u64 *ctx)
{
	struct rq_counters *cnt = counters_get();

	if (cnt)
		cnt->wakeups++;
	stamp_pid((struct task_struct *)ctx[0], cnt);
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
	u64 *ts, now, delta;
	u32 pid;

	if (cnt)
		cnt->switches++;
	if (prev_state == 0 /* TASK_RUNNING */)
		stamp_pid(prev, cnt);

	pid = CORE_READ(next, pid);
	if (!pid)
		return 0;
	ts = bpf_map_lookup_elem(&stamps_by_pid, &pid);
	if (!ts)
		return 0;
	now = bpf_ktime_get_ns();
	delta = now - *ts;
	bpf_map_delete_elem(&stamps_by_pid, &pid);

	hl_read_identity(next, &id);
	if (!wanted(&id))
		return 0;
	/* No task storage here: classify afresh each time. */
	record(next, prev, &id, hl_classify_identity(&id), delta, now, cnt);
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
