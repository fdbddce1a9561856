/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Force-included (clang -include) when the kernel's example schedulers are
 * built from linux-source-6.12 for a newer kernel whose own source Debian
 * does not ship (6.17 from trixie-backports). 6.13 renamed the dispatch
 * kfuncs and later kernels dropped the old names, so on 6.17 a 6.12 build
 * fails to load (libbpf: "extern (func ksym) 'scx_bpf_consume': not found
 * in kernel or module BTFs"). The new kfuncs take the same arguments in
 * the same order, so renaming the calls and the __ksym declarations
 * together is the whole port.
 */
#define scx_bpf_dispatch			scx_bpf_dsq_insert
#define scx_bpf_dispatch_vtime			scx_bpf_dsq_insert_vtime
#define scx_bpf_consume				scx_bpf_dsq_move_to_local
#define scx_bpf_dispatch_from_dsq_set_slice	scx_bpf_dsq_move_set_slice
#define scx_bpf_dispatch_from_dsq_set_vtime	scx_bpf_dsq_move_set_vtime
#define scx_bpf_dispatch_from_dsq		scx_bpf_dsq_move
#define scx_bpf_dispatch_vtime_from_dsq		scx_bpf_dsq_move_vtime
