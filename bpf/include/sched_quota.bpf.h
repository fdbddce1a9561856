/*
 * sched_quota.bpf.h - cgroup v2 cpu.max: a cgroup's tasks use at most its
 * quota of CPU time per period, and wait out the rest of the period once
 * they have (the kernel's CFS bandwidth control, which sched_ext leaves to
 * the scheduler and passes on as ops.cgroup_set_bandwidth from 6.17; only
 * the 7.1+ object has it, and the others compile the stubs at the end).
 *
 * Each cgroup with a quota has a pool: what is left of its quota in this
 * period. A running task's time is charged to the pools of its cgroup and
 * of each ancestor that has one, at every tick and when it stops. A task
 * whose pool, or an ancestor's, is empty is throttled: its tick ends its
 * slice, and enqueue puts it in the throttled queue instead of its class's.
 * The first CPU to dispatch after the earliest empty pool's period ends
 * moves the tasks whose pools refilled back to their fair queues. A timer
 * kicks an idle CPU for that: on a machine whose work is all throttled no
 * CPU would dispatch.
 *
 * Charged at ticks, a pool runs over by up to a tick per CPU its tasks ran
 * on; the overrun is owed into the next period, as the kernel's own
 * accounting owes it, but at most one period's quota: a task left
 * throttled for the watchdog's timeout would end the scheduler.
 */
#ifndef HOTLANE_SCHED_QUOTA_BPF_H
#define HOTLANE_SCHED_QUOTA_BPF_H

#define HL_DSQ_THROTTLED 0x3000ULL	/* tasks of cgroups out of quota, FIFO */

u32 nr_quotas;	/* cgroups with a pool: none, no walk */
u32 quota_gen;	/* changes when a pool is made or dropped: the paths tasks keep are stale */
u64 hl_quota_failures;	/* quotas that could not be kept (the pool table full): not enforced */
u64 release_at;	/* when the earliest empty pool refills; 0: nothing throttled */

#if HL_SCX_API >= 700

#define HL_QUOTA_MAX 4096	/* cgroups with a quota */
#define HL_QUOTA_DEPTH 8	/* cgroup levels, the task's own and up, looked at */

struct hl_quota {
	u64 quota_ns;	/* CPU time per period */
	u64 period_ns;
	u64 burst_ns;	/* unused quota that carries into the next period */
	s64 left_ns;	/* left in this period; at or below 0 the cgroup is throttled */
	u64 period_end;
};

/* Not preallocated: a pool deleted under a walker that still holds it
 * is freed after RCU, not handed to another cgroup at once. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, HL_QUOTA_MAX);
	__type(key, u64);	/* the cgroup's kernfs id */
	__type(value, struct hl_quota);
} quotas SEC(".maps");

struct hl_release_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct hl_release_timer);
} release_timer SEC(".maps");

const struct cpumask *scx_bpf_get_idle_cpumask(void) __ksym;
void scx_bpf_put_idle_cpumask(const struct cpumask *cpumask) __ksym;
void scx_bpf_dsq_move_set_vtime(struct bpf_iter_scx_dsq *it__iter, u64 vtime) __ksym;
bool scx_bpf_dsq_move_vtime(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id,
			    u64 enq_flags) __ksym;

/*
 * A new period, if the last one ended: a quota for each period that
 * passed is added to what is left, up to quota + burst. A charge that
 * lands between the read and the write is lost: at most one tick's run.
 */
static __always_inline void pool_refill(struct hl_quota *q, u64 now)
{
	u64 end = q->period_end, periods;
	s64 left, floor = -(s64)q->quota_ns, cap = (s64)(q->quota_ns + q->burst_ns);

	if ((s64)(now - end) < 0 || !q->period_ns)
		return;
	periods = (now - end) / q->period_ns + 1;
	if (!__sync_bool_compare_and_swap(&q->period_end, end, end + periods * q->period_ns))
		return;
	left = q->left_ns;
	if (left < floor)
		left = floor;
	left += (s64)(periods < 4 ? periods : 4) * (s64)q->quota_ns;
	q->left_ns = left > cap ? cap : left;
}

/* The task's cgroup v2 cgroup, as an address for quota_walk. */
static __always_inline u64 task_cgroup(struct task_struct *p)
{
	struct css_set *cset = CORE_READ(p, cgroups);

	return cset ? (u64)CORE_READ(cset, dfl_cgrp) : 0;
}

