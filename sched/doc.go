// Package sched is the Go side of the hotlane sched_ext scheduler: policy
// configuration (task classes and their matchers), pushing it into BPF,
// live statistics and decoding the scheduler's exit information.
package sched
