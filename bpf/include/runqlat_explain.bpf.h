/*
 * runqlat_explain.bpf.h - why a wait was long: what its CPU did from the
 * wait's start to the switch that ended it.
 *
 * Part of runqlat.bpf.c. Each CPU keeps its recent history: one segment
 * per task that had it (which task, of which scheduling class and hotlane
 * class, since when) and its hardirq and softirq time, which the interrupt
 * hooks below count. A violation's explanation walks that history back
 * over the wait: the parts add up to the wait (to the nanosecond, but for
 * the irq time of the oldest segment, shared out in proportion to its
 * overlap), and the tasks that ran longest are named. A task's wait also
 * keeps where it began (the CPU it left, whether it was in sched_ext), so
 * that the explanation tells a migration, or sched_ext exiting meanwhile.
 *
 * What the tracer calls, when `explain` is set:
 *   explain_wait_began()  - a task's wait began: woken, or preempted
 *   explain_left_cpu()    - a task left this CPU
 *   explain_switched_in() - a task got this CPU (history_here()): its
 *                           segment opens
 *   explain_violation()   - the explanation of a violation's wait
 *
 * Include it after vmlinux.h, hotlane_bpf.h, family.bpf.h, classify.bpf.h
 * and runqlat_callbacks.bpf.h; it includes nothing itself.
 */
#ifndef HOTLANE_RUNQLAT_EXPLAIN_BPF_H
#define HOTLANE_RUNQLAT_EXPLAIN_BPF_H

/* Settings, written by the loader before load. */
const volatile bool explain;		/* keep each CPU's recent history to explain violations */
const volatile bool kernel_has_ext;	/* CONFIG_SCHED_CLASS_EXT: else every other task is fair */
/* CLOCK_MONOTONIC once sched_switch was attached, written then by the
 * loader; 0 before. */
volatile u64 history_since_ns;

/* Where the kernel's sched_ext class lives, if kallsyms shows it: a task
 * whose sched_class is this one is scheduled by the BPF scheduler. */
extern void ext_sched_class __ksym __weak;

/* Whether a task of scheduling class sched_class is in sched_ext. */
static __always_inline bool in_ext(u64 sched_class)
{
	return ksym_exists(&ext_sched_class) && sched_class == (u64)&ext_sched_class;
}

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

/* What a violation carries: verify/explain.go reads it. */
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

/* Where a task's current wait began; part of its wait state. */
struct wait_origin {
	u32 cpu;	/* the CPU it last left */
	u32 flags;	/* ORIGIN_* */
};

#define ORIGIN_CPU 1	/* cpu is valid */
#define ORIGIN_EXT 2	/* the wait began in the sched_ext class */

/*
 * Per CPU: its recent history, one segment per task that had the CPU, and
 * how much hardirq and softirq time it has spent in all.
 */
#define HL_SEGMENTS 64	/* a power of two */

struct segment {
	u64 start;		/* when the task got the CPU; 0: slot unused */
	u64 irq;		/* the CPU's irq_ns at start */
	u64 softirq;		/* the CPU's softirq_ns at start */
	u64 ext_cb;		/* the CPU's sched_ext callback time at start */
	u32 pid;
	u8 kind;		/* enum seg_kind */
	u8 class_id;
	u16 _pad;
	char comm[HL_COMM_LEN];
};

struct cpu_history {
	u64 irq_ns;		/* hardirq handler time, all of it */
	u64 softirq_ns;		/* softirq time, nested hardirqs taken out */
	u64 irq_entry;		/* the open hardirq handler's start; 0: none */
	u64 softirq_entry;	/* the open softirq's start; 0: none */
	u64 softirq_irq_base;	/* irq_ns when it started */
	u32 head;		/* the newest segment */
	u32 _pad;
	struct segment seg[HL_SEGMENTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct cpu_history);
} cpu_histories SEC(".maps");

/* This CPU's history. */
static __always_inline struct cpu_history *history_here(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_histories, &zero);
}

/* ---- a task's wait, where it began ------------------------------------- */

/* Task p's wait began (woken, or preempted): in sched_ext or not, if
 * that can be told. trusted: p is a BTF pointer (tp_btf). */
static __always_inline void explain_wait_began(struct wait_origin *o, struct task_struct *p, const bool trusted)
{
	if (!ksym_exists(&ext_sched_class))
		return;
	if ((u64)READ_FIELD(trusted, p, sched_class) == (u64)&ext_sched_class)
		o->flags |= ORIGIN_EXT;
	else
		o->flags &= ~ORIGIN_EXT;
}

/* Task p left this CPU; runnable: it waits again from now. A blocked
 * task's next wait begins at its wake-up. */
static __always_inline void explain_left_cpu(struct wait_origin *o, struct task_struct *p, bool runnable,
					     const bool trusted)
{
	o->cpu = bpf_get_smp_processor_id();
	o->flags = ORIGIN_CPU;
	if (runnable)
		explain_wait_began(o, p, trusted);
}

/* ---- the CPU's history ------------------------------------------------- */

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

/* Task pid (comm, scheduling priority and class, hotlane class class_id)
 * got this CPU at now: open its segment of the CPU's history c
 * (history_here(), looked up before the class is worked out, which then
 * costs nothing when there is no history). */
