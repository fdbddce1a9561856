/*
 * scx_api.h - the sched_ext kfuncs hotlane's scheduler calls, declared for
 * one kfunc API generation at a time.
 *
 * sched_ext renamed and extended its kfuncs as it evolved, and the kernel's
 * BTF keeps old and new names side by side:
 *
 *   HL_SCX_API 612  Linux 6.12: scx_bpf_dispatch(), scx_bpf_dispatch_vtime(),
 *                   scx_bpf_consume().
 *   HL_SCX_API 613  6.13 .. 6.18: scx_bpf_dsq_insert(), scx_bpf_dsq_insert_vtime(),
 *                   scx_bpf_dsq_move_to_local().
 *   HL_SCX_API 700  7.1 and later: scx_bpf_dsq_insert___v2() (returns
 *                   bool), scx_bpf_dsq_move_to_local___v2() (takes
 *                   enq_flags) and scx_bpf_reenqueue_local___v2() (returns
 *                   void) next to the old names. 6.19 and 7.0 pair the
 *                   ___v2 insert with the old move_to_local: no object.
 *
 * cilium/ebpf (v0.22) looks a kfunc up among the types of its name with any
 * "___suffix" stripped and then drops those whose full name differs, but
 * its loop skips the type after each one it drops: on 7.x, plain
 * scx_bpf_dsq_insert, ___v2 and ___v2_impl leave the plain one and
 * ___v2_impl, and the load fails ("multiple matching types"). Weak kfuncs
 * guarded by ksym_exists() do not help: only "not found" makes a weak kfunc
 * optional, and the ambiguous lookup fails before the guard matters
 * (loader's TestCiliumFlavourLookupSkips pins this and fails once fixed). So the scheduler is compiled once per generation (see
 * gen.go), each object names only kfuncs that exist unambiguously in its
 * kernels, and the loader picks the object from the running kernel's BTF
 * (loader.KfuncGeneration).
 *
 * The prototypes are written from the kernels' BTF (kernel/sched/ext.c).
 */
#ifndef HOTLANE_SCX_API_H
#define HOTLANE_SCX_API_H

#ifndef HL_SCX_API
#error "compile with -DHL_SCX_API=612, 613 or 700"
#endif

/* Kfuncs every generation has under the same name. */
s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __ksym;
s32 scx_bpf_dsq_nr_queued(u64 dsq_id) __ksym;
s32 scx_bpf_select_cpu_dfl(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
			   bool *is_idle) __ksym;
void scx_bpf_kick_cpu(s32 cpu, u64 flags) __ksym;
s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
void scx_bpf_error_bstr(char *fmt, unsigned long long *data, u32 data__sz) __ksym;

/*
 * Walking a DSQ: new/next/destroy form an open-coded iterator, so the
 * verifier needs no loop bound; destroy is due even when new fails. A task
 * the walk yields can be moved to another DSQ with hl_dsq_move() while the
 * iterator is live.
 */
int bpf_iter_scx_dsq_new(struct bpf_iter_scx_dsq *it, u64 dsq_id, u64 flags) __ksym;
struct task_struct *bpf_iter_scx_dsq_next(struct bpf_iter_scx_dsq *it) __ksym;
void bpf_iter_scx_dsq_destroy(struct bpf_iter_scx_dsq *it) __ksym;

#if HL_SCX_API == 612
void scx_bpf_dispatch(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym;
void scx_bpf_dispatch_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime,
			    u64 enq_flags) __ksym;
bool scx_bpf_consume(u64 dsq_id) __ksym;
#define hl_dsq_insert(p, dsq, slice, fl) scx_bpf_dispatch(p, dsq, slice, fl)
#define hl_dsq_insert_vtime(p, dsq, slice, vt, fl) scx_bpf_dispatch_vtime(p, dsq, slice, vt, fl)
#define hl_dsq_move_to_local(dsq) scx_bpf_consume(dsq)
bool scx_bpf_dispatch_from_dsq(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p,
			       u64 dsq_id, u64 enq_flags) __ksym;
#define hl_dsq_move(it, p, dsq, fl) scx_bpf_dispatch_from_dsq(it, p, dsq, fl)
u32 scx_bpf_reenqueue_local(void) __ksym;
#define hl_reenqueue_local() scx_bpf_reenqueue_local()

#elif HL_SCX_API == 613
void scx_bpf_dsq_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym;
void scx_bpf_dsq_insert_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime,
			      u64 enq_flags) __ksym;
bool scx_bpf_dsq_move_to_local(u64 dsq_id) __ksym;
#define hl_dsq_insert(p, dsq, slice, fl) scx_bpf_dsq_insert(p, dsq, slice, fl)
#define hl_dsq_insert_vtime(p, dsq, slice, vt, fl) scx_bpf_dsq_insert_vtime(p, dsq, slice, vt, fl)
#define hl_dsq_move_to_local(dsq) scx_bpf_dsq_move_to_local(dsq)
bool scx_bpf_dsq_move(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id,
		      u64 enq_flags) __ksym;