/*
 * Charges used ns to pool id, if it has one (with used 0 it only looks),
 * and returns when the pool refills if it is empty, else 0.
 */
static __always_inline u64 pool_charge(u64 id, u64 used, u64 now)
{
	struct hl_quota *q = id ? bpf_map_lookup_elem(&quotas, &id) : NULL;
	s64 left;

	if (!q)
		return 0;
	pool_refill(q, now);
	left = used ? __sync_fetch_and_add(&q->left_ns, -(s64)used) - (s64)used : q->left_ns;
	return left <= 0 ? q->period_end : 0;
}

/* The kernfs id of cgroup cgrp's ancestor at level l, 0 if none. */
static __always_inline u64 ancestor_id(u64 cgrp, u64 off, int l)
{
	struct kernfs_node *kn;
	u64 anc = 0;

	bpf_probe_read_kernel(&anc, sizeof(anc), (void *)(cgrp + off + (u64)l * sizeof(anc)));
	kn = anc ? CORE_READ((struct cgroup *)anc, kn) : NULL;
	return kn ? CORE_READ(kn, id) : 0;
}

/*
 * Charges used ns to the pools of cgroup cgrp and its ancestors, and
 * returns when the first empty one refills, or 0 if none is empty. With
 * used 0 it only looks. cgroup->ancestors[] is indexed by level.
 */
__hl_global u64 quota_walk(u64 cgrp, u64 used, u64 now)
{
	u64 off, u, until = 0;
	int level, i, l;

	if (!cgrp)
		return 0;
	level = CORE_READ((struct cgroup *)cgrp, level);
	off = __builtin_preserve_field_info(((struct cgroup *)cgrp)->ancestors, 0 /* BPF_FIELD_BYTE_OFFSET */);
	for_each_num(i, 0, HL_QUOTA_DEPTH) {
		l = level - i;
		if (l < 1) /* the root has no quota */
			break;
		if ((u = pool_charge(ancestor_id(cgrp, off, l), used, now)) && !until)
			until = u;
	}
	return until;
}

/* Finds the pools on cgroup cgrp's path, as quota_walk would charge
 * them, into t; false if they are more than t holds. */
__hl_global bool quota_path_find(u64 cgrp, struct hl_task *t)
{
	u64 off, id;
	int level, i, l;
	u32 n = 0;

	if (!cgrp || !t)
		return false;
	level = CORE_READ((struct cgroup *)cgrp, level);
	off = __builtin_preserve_field_info(((struct cgroup *)cgrp)->ancestors, 0 /* BPF_FIELD_BYTE_OFFSET */);
	for_each_num(i, 0, HL_QUOTA_DEPTH) {
		l = level - i;
		if (l < 1)
			break;
		id = ancestor_id(cgrp, off, l);
		if (!id || !bpf_map_lookup_elem(&quotas, &id))
			continue;
		if (n >= HL_QUOTA_PATH)
			return false;
		t->quota_pools[n & (HL_QUOTA_PATH - 1)] = id;
		n++;
	}
	t->quota_npools = n;
	return true;
}

/*
 * Charges used ns to p's pools, as quota_walk, through the pools its
 * context keeps: a walk up its cgroups costs a probe read and a map
 * lookup a level (a callback a fifth dearer with one cgroup level, half
 * with four, docs/results.md 2026-11-29), and each of p's callbacks
 * would walk. They are found again once p changes cgroup (cgroup_move
 * sets t->cgroup_id, its cpu cgroup: pools sit on it and above) or a pool
 * is made or dropped anywhere (quota_gen). A path with more pools than
 * the context holds, or a task without one, is walked every time.
 */
__hl_global u64 quota_account(struct task_struct___arg *task __arg_trusted, struct hl_task *t, u64 used, u64 now)
{
	struct task_struct *p = (void *)task;
	u32 gen = quota_gen, n;
	u64 until = 0, u;
	int i;

	if (!t)
		return quota_walk(task_cgroup(p), used, now);
	if (t->quota_key != t->cgroup_id || t->quota_gen != gen || !t->quota_key) {
		t->quota_key = 0;
		if (!t->cgroup_id || !quota_path_find(task_cgroup(p), t))
			return quota_walk(task_cgroup(p), used, now);
		t->quota_gen = gen;
		t->quota_key = t->cgroup_id;
	}
	n = t->quota_npools;
	for_each_num(i, 0, HL_QUOTA_PATH) {
		if (i >= n)
			break;
		if ((u = pool_charge(t->quota_pools[i & (HL_QUOTA_PATH - 1)], used, now)) && !until)
			until = u;
	}
	return until;
}

