package sched_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// A fair task pinned to a CPU, woken from another CPU, preempts the fair
// spinner running on its own when its deadline is earlier: only that CPU
// will ever run it (fair_victim). Left to the end of the spinner's slice
// (20 ms here) the wakee would wait half a slice at the median; preempted
// for, it waits for an IPI. The waker sleeps on CPU 0 and writes a pipe
// the wakee reads on CPU 1, beside a spinner pinned there. (The median
// was 0.8 ms, and 12.8 ms with fair_victim looking at the waker's CPU
// alone. The count of fair preemptions tells nothing here: the waker's
// own wake-ups preempt too.)
func TestGuestFairWakeupPreemptsPinnedCPU(t *testing.T) {
	vmtest.RequireGuest(t)
	const (
		run   = 6 * time.Second
		slice = 20 * time.Millisecond
	)
	p := policy.Default("infer")
	p.Classes[1].Slice = slice
	table, err := p.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	s := load(t, p, sched.Config{})
	finish := measure(t, s, table)

	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	defer moreProcs(3)()
	var wakeeTID, rounds atomic.Int64
	errs := make(chan error, 3)
	go func() {
		errs <- pinnedLoop(ctx, "fair-spinner", 1, func() {
			for end := threadCPUTime() + time.Millisecond; threadCPUTime() < end; {
			}
		})
	}()
	go func() {
		// Closing the write end when done ends the wakee's last read.
		defer unix.Close(fds[1])
		errs <- pinnedLoop(ctx, "fair-waker", 0, func() {
			ts := unix.NsecToTimespec((10 * time.Millisecond).Nanoseconds())
			unix.Nanosleep(&ts, nil)
			unix.Write(fds[1], []byte{1})
		})
	}()
	go func() {
		buf := make([]byte, 1)
		errs <- pinnedLoop(ctx, "fair-wakee", 1, func() {
			wakeeTID.CompareAndSwap(0, int64(unix.Gettid()))
			if n, _ := unix.Read(fds[0], buf); n != 1 {
				return // interrupted, or the waker is done
			}
			for end := threadCPUTime() + 200*time.Microsecond; threadCPUTime() < end; {
			}
			rounds.Add(1)
		})
	}()
	w, d := endLoops(t, s, finish, errs, 3, &wakeeTID)
	p50 := time.Duration(w.Hist.QuantileUpper(0.5))
	t.Logf("wakee: %d rounds, %d waits, p50 at most %v, p99 at most %v, max %v; fair preemptions %d",
		rounds.Load(), w.Hist.Count(), p50, time.Duration(w.Hist.QuantileUpper(0.99)), time.Duration(w.Hist.Max()), d.FairPreempts)
	if rounds.Load() == 0 || w.Hist.Count() == 0 {
		t.Fatal("the wakee never ran")
	}
	if p50 > slice/4 {
		t.Errorf("the wakee waited %v at the median, a quarter of the spinner's %v slice or more: it waited for the slice to end", p50, slice)
	}
}

// A fair task that a fair task wakes through a pipe (a synchronous
// wake-up: the waker is about to sleep) goes to the waker's CPU to run
// next when its deadline allows (fair_affine), as EEVDF's wake-affine
// does, instead of through its LLC's queue and a dispatch. Two threads
// pass a byte back and forth through two pipes beside a spinner per CPU,
// so that no CPU idles: the hand-overs go that way, and the pair keeps
// making progress.
func TestGuestFairSyncWakeupRunsOnWakersCPU(t *testing.T) {
	vmtest.RequireGuest(t)
	const run = 4 * time.Second
	s, finish := loadMeasured(t)

	var ab, ba [2]int
	for _, fds := range []*[2]int{&ab, &ba} {
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fds[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	spinners := runtime.NumCPU()
	defer moreProcs(spinners + 2)()
	var rounds atomic.Int64
	errs := make(chan error, spinners+2)
	for range spinners {
		go func() {
			errs <- threadLoop(ctx, "fair-spinner", nil, func() {
				for end := threadCPUTime() + time.Millisecond; threadCPUTime() < end; {
				}
			})
		}()
	}
	// Each side reads its byte and writes it on; closing its write end
	// when done ends the other's last read.
	pass := func(comm string, in, out int, first bool) {
		defer unix.Close(out)
		buf := []byte{1}
		if first {
			unix.Write(out, buf)
		}
		errs <- threadLoop(ctx, comm, nil, func() {
			if n, _ := unix.Read(in, buf); n != 1 {
				return // interrupted, or the other side is done
			}
			rounds.Add(1)
			unix.Write(out, buf)
		})
	}
	go pass("pingpong-a", ba[0], ab[1], true)
	go pass("pingpong-b", ab[0], ba[1], false)
	var none atomic.Int64
	_, d := endLoops(t, s, finish, errs, spinners+2, &none)
	t.Logf("%d hand-overs, %d wake-ups on the waker's CPU, %d fair preemptions", rounds.Load(), d.FairAffine, d.FairPreempts)
	if rounds.Load() == 0 {
		t.Fatal("the pair passed nothing")
	}
	if d.FairAffine == 0 {
		t.Errorf("no synchronous wake-up of the %d went to the waker's CPU", rounds.Load())
	}
}

// threadLoop runs fn on a thread named comm until ctx is done, after
// setup (nil: none) on that thread; the scheduler places it.
func threadLoop(ctx context.Context, comm string, setup func() error, fn func()) error {
	if err := lockThread(comm, 0); err != nil {
		return err
	}
	if setup != nil {
		if err := setup(); err != nil {
			return err
		}
	}
	for ctx.Err() == nil {
		fn()
	}
	return nil
}
