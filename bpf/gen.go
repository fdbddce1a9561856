package bpf

// The BPF objects are built by bpf2go and committed with their Go bindings,
// so `go build` needs no clang. Regenerate with `go generate ./bpf/` (or
// `make generate`) after changing any .bpf.c file, include/ or vmlinux.h.
//
// Flags, and why:
//   - clang-19 / llvm-strip-19: the pinned toolchain (Debian bookworm), so
//     the committed objects are reproducible.
//   - -mcpu=v3: 32-bit jumps and ALU32, which sched_ext code needs; every
//     kernel hotlane supports (6.12+) accepts v3.
//   - -g: BTF is mandatory (CO-RE, globals, struct_ops). bpf2go's strip step
//     removes DWARF only; .BTF and .BTF.ext stay.
//   - -Wall -Werror: a warning in BPF code is usually a verifier failure later.
//   - -fms-extensions -Wno-microsoft-anon-tag: kernels built with
//     -fms-extensions (the 7.x VM kernel) embed tagged structs as unnamed
//     members, e.g. "struct ns_tree;" inside struct ns_common, and vmlinux.h
//     reproduces that. Without the extension clang reads such a line as an
//     empty forward declaration (only a warning) and drops the member,
//     shifting every field after it.
//   - -target amd64: hotlane targets x86-64 only; objects are little-endian.
//
//go:generate -command bpf2go go tool bpf2go -cc clang-19 -strip llvm-strip-19 -cflags "-O2 -g -Wall -Werror -mcpu=v3 -fms-extensions -Wno-microsoft-anon-tag -Iinclude" -target amd64
//go:generate bpf2go Hookcheck hookcheck.bpf.c
//
// The scheduler is compiled once per sched_ext kfunc generation; see
// include/scx_api.h for why, and loader.KfuncGeneration for the choice.
//go:generate bpf2go -no-global-types Sched612 sched.bpf.c -- -DHL_SCX_API=612
//go:generate bpf2go -no-global-types Sched613 sched.bpf.c -- -DHL_SCX_API=613
//go:generate bpf2go -no-global-types Sched700 sched.bpf.c -- -DHL_SCX_API=700
//go:generate bpf2go Histcheck histcheck.bpf.c
//
// The tracer's Go side decodes its maps and ring buffer with the types
// bpf2go generates from BTF (RunqlatViolation, RunqlatTaskHist, ...);
// -type names the nested ones so that they get names of their own.
//go:generate bpf2go -type violation -type explanation -type blamed -type task_view Runqlat runqlat.bpf.c
//go:generate bpf2go Xdp xdp.bpf.c
//go:generate bpf2go Dma dma.bpf.c
//go:generate bpf2go Ioctl ioctl.bpf.c
//go:generate bpf2go Hookbench hookbench.bpf.c
//go:generate bpf2go Progprof progprof.bpf.c
