/*
 * hotlane_bpf.h - the small BPF toolkit every hotlane program includes.
 *
 * Include it after vmlinux.h, which supplies every kernel type and enum (the
 * __u64/u32 typedefs, enum bpf_func_id, BPF_MAP_TYPE_*, BPF_ANY, XDP_PASS,
 * struct task_struct, ...). We deliberately use no third-party BPF headers:
 * this file declares only what hotlane's programs use, so anything new must be
 * added here on purpose.
 *
 * Program contexts, as cilium/ebpf and the kernel expect them:
 *
 *   SEC("tp_btf/<tp>"), SEC("fentry/<fn>"), SEC("fexit/<fn>"),
 *   SEC("raw_tp/<tp>"): the context is an array of u64, one slot per
 *     argument of the tracepoint's TP_PROTO (or of the function), in order:
 *         int prog(u64 *ctx) { struct task_struct *next = (void *)ctx[2]; }
 *     For tp_btf and fentry the verifier knows the argument types from BTF,
 *     so pointers can be dereferenced directly (next->pid). For raw_tp they
 *     are plain numbers: read through them with CORE_READ()/CORE_READ_INTO().
 *     Slot numbers follow the kernel's prototype, which can change between
 *     releases; check btf_trace_<tp> in vmlinux.h.
 *   SEC("tracepoint/<group>/<name>"): the context is the tracefs record,
 *     struct trace_event_raw_<name> in vmlinux.h.
 *   SEC("kprobe/<fn>"): the context is struct pt_regs *.
 *   SEC("xdp"): the context is struct xdp_md *.
 */
#ifndef HOTLANE_BPF_H
#define HOTLANE_BPF_H

#ifndef __VMLINUX_H__
#error "include vmlinux.h before hotlane_bpf.h"
#endif

/* ---- sections and attributes ------------------------------------------ */

/*
 * The loader finds programs, maps and the license by ELF section name, and
 * decides a program's type and attach point from it. "used" keeps clang from
 * dropping objects that nothing in the C code references.
 */
#define SEC(name) __attribute__((section(name), used))

/*
 * The kernel refuses GPL-only helpers (bpf_probe_read_kernel, tp_btf, task
 * storage, sched_ext kfuncs, ...) unless the object declares a GPL-compatible
 * license. Put LICENSE("GPL"); once per program file.
 */
#define LICENSE(s) char _license[] SEC("license") = s

/*
 * A kernel symbol (kfunc or kernel variable) resolved by the loader against
 * the running kernel's BTF. With __weak a missing symbol loads as NULL
 * instead of failing, so code can test for it before calling; see
 * ksym_exists().
 */
#define __ksym __attribute__((section(".ksyms")))
#define __weak __attribute__((weak))

/*
 * True if a __weak __ksym was found in the running kernel. The loader patches
 * the address in; the verifier then prunes the branch that is never taken, so
 * code calling a missing kfunc still loads.
 */
#define ksym_exists(sym) (!!(sym))

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/*
 * A global function (a non-static one, kept out of line): the verifier
 * checks it once per program, on its own, for any values of its argument
 * types, and a call to it costs the caller one instruction. An inlined
 * helper is instead checked again at every call and for every state the
 * caller reaches it in, which is where most of a large program's
 * verification goes. Arguments are scalars, pointers to memory of their
 * type's size (which may be NULL unless __arg_nonnull says otherwise), or
 * trusted kernel pointers (__arg_trusted); the result is a scalar.
 */
#define __hl_global __attribute__((noinline))
#define __arg_trusted __attribute__((btf_decl_tag("arg:trusted")))
#define __arg_nonnull __attribute__((btf_decl_tag("arg:nonnull")))

/*
 * A task given to a global function: declared as this empty type and
 * passed with HL_TASK(p). The verifier finds the kernel type of an
 * __arg_trusted pointer by name, CO-RE's way ("___" and what follows do
 * not count), so the function gets a trusted task_struct all the same.
 * Declared as the kernel's struct task_struct, every program calling it
 * would carry the BTF of that struct and of all it points to (50 kB,
 * which cilium/ebpf marshals and the kernel checks once per program): a
 * fifth of the scheduler's load time in the 2-vCPU guest.
 */
struct task_struct___arg {};
#define HL_TASK(p) ((struct task_struct___arg *)(p))

