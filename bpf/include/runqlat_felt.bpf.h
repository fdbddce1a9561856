/*
 * runqlat_felt.bpf.h - what the application feels: a wait measured from
 * the wake-up's cause, to where the application resumes.
 *
 * Part of runqlat.bpf.c. A task woken by its own timer (nanosleep,
 * clock_nanosleep, poll and epoll timeouts: an hrtimer_sleeper) is late
 * from the timer's expiry, not from sched_waking: between the two lie the
 * timer interrupt's delivery and whatever kept it from running. The timer
 * hooks below note, per CPU, whose timer is expiring there; the wake-up
 * that follows on that CPU is that timer's, and its wait has a cause. A
 * wait with a cause is recorded three times (the tracer's histogram rows):
 * its wait, its felt wait from the cause, and the cause's delivery (timer
 * expiry to sched_waking).
 *
 * The application's clock read comes after the switch-in: the context
 * switch's tail (under a VM, the new address space's first accesses) and
 * the way out of the sleep call. Where the kernel allows fexit, a caused
 * wait's felt sample therefore stays open (felt_defer()) until the sleep
 * call returns; a task that blocks again first (a sleep the tracer does
 * not hook) has it ended at its switch-in, at its next wake-up.
 *
 * What the tracer calls:
 *   felt_woken()     - a wake-up: the expiring timer's, or with no cause
 *   felt_uncaused()  - a wait with no cause but the scheduler
 *   felt_defer()     - a caused wait got the CPU: keep its felt sample open
 *   felt_close()     - the open sample ends: what there is to record
 * and reads a task's struct felt_wait, part of its wait state.
 *
 * Include it after vmlinux.h, hotlane_bpf.h, family.bpf.h and
 * classify.bpf.h; it includes nothing itself.
 */
#ifndef HOTLANE_RUNQLAT_FELT_BPF_H
#define HOTLANE_RUNQLAT_FELT_BPF_H

/*
 * Where a felt wait ends. The loader sets this once it has attached the
 * fexit hooks on the sleep calls (fexit may be refused: then the felt
 * wait ends at the switch-in, like the wait).
 */
volatile bool felt_ends_at_return;

/* The function of every sleeping task's hrtimer (struct hrtimer_sleeper):
 * an expiring timer with this function wakes the task it belongs to. */
extern void hrtimer_wakeup __ksym __weak;

/* The cause of a task's current wait, if known; part of its wait state. */
struct felt_wait {
	u64 cause_at;	/* when the timer that woke it expired (CLOCK_MONOTONIC) */
	u64 delivery;	/* from then to sched_waking */
	u32 flags;	/* FELT_* */
};

#define FELT_CAUSED 1	/* the current wait's cause is known: cause_at and delivery hold */
#define FELT_OPEN 2	/* a caused wait ran; its felt wait ends at the sleep call's return */

/* ---- the cause: a sleeping task's timer -------------------------------- */

