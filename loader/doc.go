// Package loader probes what the running kernel supports (BTF, sched_ext,
// the scx kfunc generation, which hook types load) and loads and attaches
// hotlane's BPF collections, turning verifier and kernel errors into
// messages that say what is missing and what to do.
package loader
