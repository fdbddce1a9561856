package workloads

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hotlane/hotlane/verify"
	"golang.org/x/sys/unix"
)

// Periodic is a latency-critical task in the style of an inference server
// step or cyclictest: every period it wakes at an absolute time, does a
// fixed amount of CPU work, and sleeps until the next period. It records
// its own wake-up lateness (actual wake time minus intended period start),
// an application-level cross-check of the kernel tracer.
type Periodic struct {
	Comm    string        // thread name (comm), what policies match on
	Period  time.Duration // e.g. 10ms for 100 Hz
	Compute time.Duration // CPU time burned per period
	Threads int           // independent threads, each with its own timer
	// BurstEvery makes every BurstEvery-th period compute BurstCompute
	// instead: a large frame among small ones. 0 disables bursts.
	BurstEvery   int
	BurstCompute time.Duration
	// Device, if set, is opened when each thread starts, and every period
	// begins with an ioctl on it, as a step that hands work to an
	// accelerator would: what a policy's device matchers see. The ioctl's
	// result is ignored (a memory device such as /dev/full refuses it).
	Device string
	// Lane is applied to each thread when it starts (a bench variant's
	// SCHED_FIFO, SCHED_DEADLINE or nice level).
	Lane LanePolicy `json:"-"`
}

// LaneTask is the task as the lane policy sees it: its period and its
// largest compute.
func (p Periodic) LaneTask() LaneTask {
	return LaneTask{Period: p.Period, Compute: max(p.Compute, p.BurstCompute)}
}

// PeriodicResult is what the threads recorded.
type PeriodicResult struct {
	// Lateness has one sample (in ns) per period that was run: how long
	// after its intended start the thread got the CPU back.
	Lateness verify.Histogram `json:"lateness"`
	// Missed counts periods skipped because the thread was still busy
	// (or waiting) when the next one was due; those are not in Lateness.
	Missed int `json:"missed"`
	// CPU is the CPU time the threads used.
	CPU time.Duration `json:"cpu_ns"`
	// TIDs are the threads' ids, for the tracer's view.
	TIDs []int `json:"-"`
}

// Run runs the threads until ctx is done.
func (p Periodic) Run(ctx context.Context) (PeriodicResult, error) {
	if err := p.validate(); err != nil {
		return PeriodicResult{}, err
	}
	threads := max(p.Threads, 1)
	results := make([]PeriodicResult, threads)
	errs := make([]error, threads)
	var wg sync.WaitGroup
	for i := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = p.thread(ctx)
		}()
	}
	wg.Wait()
	var all PeriodicResult
	for i := range results {
		if errs[i] != nil {
			return all, errs[i]
		}
		all.Merge(&results[i])
	}
	return all, nil
}

// Merge adds other's samples and misses to r.
func (r *PeriodicResult) Merge(other *PeriodicResult) {
	r.Lateness.Merge(&other.Lateness)
	r.Missed += other.Missed
	r.CPU += other.CPU
	r.TIDs = append(r.TIDs, other.TIDs...)
}

func (p Periodic) thread(ctx context.Context) (PeriodicResult, error) {
	var res PeriodicResult
	if err := lockThread(p.Comm); err != nil {
		return res, err
	}
	res.TIDs = []int{unix.Gettid()}
	if err := p.Lane.Apply(0, p.LaneTask()); err != nil {
		return res, fmt.Errorf("periodic task %q: %w", p.Comm, err)
	}
	dev := -1
	if p.Device != "" {
		fd, err := unix.Open(p.Device, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return res, fmt.Errorf("periodic task %q: open its device %s: %w", p.Comm, p.Device, err)
		}
		defer unix.Close(fd)
		dev = fd
	}
	clock := periodClock{next: monotonicNow() + p.Period, period: p.Period}
	for k := 1; ctx.Err() == nil; k++ {
		if err := sleepUntil(clock.next); err != nil {
			return res, err
		}
		res.Lateness.Record(uint64(clock.lateness(monotonicNow())))
		if dev >= 0 {
			unix.Syscall(unix.SYS_IOCTL, uintptr(dev), unix.TCGETS, 0)
		}
		spinCPU(p.computeFor(k))
		res.Missed += clock.finish(monotonicNow())
	}
	// The thread's CPU time, read on it before it returns (a deferred
	// write to res would come after the return value was copied).
	res.CPU = threadCPUTime()
	return res, nil
}

// computeFor is the CPU time of the k-th period (1-based).
func (p Periodic) computeFor(k int) time.Duration {
	if p.BurstEvery > 0 && k%p.BurstEvery == 0 {
		return p.BurstCompute
	}
	return p.Compute
}

// MinPeriod is the shortest period a periodic task may have: a shorter
// one would not sleep between periods but spin a CPU on its timer (and
// cyclictest's shortest interval is the same).
const MinPeriod = 100 * time.Microsecond

func (p Periodic) validate() error {
	switch {
	case p.Period < MinPeriod:
		return fmt.Errorf("periodic task %q: period %s is below the minimum %s", p.Comm, p.Period, MinPeriod)
	case p.Compute < 0 || p.Compute >= p.Period:
		return fmt.Errorf("periodic task %q: compute %s must be less than the period %s", p.Comm, p.Compute, p.Period)
	case p.BurstEvery < 0 || (p.BurstEvery > 0 && p.BurstCompute <= 0):
		return fmt.Errorf("periodic task %q: a burst needs burst_every > 0 and a positive burst_compute", p.Comm)
	}
	return nil
}

// periodClock is the schedule of a periodic thread: period k starts at
// start + k*period whatever happened before, like rt-app and cyclictest,
// so lateness never accumulates into drift.
type periodClock struct {
	next, period time.Duration
}

// lateness is how long after the current period's start the thread woke.
func (c *periodClock) lateness(woke time.Duration) time.Duration {
	return max(woke-c.next, 0)
}

// finish ends the current period's work at now and moves to the next
// period that has not started yet. Periods that started while the thread
// was still busy are skipped and counted as missed, not run late.
func (c *periodClock) finish(now time.Duration) (missed int) {
	c.next += c.period
	for c.next < now {
		c.next += c.period
		missed++
	}
	return missed
}