/* Until when p's cgroups are out of quota, 0 if they are not. */
static __always_inline u64 quota_throttled(struct task_struct *p, u64 now)
{
	return nr_quotas ? quota_account(HL_TASK(p), task_ctx(p), 0, now) : 0;
}

/* Charges p's run since this CPU last charged it; as quota_throttled.
 * The mark moves on with no quota too: the first quota set must not
 * charge a task for all its run before it. */
static __always_inline u64 quota_charge(struct task_struct *p, struct hl_cpu_own *o, u64 now)
{
	u64 used = now - o->quota_from;

	o->quota_from = now;
	return nr_quotas && (s64)used > 0 ? quota_account(HL_TASK(p), task_ctx(p), used, now) : 0;
}

/* Arms the release timer for at; 0 and times past fire at once. */
static __always_inline void release_arm(u64 at, u64 now)
{
	struct hl_release_timer *rt;
	u32 zero = 0;

	rt = bpf_map_lookup_elem(&release_timer, &zero);
	if (rt)
		bpf_timer_start(&rt->timer, (s64)(at - now) > 0 ? at - now : 0, 0);
}

/*
 * Makes a CPU release the throttled tasks at until, unless one will by
 * then already; the timer wakes an idle CPU for it. Setting release_at
 * and arming the timer are two steps: a timer armed late for a time
 * already served re-arms itself for release_at when it fires
 * (release_kick), so it never stays behind release_at.
 */
static __always_inline void release_schedule(u64 until, u64 now)
{
	u64 cur = release_at, seen;
	int k;

	for (k = 0; k < 4; k++) {
		if (cur && (s64)(cur - until) <= 0)
			return;
		seen = __sync_val_compare_and_swap(&release_at, cur, until);
		if (seen == cur)
			break;
		cur = seen;
	}
	release_arm(until, now);
}

/* A throttled task waits, FIFO, until its pools refill, with the slice
 * it will run with once let go (its own is 0 when its tick ended it). */
static __always_inline void quota_hold(struct task_struct *p, u64 slice, u64 until, u64 enq_flags, u64 now)
{
	hl_dsq_insert(p, HL_DSQ_THROTTLED, slice, enq_flags);
	release_schedule(until, now);
	stat_inc(throttled);
}

/*
 * Moves the throttled tasks whose pools refilled to the fair queue they
 * would have joined, at its clock (a lane task too: it runs as a lane
 * task, from there), and wakes an idle CPU each may use. Run by the first
 * CPU to dispatch once release_at is due, over the whole queue.
 */
