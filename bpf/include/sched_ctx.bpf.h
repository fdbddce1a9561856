/*
 * sched_ctx.bpf.h - what hotlane's scheduler knows: the settings the loader
 * writes, the machine's topology, the per-CPU, per-LLC and per-task
 * contexts, the dispatch queues and the counters. Included by sched.bpf.c
 * only; the policy lives in sched_fair.bpf.h, sched_lane.bpf.h and
 * sched_guard.bpf.h, and docs/design.md describes the whole.
 */
#ifndef HOTLANE_SCHED_CTX_BPF_H
#define HOTLANE_SCHED_CTX_BPF_H

#define HL_MAX_CPUS 512
#define HL_MAX_LLCS 128
#define PF_KTHREAD 0x00200000 /* include/linux/sched.h; stable since 2.6 */
#define HL_WEIGHT_NICE0 100   /* p->scx.weight of a nice-0 task, and cpu.weight's default */

/*
 * Dispatch queues. Each LLC has a FIFO lane queue and a deadline-ordered
 * fair queue, and each CPU a deadline-ordered queue for fair tasks that may
 * run on it alone (taskset, per-thread pinning): those never sit in a
 * shared queue that every CPU of the LLC walks past under its lock.
 */
#define HL_DSQ_LANE(llc) (0x1000ULL + (llc))
#define HL_DSQ_FAIR(llc) (0x2000ULL + (llc))
#define HL_DSQ_PINNED(cpu) (0x4000ULL + (cpu))

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
const volatile u64 min_slice_ns = 500 * 1000;
/* Test knob, not a feature: call scx_bpf_error() after this many enqueues. */
const volatile u64 debug_error_after = 0;

/* The topology (topology.Read), written by the loader. CPUs are grouped
 * by LLC in llc_cpus: LLC l holds llc_cpus[llc_first[l] ..
 * llc_first[l] + llc_size[l] - 1]. */
const volatile u32 nr_cpus = 1;
const volatile u32 nr_llcs = 1;
const volatile u32 cpu_llc[HL_MAX_CPUS];
const volatile u32 llc_cpus[HL_MAX_CPUS];
const volatile u32 llc_first[HL_MAX_LLCS];
const volatile u32 llc_size[HL_MAX_LLCS];
const volatile u32 llc_node[HL_MAX_LLCS];

/* Indexes from values the verifier cannot bound are masked, not checked
 * (clang drops a mask it deems implied by a check, and the verifier may
 * not follow the check): both limits are powers of two. A CPU is below
 * nr_cpus; -1 reads an unused entry. */
static __always_inline u32 llc_of(s32 cpu)
{
	return cpu_llc[(u32)cpu & (HL_MAX_CPUS - 1)] & (HL_MAX_LLCS - 1);
}

static __always_inline const volatile struct hl_class *class_get(u32 id)
{
	if (id >= HL_MAX_CLASSES)
		id = HL_MAX_CLASSES - 1;
	/* The mask stays: the verifier lost the check's bound on a copy of
	 * id that a call kept in another register (hl_select_cpu). */
	asm volatile("" : "+r"(id));
	return &hl_classes[id & (HL_MAX_CLASSES - 1)];
}

/*
 * Per CPU, in two parts. hl_cpu_shared is what other CPUs read (and, for a
 * lane claim, write) when they look for a CPU to preempt or to wake; it is
 * a cache line of its own so that a CPU's bookkeeping does not bounce the
 * lines of its neighbours. hl_cpu_own is only ever touched under its CPU's
 * runqueue lock: by that CPU, or by ops.running and ops.stopping from
 * another (own_of).
 */
enum hl_cpu_state {
	HL_CPU_IDLE = 0,	/* running nothing of ours */
	HL_CPU_FAIR,		/* a fair task: a lane victim, a wake-up preemption target */
	HL_CPU_LANE,		/* a lane task */
	HL_CPU_SHIELDED,	/* a guard turn: no victim */
};