static __always_inline void explain_switched_in(struct cpu_history *c, u64 now, u32 pid, int prio, u64 sched_class,
						u32 class_id, const u64 *comm)
{
	const struct ext_cb_time *cb = ext_cb_time_here();
	u32 h = (c->head + 1) & (HL_SEGMENTS - 1);
	struct segment *s = &c->seg[h];

	s->start = now;
	s->irq = c->irq_ns;
	s->softirq = c->softirq_ns;
	s->ext_cb = cb ? cb->ns : 0;
	s->pid = pid;
	s->kind = seg_kind(pid, prio, sched_class);
	s->class_id = class_id;
	__builtin_memcpy(s->comm, comm, sizeof(s->comm));
	c->head = h;
}

/*
 * A CPU's history begins at its first switch (c has no segment yet). If
 * that comes after history_since_ns, the task leaving the CPU has had it
 * since then at least, as sched_switch would have seen otherwise: open its
 * segment there (pid, comm, scheduling priority and class). Without it a
 * wait behind a task that ran through the attach (an RT hog's burst) is
 * all "uncovered"; what came before history_since_ns still is, as the
 * wake-ups that start waits are hooked first. Its hotlane class is not
 * worked out; the interrupt totals it starts from are the history's own
 * (zero).
 */
static __always_inline void explain_history_begins(struct cpu_history *c, u32 pid, int prio, u64 sched_class,
						   const u64 *comm)
{
	u64 since = history_since_ns;
	struct segment *s;

	if (!since)
		return;
	explain_switched_in(c, since, pid, prio, sched_class, HL_MAX_CLASSES, comm);
	s = &c->seg[c->head & (HL_SEGMENTS - 1)];
	s->irq = 0;
	s->softirq = 0;
	s->ext_cb = 0;
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
 * What a CPU did from at to now, from its history c and its callback time
 * so far cb_now: walk its segments from the newest (the task leaving the
 * CPU now) back to the one running at `at`. A segment's irq time is the
 * CPU's irq total at the next segment's start minus at its own; the
 * oldest, cut at `at`, gets its share in proportion.
 */
static __always_inline void explain_wait(struct explanation *ex, const struct cpu_history *c, u64 cb_now,
					 u64 at, u64 now)
{
	u64 end = now, irq_end = c->irq_ns, soft_end = c->softirq_ns, cb_end = cb_now;
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

/*
 * The explanation of a wait from `at` to now of a task switched in on
 * cpu, whose wait began at o; is_ext says it runs in the sched_ext class.
 * here says cpu is this CPU: its state is found without a helper call
 * that can fail, which the verifier would walk twice. Otherwise (a felt
 * wait ending later, elsewhere) the history is another CPU's, which that
 * CPU may be writing meanwhile (it is only read).
 */
static __always_inline void explain_violation(struct explanation *ex, u32 cpu, const bool here,
					      const struct wait_origin *o, u64 at, u64 now, bool is_ext)
{
	u32 zero = 0;
	const struct cpu_history *c;
	const struct ext_cb_time *cb;

	__builtin_memset(ex, 0, sizeof(*ex));
	ex->from_cpu = ~0U;
	if (here) {
		c = history_here();
		cb = ext_cb_time_here();
	} else {
		c = bpf_map_lookup_percpu_elem(&cpu_histories, &zero, cpu);
		cb = ext_cb_time_on(cpu);
	}
	if (!c || !cb)
		return;
	explain_wait(ex, c, cb->ns, at, now);
	ex->flags = EX_DONE;
	if (o->flags & ORIGIN_CPU) {
		ex->from_cpu = o->cpu;
		if (o->cpu != cpu)
			ex->flags |= EX_MIGRATED;
	}
	if (ksym_exists(&ext_sched_class)) {
		ex->flags |= EX_EXT_KNOWN;
		if ((o->flags & ORIGIN_EXT) && !is_ext)
			ex->flags |= EX_EXT_LEFT;
	}
	if (bypass_watched) {
		ex->flags |= EX_BYPASS_KNOWN;
		if (bypass_during(at, now))
			ex->flags |= EX_BYPASS;
	}
}

/* ---- interrupt time ---------------------------------------------------- */

/* Interrupt time per CPU. Hardirq handlers do not nest; a softirq can be
 * interrupted, and its handlers' time is taken out of the softirq's. */
static __always_inline void irq_entry(void)
{
	struct cpu_history *c = history_here();

	if (c)
		c->irq_entry = bpf_ktime_get_ns();
}

static __always_inline void irq_exit(void)
{
	struct cpu_history *c = history_here();

	if (c && c->irq_entry) {
		c->irq_ns += bpf_ktime_get_ns() - c->irq_entry;
		c->irq_entry = 0;
	}
}

static __always_inline void softirq_entry(void)
{
	struct cpu_history *c = history_here();

	if (c) {
		c->softirq_entry = bpf_ktime_get_ns();
		c->softirq_irq_base = c->irq_ns;
	}
}

static __always_inline void softirq_exit(void)
{
	struct cpu_history *c = history_here();
	u64 d, nested;

	if (!c || !c->softirq_entry)
		return;
	d = bpf_ktime_get_ns() - c->softirq_entry;
	nested = c->irq_ns - c->softirq_irq_base;
	c->softirq_ns += d > nested ? d - nested : 0;
	c->softirq_entry = 0;
}

/* TP_PROTO(int irq, struct irqaction *action) and (..., int ret);
 * TP_PROTO(unsigned int vec_nr). The arguments do not matter: only when. */
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

#endif /* HOTLANE_RUNQLAT_EXPLAIN_BPF_H */