__hl_global int quota_release(u64 now)
{
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	u64 due = release_at, next = 0, until, dsq;
	bool pinned;
	s32 cpu;
	u32 f;

	if (!due || (s64)(now - due) < 0 || !__sync_bool_compare_and_swap(&release_at, due, 0))
		return 0;
	if (bpf_iter_scx_dsq_new(&it, HL_DSQ_THROTTLED, 0) == 0) {
		/* An iterator loop: the verifier needs no bound on it. */
		while ((p = bpf_iter_scx_dsq_next(&it))) {
			until = quota_walk(task_cgroup(p), 0, now);
			if (until) {
				if (!next || (s64)(until - next) < 0)
					next = until;
				continue;
			}
			pinned = p->nr_cpus_allowed == 1;
			cpu = scx_bpf_task_cpu(p);
			if (!allowed_on(p, cpu))
				cpu = bpf_cpumask_first(p->cpus_ptr);
			f = frame_of(cpu, pinned);
			dsq = pinned ? HL_DSQ_PINNED(cpu) : HL_DSQ_FAIR(llc_of(cpu));
			scx_bpf_dsq_move_set_vtime(&it, frame_clock(f));
			if (!scx_bpf_dsq_move_vtime(&it, p, dsq, 0))
				continue;
			cpu = pinned ? cpu : scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
			if (cpu >= 0)
				scx_bpf_kick_cpu(cpu, HL_KICK_IDLE);
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	if (next)
		release_schedule(next, now);
	return 0;
}

/* Is a release due? Cheap enough for every dispatch and lane tick. */
static __always_inline bool release_due(u64 now)
{
	u64 at = release_at;

	return at && (s64)(now - at) >= 0;
}

/* The timer: an idle CPU dispatches, and so releases; busy ones will at
 * their next slice's end. Fired early for the release due (armed for an
 * earlier one meanwhile served), it waits for that one instead. */
static int release_kick(void *map, u32 *key, struct hl_release_timer *rt)
{
	const struct cpumask *idle;
	u64 at = release_at, now = hl_now();
	u32 cpu;

	if (at && (s64)(at - now) > 0) {
		bpf_timer_start(&rt->timer, at - now, 0);
		return 0;
	}
	idle = scx_bpf_get_idle_cpumask();
	cpu = bpf_cpumask_first(idle);
	scx_bpf_put_idle_cpumask(idle);
	if (cpu < nr_cpus)
		scx_bpf_kick_cpu(cpu, HL_KICK_IDLE);
	return 0;
}

/* From ops.init: the throttled queue and the release timer. */
static __always_inline s32 quota_init(void)
{
	struct hl_release_timer *rt;
	u32 zero = 0;
	s32 err;

	err = scx_bpf_create_dsq(HL_DSQ_THROTTLED, -1);
	if (err)
		return err;
	rt = bpf_map_lookup_elem(&release_timer, &zero);
	if (!rt)
		return -2; /* ENOENT */
	err = bpf_timer_init(&rt->timer, &release_timer, 1 /* CLOCK_MONOTONIC */);
	return err ?: bpf_timer_set_callback(&rt->timer, release_kick);
}

/*
 * cpu.max of cgroup id: a quota per period (quota_us ~0: "max", none),
 * and the burst it may save. A new pool starts full; a changed one keeps
 * what it has left, up to its new quota + burst, changed in place (a
 * walker may hold it). Throttled tasks are looked at again at once: a
 * quota raised or removed frees them.
 */
static __always_inline void quota_set(u64 id, u64 period_us, u64 quota_us, u64 burst_us)
{
	struct hl_quota q = {}, *old = bpf_map_lookup_elem(&quotas, &id);
	u64 now = hl_now();
	s64 cap;

	if (quota_us == ~0ULL || !period_us) {
		if (old && bpf_map_delete_elem(&quotas, &id) == 0) {
			__sync_fetch_and_sub(&nr_quotas, 1);
			__sync_fetch_and_add(&quota_gen, 1);
		}
	} else if (old) {
		old->quota_ns = quota_us * 1000;
		old->period_ns = period_us * 1000;
		old->burst_ns = burst_us * 1000;
		cap = (s64)(old->quota_ns + old->burst_ns);
		if (old->left_ns > cap)
			old->left_ns = cap;
	} else {
		q.quota_ns = quota_us * 1000;
		q.period_ns = period_us * 1000;
		q.burst_ns = burst_us * 1000;
		q.left_ns = (s64)q.quota_ns;
		q.period_end = now + q.period_ns;
		if (bpf_map_update_elem(&quotas, &id, &q, 1 /* BPF_NOEXIST */) == 0) {
			__sync_fetch_and_add(&nr_quotas, 1);
			__sync_fetch_and_add(&quota_gen, 1);
		} else
			__sync_fetch_and_add(&hl_quota_failures, 1);
	}
	if (old && release_at) {
		/* Due now: the next dispatch looks, the timer wakes one. */
		release_at = now;
		release_arm(now, now);
	}
}

static __always_inline void quota_forget(u64 id)
{
	if (bpf_map_delete_elem(&quotas, &id) == 0) {
		__sync_fetch_and_sub(&nr_quotas, 1);
		__sync_fetch_and_add(&quota_gen, 1);
	}
}

#else /* kernels before 7.1: cpu.max is not passed on, or not by this object */

static __always_inline u64 quota_throttled(struct task_struct *p, u64 now) { return 0; }
static __always_inline u64 quota_charge(struct task_struct *p, struct hl_cpu_own *o, u64 now) { return 0; }
static __always_inline void quota_hold(struct task_struct *p, u64 slice, u64 until, u64 enq_flags, u64 now) {}
static __always_inline int quota_release(u64 now) { return 0; }
static __always_inline bool release_due(u64 now) { return false; }
static __always_inline s32 quota_init(void) { return 0; }
static __always_inline void quota_forget(u64 id) {}

#endif
#endif /* HOTLANE_SCHED_QUOTA_BPF_H */
