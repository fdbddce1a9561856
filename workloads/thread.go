package workloads

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lockThread pins the calling goroutine to its OS thread for good and names
// the thread, so the kernel (and hotlane's classifier) sees it as comm.
// The thread is never handed back to the Go scheduler: it exits with the
// goroutine, and its name cannot leak to other goroutines.
func lockThread(comm string) error {
	runtime.LockOSThread()
	if comm == "" {
		return nil
	}
	if len(comm) > 15 {
		return fmt.Errorf("comm %q is longer than 15 bytes", comm)
	}
	name, err := unix.ByteSliceFromString(comm)
	if err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
}

// threadCPUTime is the CPU time the calling thread has consumed.
func threadCPUTime() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// monotonicNow reads CLOCK_MONOTONIC, the clock periodic tasks sleep on.
func monotonicNow() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// sleepUntil sleeps on CLOCK_MONOTONIC until the absolute time t, as
// cyclictest and rt-app do: the period does not drift with lateness.
func sleepUntil(t time.Duration) error {
	ts := unix.NsecToTimespec(int64(t))
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// spinCPU burns d of the thread's own CPU time: the same amount of work
// whatever the preemptions, which is what an inference step is. It
// returns the loop count so the compiler cannot drop the loop.
func spinCPU(d time.Duration) uint64 {
	var n uint64
	end := threadCPUTime() + d
	for threadCPUTime() < end {
		for i := 0; i < 1000; i++ {
			n++
		}
	}
	return n
}