struct hl_cpu_shared {
	u64 started_at;	/* when the running task started */
	s64 deadline;	/* the running fair task's deadline, from its queue's clock */
	s64 claim;	/* the lane task woken into this CPU's local queue (claim_word); 0 none */
	u32 state;	/* enum hl_cpu_state */
} __attribute__((aligned(64)));

struct hl_cpu_own {
	u64 lane_ns;	/* lane time here since this CPU last served the fair side */
	u64 guard_until;	/* end of the guard turn this CPU is serving */
	u64 run_slice;	/* the slice the running fair task started with */
	s32 curr_pid;	/* the task running (or last run) here */
	u32 class_id;	/* and the class it runs as */
	u32 lane;	/* it runs as a lane task */
	u32 guard_turn;	/* the next fair task to run here is a guard turn */
	s32 resumed_pid;	/* a preempted fair task put back in the local queue */
	u64 quota_from;	/* the running task's time is charged to cpu.max from here */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HL_MAX_CPUS);
	__type(key, u32);
	__type(value, struct hl_cpu_shared);
} cpu_shared SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct hl_cpu_own);
} cpu_own SEC(".maps");

static __always_inline struct hl_cpu_shared *shared_of(s32 cpu)
{
	u32 key = cpu;

	return bpf_map_lookup_elem(&cpu_shared, &key);
}

static __always_inline struct hl_cpu_own *own_get(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_own, &zero);
}

/*
 * The CPU a task runs on, and that CPU's own part, for ops.running and
 * ops.stopping: the kernel also calls them from another CPU, the one that
 * changes a running task's nice value, affinity or cgroup (it stops and
 * restarts the task on the task's runqueue, whose lock it holds). Read
 * from the caller's CPU, a reniced spinner was charged from that CPU's
 * last start and got 0.68x its share (TestGuestFairRemoteReniceCharges-
 * TheTasksCPU).
 */
static __always_inline struct hl_cpu_own *own_of(s32 cpu)
{
	u32 zero = 0;

	return bpf_map_lookup_percpu_elem(&cpu_own, &zero, cpu);
}

/*
 * A fair queue's clock (sched_fair.bpf.h), in a line of its own: frame f
 * < HL_MAX_LLCS is LLC f's shared queue, HL_MAX_LLCS + c CPU c's own
 * queue. Each queue has its own: its tasks advance at their own pace.
 */
#define HL_FRAMES (HL_MAX_LLCS + HL_MAX_CPUS)

struct hl_frame {
	u64 vclock;
} __attribute__((aligned(64)));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HL_FRAMES);
	__type(key, u32);
	__type(value, struct hl_frame);
} frames SEC(".maps");

/* The frame of the fair queue a task goes to on cpu. */
static __always_inline u32 frame_of(s32 cpu, bool pinned)
{
	return pinned ? HL_MAX_LLCS + ((u32)cpu & (HL_MAX_CPUS - 1)) : llc_of(cpu);
}

/*
 * The task context: the classifier's cache (classify.bpf.h) and the fair
 * class's accounting. Created in init_task, looked up everywhere else.
 */
#define HL_QUOTA_PATH 4	/* cpu.max pools on a task's cgroup path kept in its context */

struct hl_task {
	struct hl_task_class cls;
	u64 vruntime;	/* fair virtual time, in the frame of its queue's clock */
	s64 lag;	/* clock - vruntime when it last slept, bounded */
	u64 burst;	/* running average of the CPU time between its sleeps */
	u64 ran;	/* CPU time since it last woke */
	u64 cgroup_id;	/* its cgroup v2 cgroup, for cpu.weight */
	u32 frame;	/* the queue whose clock vruntime is measured from */
	u32 yielded;	/* it called sched_yield(): its next deadline is a slice out */
	u64 slept_clock;	/* its queue's clock when it last slept */
	/* The cpu.max pools on its cgroup path (sched_quota.bpf.h): */
	u64 quota_key;	/* the cgroup_id they were found for; 0: not yet */
	u32 quota_gen;	/* and quota_gen then */
	u32 quota_npools;
	u64 quota_pools[HL_QUOTA_PATH];	/* their cgroup ids, its own cgroup's first */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hl_task);
} hl_tasks SEC(".maps");

