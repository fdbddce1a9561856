// Package bpf holds hotlane's BPF C programs, our own BPF headers, the
// vmlinux.h generated from the pinned sched_ext VM kernel's BTF, and the
// bpf2go-generated Go bindings with their compiled objects. The objects are
// committed, so building hotlane needs no clang; `make generate` rebuilds them.
package bpf
