package loader

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// withoutPreemption runs fn on a thread that holds back SIGURG, the signal
// the Go runtime preempts a running goroutine with. The kernel's verifier
// gives up on a program when a signal is pending (EAGAIN), and cilium/ebpf
// then verifies it again from its start: it holds back only SIGPROF. A
// preemption aimed at the loading goroutine just before its BPF_PROG_LOAD
// arrives inside the verifier, so under the garbage collection a start
// causes, 3 of 19 programs of one start on the 2-vCPU guest were verified
// twice (strace: 150 ms of 1.1 s in BPF_PROG_LOAD thrown away). fn is
// still preempted where it calls a function; a signal held back meanwhile
// is delivered when fn returns.
func withoutPreemption[T any](fn func() (T, error)) (T, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var urg, old unix.Sigset_t
	sigaddset(&urg, unix.SIGURG)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &urg, &old); err != nil {
		return fn()
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return fn()
}

// sigaddset adds sig to set, as sigaddset(3) does.
func sigaddset(set *unix.Sigset_t, sig unix.Signal) {
	bit := uint(sig) - 1
	width := uint(unsafe.Sizeof(set.Val[0])) * 8
	if bit/width < uint(len(set.Val)) {
		set.Val[bit/width] |= 1 << (bit % width)
	}
}