#define hl_dsq_move(it, p, dsq, fl) scx_bpf_dsq_move(it, p, dsq, fl)
u32 scx_bpf_reenqueue_local(void) __ksym;
#define hl_reenqueue_local() scx_bpf_reenqueue_local()

#elif HL_SCX_API == 700
bool scx_bpf_dsq_insert___v2(struct task_struct *p, u64 dsq_id, u64 slice,
			     u64 enq_flags) __ksym;
void scx_bpf_dsq_insert_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime,
			      u64 enq_flags) __ksym;
bool scx_bpf_dsq_move_to_local___v2(u64 dsq_id, u64 enq_flags) __ksym;
#define hl_dsq_insert(p, dsq, slice, fl) scx_bpf_dsq_insert___v2(p, dsq, slice, fl)
#define hl_dsq_insert_vtime(p, dsq, slice, vt, fl) scx_bpf_dsq_insert_vtime(p, dsq, slice, vt, fl)
#define hl_dsq_move_to_local(dsq) scx_bpf_dsq_move_to_local___v2(dsq, 0)
bool scx_bpf_dsq_move(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id,
		      u64 enq_flags) __ksym;
#define hl_dsq_move(it, p, dsq, fl) scx_bpf_dsq_move(it, p, dsq, fl)
void scx_bpf_reenqueue_local___v2(void) __ksym;
#define hl_reenqueue_local() scx_bpf_reenqueue_local___v2()
/* The runqueue's clock where it is current: no clocksource read (where
 * the clocksource is an HPET, bpf_ktime_get_ns() is a device access).
 * Monotonic per CPU only: a difference with another CPU's reading is
 * taken signed. */
u64 scx_bpf_now(void) __ksym;
#define hl_now() scx_bpf_now()

#else
#error "unknown HL_SCX_API"
#endif
#ifndef hl_now
#define hl_now() bpf_ktime_get_ns()
#endif

/*
 * The value of a kernel enum constant as the running kernel defines it:
 * a CO-RE relocation the loader resolves against kernel BTF, so values that
 * moved between releases (SCX_ENQ_*, SCX_KICK_*, SCX_DSQ_*) are never
 * hard-coded. Unknown constants fail the load instead of silently using a
 * wrong number.
 */
#define HL_ENUM(type, name) \
	__builtin_preserve_enum_value(*(typeof(enum type) *)name, 1 /* BPF_ENUMVAL_VALUE */)

#define HL_DSQ_LOCAL	HL_ENUM(scx_dsq_id_flags, SCX_DSQ_LOCAL)
#define HL_DSQ_LOCAL_ON	HL_ENUM(scx_dsq_id_flags, SCX_DSQ_LOCAL_ON)
#define HL_KICK_PREEMPT	HL_ENUM(scx_kick_flags, SCX_KICK_PREEMPT)
#define HL_KICK_IDLE	HL_ENUM(scx_kick_flags, SCX_KICK_IDLE)
#define HL_ENQ_WAKEUP	HL_ENUM(scx_enq_flags, SCX_ENQ_WAKEUP)
#define HL_ENQ_PREEMPT	HL_ENUM(scx_enq_flags, SCX_ENQ_PREEMPT)
#define HL_ENQ_REENQ	HL_ENUM(scx_enq_flags, SCX_ENQ_REENQ)
#define HL_ENQ_LAST	HL_ENUM(scx_enq_flags, SCX_ENQ_LAST)
#define HL_TASK_QUEUED	HL_ENUM(scx_ent_flags, SCX_TASK_QUEUED)
#define HL_DEQ_SLEEP	HL_ENUM(scx_deq_flags, SCX_DEQ_SLEEP)
#define HL_DSQ_GLOBAL	HL_ENUM(scx_dsq_id_flags, SCX_DSQ_GLOBAL)
#define HL_WAKE_SYNC	HL_ENUM(scx_wake_flags, SCX_WAKE_SYNC)

/*
 * scx_bpf_error() with up to three arguments: the kfunc takes the format
 * arguments as an array of u64, like bpf_snprintf. Errors abort the
 * scheduler; the kernel reports the message through ops.exit.
 */
#define hl_error(fmt, ...)                                                     \
	({                                                                     \
		static char ___fmt[] = fmt;                                    \
		unsigned long long ___args[] = { 0, ##__VA_ARGS__ };           \
		scx_bpf_error_bstr(___fmt, &___args[1],                        \
				   sizeof(___args) - sizeof(___args[0]));      \
	})

#endif /* HOTLANE_SCX_API_H */
