/*
 * family.bpf.h - one body for a tp_btf program and its raw_tp twin.
 *
 * The tracers hook each event twice: tp_btf, whose arguments are typed
 * (trusted BTF pointers that plain loads read), and raw_tp, the fallback,
 * whose arguments are plain numbers that only bpf_probe_read_kernel()
 * reads through. A body shared by both takes a `const bool trusted`
 * argument, a constant at each entry point; with it inlined, the compiler
 * keeps only the read that applies to each program.
 *
 * Include it after vmlinux.h and hotlane_bpf.h; it includes nothing itself.
 */
#ifndef HOTLANE_FAMILY_BPF_H
#define HOTLANE_FAMILY_BPF_H

/* ptr->field, as the pointer allows: a plain load through a trusted
 * pointer, which the verifier turns into a guarded memory read, CORE_READ
 * through any other. */
#define READ_FIELD(trusted, ptr, field) ((trusted) ? (ptr)->field : CORE_READ(ptr, field))

#endif /* HOTLANE_FAMILY_BPF_H */