/* BPF programs are small and hot; tell the compiler which branch to lay out
 * as the fall-through path. */
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#ifndef NULL
#define NULL ((void *)0)
#endif

/* ---- BTF map definitions ---------------------------------------------- */

/*
 * Maps are declared as anonymous structs in SEC(".maps") whose members carry
 * their settings in the *types* of the members, so that clang records them in
 * BTF and the loader can read them back without any C runtime:
 *
 *   struct {
 *           __uint(type, BPF_MAP_TYPE_HASH);
 *           __uint(max_entries, 1024);
 *           __type(key, u32);
 *           __type(value, u64);
 *   } counts SEC(".maps");
 *
 * __uint encodes a number as the length of an array type, __type names a
 * type through a pointer to it, and __array declares the inner map of a
 * map-in-map (or the programs of a prog array).
 */
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define __array(name, val) typeof(val) *name[]

/* ---- helpers ----------------------------------------------------------- */

/*
 * A helper call is a BPF "call imm" instruction whose immediate is the helper
 * number. Declaring each helper as a constant function pointer initialised
 * with its number makes clang emit exactly that instruction. The numbers come
 * from enum bpf_func_id in vmlinux.h, so they always match the kernel the
 * header was generated from (they are UAPI and never change).
 *
 * Prototypes follow the kernel's helper documentation (uapi/linux/bpf.h);
 * only helpers hotlane uses are listed.
 */

/* Maps. Lookup returns a pointer into the map value or NULL. */
static void *(* const bpf_map_lookup_elem)(void *map, const void *key) =
	(void *)BPF_FUNC_map_lookup_elem;
static long (* const bpf_map_update_elem)(void *map, const void *key,
					  const void *value, __u64 flags) =
	(void *)BPF_FUNC_map_update_elem;
static long (* const bpf_map_delete_elem)(void *map, const void *key) =
	(void *)BPF_FUNC_map_delete_elem;
/* Another CPU's value of a per-CPU map (5.19+). */
static void *(* const bpf_map_lookup_percpu_elem)(void *map, const void *key, __u32 cpu) =
	(void *)BPF_FUNC_map_lookup_percpu_elem;

