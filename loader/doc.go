// Package loader probes what the running kernel supports (BTF, sched_ext,
// the scx kfunc generation, which hook types load) and loads and attaches
// hotlane's BPF collections, turning verifier and kernel errors into
// messages that say what is missing and what to do.
//
// Probe runs every check and returns Features, which `hotlane doctor`
// renders as text or JSON. The BTF-only pieces are pure functions over a
// *btf.Spec so they can be tested against any kernel's BTF:
// KfuncGenerationFromBTF and KfuncsFromBTF pick the scx kfunc names that
// exist unambiguously (6.12 scx_bpf_dispatch, 6.13 scx_bpf_dsq_insert, 6.19+
// scx_bpf_dsq_insert___v2), and ScxEnums / EnumValue read SCX_* enum values,
// which differ between kernels and must not be hard-coded.
//
// NewCollectionParallel loads a collection with its programs verified side
// by side, one goroutine per CPU, and its struct_ops maps created last from
// the kernel's BTF: the verifier is most of a scheduler's start, and
// cilium/ebpf's own loader runs it for one program after the other.
package loader
