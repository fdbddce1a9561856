package sched_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/topology"
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
		errs <- pinnedLoop(ctx, "fair-spinner", 1, func() { spinFor(time.Millisecond) })
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
			spinFor(200 * time.Microsecond)
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
	errs, threads, restore := busyMachine(ctx, 2)
	defer restore()
	var rounds atomic.Int64
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
	_, d := endLoops(t, s, finish, errs, threads, &none)
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

// A fair wake-up that finds no idle CPU, from a waker in another LLC
// whose task it would preempt, is queued in the waker's LLC and preempts
// there (fair_pull), as EEVDF's wake-affine pulls a wakee to its waker;
// else it would wait in its own LLC for a slice to end. A spinner per
// CPU keeps every CPU busy. The waker, pinned to LLC 0 at nice 10 (a
// later deadline than the wakee's), spins a millisecond and posts an
// eventfd (no synchronous wake-up); the wakee moves itself to LLC 1,
// allows every CPU again and reads. Some wake-ups go that way, and the
// pair keeps making progress.
func TestGuestCoreFairWakeupPulledToWakersLLC(t *testing.T) {
	vmtest.RequireBoot(t, "Core", "TestVMCore")
	topo, err := topology.Read(topology.SysfsRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.LLCs) < 2 {
		t.Skipf("needs two LLCs, the guest has %d", len(topo.LLCs))
	}
	wakerCPU, wakeeCPU := topo.LLCs[0][0], topo.LLCs[1][0]
	const run = 4 * time.Second
	s, finish := loadMeasured(t)

	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	post := func() {
		var one [8]byte
		one[0] = 1 // little-endian 1
		unix.Write(efd, one[:])
	}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	errs, threads, restore := busyMachine(ctx, 2)
	defer restore()
	var rounds atomic.Int64
	go func() {
		err := threadLoop(ctx, "pull-waker", func() error {
			if err := unix.Setpriority(unix.PRIO_PROCESS, 0, 10); err != nil {
				return err
			}
			return pinTo(wakerCPU)
		}, func() {
			spinFor(time.Millisecond)
			post()
		})
		post() // the wakee's last read
		errs <- err
	}()
	go func() {
		all := allCPUs()
		errs <- threadLoop(ctx, "pull-wakee", nil, func() {
			var buf [8]byte
			if pinTo(wakeeCPU) != nil || unix.SchedSetaffinity(0, &all) != nil {
				return
			}
			if n, _ := unix.Read(efd, buf[:]); n == 8 {
				rounds.Add(1)
			}
		})
	}()
	var none atomic.Int64
	_, d := endLoops(t, s, finish, errs, threads, &none)
	t.Logf("%d wake-ups read, %d pulled to the waker's LLC, %d fair preemptions, %d to an idle CPU", rounds.Load(), d.FairPulls, d.FairPreempts, d.IdleKicks)
	if rounds.Load() == 0 {
		t.Fatal("the wakee read nothing")
	}
	if d.FairPulls == 0 {
		t.Errorf("none of %d wake-ups from the other LLC was pulled to the waker's", rounds.Load())
	}
}

// busyMachine starts a fair spinner per CPU, placed by the scheduler,
// that runs until ctx is done, and makes room for extra threads of the
// test's own. Every thread, the test's too, sends its end on errs;
// threads is how many will.
func busyMachine(ctx context.Context, extra int) (errs chan error, threads int, restore func()) {
	n := runtime.NumCPU()
	errs = make(chan error, n+extra)
	restore = moreProcs(n + extra)
	for range n {
		go func() {
			errs <- threadLoop(ctx, "fair-spinner", nil, func() { spinFor(time.Millisecond) })
		}()
	}
	return errs, n + extra, restore
}

// pinTo confines the calling thread to cpu; it runs there on return.
func pinTo(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}

// allCPUs is the set of every CPU of the machine.
func allCPUs() unix.CPUSet {
	var set unix.CPUSet
	for c := range runtime.NumCPU() {
		set.Set(c)
	}
	return set
}

// A fair task's nice value changed from another CPU: the kernel stops and
// restarts the running task there (ops.stopping, then ops.running), run
// by the CPU that made the change, on the task's runqueue. Its time is
// charged to the CPU it runs on, not the caller's. Two nice-0 spinners
// share CPU 1; a SCHED_FIFO thread on CPU 0 (which runs no task of the
// scheduler's while it does this) moves one of them between nice 0 and 1
// every 10 ms. That one's share is within 20% of what its weights promise
// (about 0.9 of the other's): 0.99-1.01x, as under EEVDF. Charged from
// CPU 0's last start instead, it got 0.68x; charged right but started
// anew at each change, moving its queue's clock, 1.14-1.15x.
func TestGuestFairRemoteReniceChargesTheTasksCPU(t *testing.T) {
	vmtest.RequireGuest(t)
	const (
		run    = 6 * time.Second
		period = 10 * time.Millisecond
	)
	toggled := startSpinner(t, spinnerSpec{threads: 1, cpu: 1})
	steady := startSpinner(t, spinnerSpec{threads: 1, cpu: 1})
	tid := spinnerTID(t, toggled.Process.Pid)
	// Half the time at nice 1, half at nice 0: the toggled spinner's mean
	// share of the CPU, over the steady one's.
	w0, w1 := sched.NiceWeight(0), sched.NiceWeight(1)
	mean := (w1/(w1+w0) + 0.5) / 2
	sh := &share{what: "nice 0/1 changed from CPU 0 beside nice 0", light: toggled.Process.Pid, heavy: steady.Process.Pid, wLight: mean, wHeavy: 1 - mean}

	split := func(scheduler string) float64 {
		ctx, cancel := context.WithTimeout(context.Background(), run+time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // the thread exits with the goroutine: no RT thread left behind
			done <- func() error {
				if err := pinTo(0); err != nil {
					return err
				}
				if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0); err != nil {
					return fmt.Errorf("SCHED_FIFO: %w", err)
				}
				for nice := 1; ctx.Err() == nil; nice ^= 1 {
					if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil {
						return fmt.Errorf("setpriority(%d, %d): %w", tid, nice, err)
					}
					ts := unix.NsecToTimespec(period.Nanoseconds())
					unix.Nanosleep(&ts, nil)
				}
				return unix.Setpriority(unix.PRIO_PROCESS, tid, 0)
			}()
		}()
		time.Sleep(time.Second) // settled under this scheduler
		sh.start(t)
		time.Sleep(run - time.Second)
		got, want := sh.ratio(t)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s: CPU time ratio %.4f, weights promise %.4f (%.2fx); %s", scheduler, sh.what, got, want, got/want, sh.runs())
		return got / want
	}
	eevdf := split("EEVDF")
	load(t, policy.Default("infer"), sched.Config{Timeout: sched.DefaultTimeout})
	if off := split("hotlane"); off < 0.8 || off > 1.2 {
		t.Errorf("the spinner reniced from another CPU got %.2fx its weights' share, not within 0.8-1.2x (EEVDF %.2fx): its runs were charged to the wrong CPU", off, eevdf)
	}
}

// spinnerTID is the thread id of a one-thread spinner process's spinning
// thread.
func spinnerTID(t *testing.T, pid int) int {
	t.Helper()
	tasks := spinnerThreads(pid)
	if len(tasks) == 0 {
		t.Fatalf("process %d has no thread named %s", pid, spinnerComm)
	}
	tid, err := strconv.Atoi(filepath.Base(tasks[0]))
	if err != nil {
		t.Fatal(err)
	}
	return tid
}