/* Time and identity. pid_tgid is tgid << 32 | pid (the thread id). */
static __u64 (* const bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
static __u64 (* const bpf_get_current_pid_tgid)(void) =
	(void *)BPF_FUNC_get_current_pid_tgid;
static long (* const bpf_get_current_comm)(void *buf, __u32 size) =
	(void *)BPF_FUNC_get_current_comm;
static __u32 (* const bpf_get_smp_processor_id)(void) =
	(void *)BPF_FUNC_get_smp_processor_id;
/* A pseudo-random number, for choices spread over CPUs. */
static __u32 (* const bpf_get_prandom_u32)(void) = (void *)BPF_FUNC_get_prandom_u32;
/* The current task as a BTF pointer: fields can be read directly. */
static struct task_struct *(* const bpf_get_current_task_btf)(void) =
	(void *)BPF_FUNC_get_current_task_btf;

/* Reads kernel memory through a pointer the verifier cannot check. */
static long (* const bpf_probe_read_kernel)(void *dst, __u32 size,
					    const void *unsafe_ptr) =
	(void *)BPF_FUNC_probe_read_kernel;

/* Copies a NUL-terminated kernel string (at most size bytes, always
 * terminated); returns its length including the NUL, or a negative error. */
static long (* const bpf_probe_read_kernel_str)(void *dst, __u32 size,
						const void *unsafe_ptr) =
	(void *)BPF_FUNC_probe_read_kernel_str;

/*
 * Ring buffer (BPF_MAP_TYPE_RINGBUF). reserve/submit avoids a copy; every
 * reserved record must be submitted or discarded on all paths, which the
 * verifier checks.
 */
static void *(* const bpf_ringbuf_reserve)(void *ringbuf, __u64 size,
					   __u64 flags) =
	(void *)BPF_FUNC_ringbuf_reserve;
static void (* const bpf_ringbuf_submit)(void *data, __u64 flags) =
	(void *)BPF_FUNC_ringbuf_submit;
static void (* const bpf_ringbuf_discard)(void *data, __u64 flags) =
	(void *)BPF_FUNC_ringbuf_discard;
static long (* const bpf_ringbuf_output)(void *ringbuf, void *data,
					 __u64 size, __u64 flags) =
	(void *)BPF_FUNC_ringbuf_output;

/*
 * Task-local storage (BPF_MAP_TYPE_TASK_STORAGE, needs BPF_F_NO_PREALLOC).
 * The kernel frees a task's entry when the task dies, so per-task state can
 * never go stale through pid reuse. Pass
 * BPF_LOCAL_STORAGE_GET_F_CREATE to create the entry from value (or zeroes).
 */
static void *(* const bpf_task_storage_get)(void *map, struct task_struct *task,
					    void *value, __u64 flags) =
	(void *)BPF_FUNC_task_storage_get;
static long (* const bpf_task_storage_delete)(void *map,
					      struct task_struct *task) =
	(void *)BPF_FUNC_task_storage_delete;

/*
 * Timers in map values (struct bpf_timer): initialised once with the map
 * and a clock, given a callback (map, key, value), then started for nsecs
 * from now.
 */
static long (* const bpf_timer_init)(struct bpf_timer *timer, void *map, __u64 flags) =
	(void *)BPF_FUNC_timer_init;
static long (* const bpf_timer_set_callback)(struct bpf_timer *timer, void *callback_fn) =
	(void *)BPF_FUNC_timer_set_callback;
static long (* const bpf_timer_start)(struct bpf_timer *timer, __u64 nsecs, __u64 flags) =
	(void *)BPF_FUNC_timer_start;

/* Debug output to /sys/kernel/tracing/trace_pipe; at most three arguments. */
static long (* const bpf_trace_printk)(const char *fmt, __u32 fmt_size, ...) =
	(void *)BPF_FUNC_trace_printk;

/*
 * bpf_trace_printk wants the format in read-only memory and its size; a
 * static const array gives both. Debugging only: never leave it in shipped
 * code, the kernel warns loudly when a program uses it.
 */
#define trace_printk(fmt, ...)                                             \
	({                                                                 \
		static const char __hl_fmt[] = fmt;                        \
		bpf_trace_printk(__hl_fmt, sizeof(__hl_fmt), ##__VA_ARGS__); \
	})

/* ---- loops whose bound is only known at load --------------------------- */

/*
 * for_each_num(i, start, end) runs i from start to end - 1 on the kernel's
 * numbers iterator (6.4+). The verifier checks the body for any i in range
 * until its states repeat, instead of once per value as it does for a loop
 * bounded by a load-time constant (nr_cpus, the rule count): a loop over
 * CPUs then costs the same to verify on 2 CPUs as on 512. The verifier
 * does not know i's range: index arrays only after a bounds check.
 */
int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

#define for_each_num(i, start, end)                                            \
	for (struct bpf_iter_num ___it                                         \
		     __attribute__((cleanup(bpf_iter_num_destroy))),           \
	     *___started __attribute__((unused)) =                             \
		     (bpf_iter_num_new(&___it, (start), (end)), &___it);       \
	     ({                                                                \
		     int *___n = bpf_iter_num_next(&___it);                    \
		     ___n ? ((i) = *___n, 1) : 0;                              \
	     });)

/* ---- CO-RE reads -------------------------------------------------------- */

/*
 * Where the verifier does not know a pointer's type (raw_tp arguments,
 * kprobes, pointers read out of other structs), kernel memory must be read
 * with bpf_probe_read_kernel. Wrapping the address in
 * __builtin_preserve_access_index makes clang record a CO-RE relocation, so
 * the loader rewrites the field offset for the kernel it loads on: the same
 * object works whatever the layout of struct task_struct there.
 *
 * Types from vmlinux.h already carry preserve_access_index, but our own
 * struct definitions do not; the explicit builtin covers both.
 *
 *   CORE_READ_INTO(&pid, &task->pid);   returns 0 or a negative errno
 *   pid_t pid = CORE_READ(task, pid);   zero if the read failed
 *
 * One level only: CORE_READ(CORE_READ(task, mm), flags) for chains.
 */
#define CORE_READ_INTO(dst, src)                                           \
	bpf_probe_read_kernel((dst), sizeof(*(dst)),                       \
			      __builtin_preserve_access_index(src))

#define CORE_READ(ptr, field)                                              \
	({                                                                 \
		typeof((ptr)->field) __hl_val;                             \
		__builtin_memset(&__hl_val, 0, sizeof(__hl_val));          \
		CORE_READ_INTO(&__hl_val, &(ptr)->field);                  \
		__hl_val;                                                  \
	})

#endif /* HOTLANE_BPF_H */