/* Per CPU: the task whose timer is expiring here now. */
struct timer_cause {
	u64 task;	/* 0: none */
	u64 due;	/* when its timer was due (CLOCK_MONOTONIC) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct timer_cause);
} timer_causes SEC(".maps");

static __always_inline struct timer_cause *timer_cause_here(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&timer_causes, &zero);
}

/*
 * A timer expired on this CPU (read through a trusted pointer or not):
 * if it is a sleeping task's, hrtimer_wakeup() is about to wake the task,
 * here, before anything else runs. A sleeping task's timer is the first
 * member of its struct hrtimer_sleeper, and the task follows it. The
 * timer was due at _softexpires on its clock base, whose offset from
 * CLOCK_MONOTONIC is base->offset. The task pointer is only compared,
 * never read through: it may be a task that is not woken after all (it
 * was awake already).
 */
static __always_inline void timer_expiring(struct hrtimer *timer, const bool trusted)
{
	struct timer_cause *tc;
	struct hrtimer_clock_base *base;

	if (!ksym_exists(&hrtimer_wakeup) || (u64)READ_FIELD(trusted, timer, function) != (u64)&hrtimer_wakeup)
		return;
	tc = timer_cause_here();
	if (!tc)
		return;
	base = READ_FIELD(trusted, timer, base);
	tc->task = (u64)CORE_READ((struct hrtimer_sleeper *)timer, task);
	tc->due = READ_FIELD(trusted, timer, _softexpires) - READ_FIELD(trusted, base, offset);
}

/* The timer's function returned: a task it did not wake (one awake
 * already) must not be taken for woken by it later. */
static __always_inline void timer_expired(void)
{
	struct timer_cause *tc = timer_cause_here();

	if (tc)
		tc->task = 0;
}

/* TP_PROTO(struct hrtimer *hrtimer, ktime_t *now) */
SEC("tp_btf/hrtimer_expire_entry")
int rq_timer_btf(u64 *ctx)
{
	timer_expiring((struct hrtimer *)ctx[0], true);
	return 0;
}

SEC("raw_tp/hrtimer_expire_entry")
int rq_timer_raw(u64 *ctx)
{
	timer_expiring((struct hrtimer *)ctx[0], false);
	return 0;
}

/* TP_PROTO(struct hrtimer *hrtimer) */
SEC("tp_btf/hrtimer_expire_exit")
int rq_timer_exit_btf(u64 *ctx)
{
	timer_expired();
	return 0;
}

SEC("raw_tp/hrtimer_expire_exit")
int rq_timer_exit_raw(u64 *ctx)
{
	timer_expired();
	return 0;
}

/* A wait with no cause but the scheduler: a new task's, a preemption's. */
static __always_inline void felt_uncaused(struct felt_wait *fw)
{
	fw->flags &= ~FELT_CAUSED;
}

/*
 * A wake-up at now of the task at address task: it is the one of the
 * timer expiring on this CPU, or it has no known cause.
 */
static __always_inline void felt_woken(struct felt_wait *fw, u64 task, u64 now)
{
	struct timer_cause *tc = timer_cause_here();

	if (tc && tc->task && tc->task == task) {
		fw->cause_at = tc->due;
		fw->delivery = now > fw->cause_at ? now - fw->cause_at : 0;
		fw->flags |= FELT_CAUSED;
		tc->task = 0;
		return;
	}
	felt_uncaused(fw);
}

/* ---- the end: the sleep call's return ---------------------------------- */

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
 * A caused wait that has got the CPU, until its sleep call returns
 * (tp_btf with felt_ends_at_return only): what its felt sample and
 * violation need then. Its own map, so that the wait state of every task
 * stays small; only a task whose wait had a cause gets an entry.
 */
struct open_felt {
	u64 cause_at;
	u64 ran_at;		/* the switch-in; 0: closed */
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

/*
 * Caused wait w of task p, of class cls, got the CPU after prev_comm: keep
 * what its felt sample needs until its sleep call returns. p must be a
 * trusted pointer (tp_btf). False if the sample is not deferred: the
 * sleep calls are not hooked, or there is nowhere to keep it.
 */
static __always_inline bool felt_defer(struct task_struct *p, struct felt_wait *fw, u32 cls,
				       const struct wait_seen *w, const char *prev_comm)
{
	struct open_felt *of;

	if (!felt_ends_at_return)
		return false;
	of = bpf_task_storage_get(&open_felts, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
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
	fw->flags |= FELT_OPEN;
	return true;
}

/*
 * The felt wait of p, open since its switch-in, ends at end: at its sleep
 * call's return (fexit), or, at its next wake-up if it blocked elsewhere
 * first (end 0), at the switch-in. p is trusted. Fills w with the wait
 * and returns its open entry (for its class and prev_comm), or NULL if
 * there is none. Not done at the blocking switch-out: a second violation
 * stream in the sched_switch program makes the verifier's work on it
 * grow tenfold.
 */
static __always_inline struct open_felt *felt_close(struct task_struct *p, struct felt_wait *fw, u64 end,
						    struct wait_seen *w)
{
	struct open_felt *of;

	fw->flags &= ~FELT_OPEN;
	of = bpf_task_storage_get(&open_felts, p, NULL, 0);
	if (!of || !of->ran_at)
		return NULL;
	w->end = end > of->ran_at ? end : of->ran_at;
	w->ran_at = of->ran_at;
	w->wait = of->wait;
	w->felt = w->end > of->cause_at ? w->end - of->cause_at : 0;
	w->delivery = of->delivery;
	w->prev_pid = of->prev_pid;
	w->cpu = of->cpu;
	w->caused = true;
	w->in_ext = of->in_ext;
	of->ran_at = 0;
	return of;
}

#endif /* HOTLANE_RUNQLAT_FELT_BPF_H */