static __always_inline struct hl_task *task_ctx(struct task_struct *p)
{
	return bpf_task_storage_get(&hl_tasks, p, NULL, 0);
}

/*
 * The class of p through its context's cache; a task without a context
 * (storage could not be created: out of memory) is classified afresh,
 * which the classifier counts.
 */
__hl_global u32 task_class(struct task_struct___arg *task __arg_trusted, struct hl_task *t)
{
	struct task_struct *p = (void *)task;
	return hl_classify_entry(p, t ? &t->cls : NULL);
}

/* cgroup v2 cpu.weight by cgroup id, kept by the cgroup callbacks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, u32);
} cgroup_weights SEC(".maps");

/* Counters read by `hotlane run` every stats interval; mirrored by sched's statsRecord. */
struct hl_stats {
	u64 enqueued[HL_MAX_CLASSES];
	u64 dispatched[HL_MAX_CLASSES];	/* times a task of the class started running */
	u64 direct_idle[HL_MAX_CLASSES];	/* woken straight onto an idle CPU */
	u64 preempt_kicks;	/* lane wake-ups that preempted a fair task */
	u64 idle_kicks;
	u64 guard_dispatches;	/* guard turns started */
	u64 kthread_direct;
	u64 lane_kept;	/* a lane task's slice ran out and it kept its CPU */
	u64 fair_resumed;	/* a fair task the lane preempted went back to its CPU */
	u64 cpu_released;	/* RT/DL took a CPU; its local queue was requeued */
	u64 fair_preempts;	/* fair wake-ups that preempted a later fair deadline */
	u64 fair_steals;	/* fair tasks taken from another LLC's queue */
	u64 lane_queued;	/* lane wake-ups that found no CPU to take */
	u64 lane_steals;	/* lane tasks taken from another LLC's queue */
	u64 pinned_local;	/* migration-disabled tasks queued on their own CPU */
	u64 pinned_unserved;	/* dispatches that left this CPU's own queue waiting */
	u64 fair_kept;	/* a fair task's slice ran out and its deadline kept its CPU */
	u64 fair_affine;	/* fair sync wake-ups queued on the waker's CPU */
	u64 fair_pulls;		/* fair wake-ups queued in the waker's LLC to preempt it */
	u64 throttled;	/* tasks held because their cgroup used its cpu.max quota */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct hl_stats);
} stats SEC(".maps");

static __always_inline struct hl_stats *stats_get(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

#define stat_inc(field)                                                        \
	({                                                                     \
		struct hl_stats *___st = stats_get();                          \
		if (___st)                                                     \
			___st->field++;                                        \
	})

#define stat_class_inc(field, cls)                                             \
	({                                                                     \
		struct hl_stats *___st = stats_get();                          \
		if (___st)                                                     \
			___st->field[(cls) & (HL_MAX_CLASSES - 1)]++;          \
	})

s32 scx_bpf_pick_idle_cpu(const struct cpumask *cpus_allowed, u64 flags) __ksym;
bool scx_bpf_test_and_clear_cpu_idle(s32 cpu) __ksym;
bool bpf_cpumask_test_cpu(u32 cpu, const struct cpumask *cpumask) __ksym;
u32 bpf_cpumask_first(const struct cpumask *cpumask) __ksym;

static __always_inline bool allowed_on(struct task_struct *p, s32 cpu)
{
	return cpu >= 0 && cpu < nr_cpus && bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
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

#endif /* HOTLANE_SCHED_CTX_BPF_H */
