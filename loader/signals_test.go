package loader

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func blocked(t *testing.T, sig unix.Signal) bool {
	t.Helper()
	var cur, want unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &cur); err != nil {
		t.Fatal(err)
	}
	sigaddset(&want, sig)
	for i := range want.Val {
		if want.Val[i] != 0 {
			return cur.Val[i]&want.Val[i] != 0
		}
	}
	return false
}

// The verifier runs with the Go runtime's preemption signal held back, and
// the thread's mask is as it was once the load returns.
func TestWithoutPreemptionHoldsBackSIGURG(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if blocked(t, unix.SIGURG) {
		t.Fatal("SIGURG is blocked before the test")
	}
	got, err := withoutPreemption(func() (bool, error) { return blocked(t, unix.SIGURG), nil })
	if err != nil {
		t.Fatal(err)
	}
	if !got {
		t.Error("SIGURG was not held back while the load ran")
	}
	if blocked(t, unix.SIGURG) {
		t.Error("SIGURG stayed blocked after the load")
	}
	if blocked(t, unix.SIGPROF) {
		t.Error("SIGPROF was blocked too")
	}
}
