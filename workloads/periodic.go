package workloads

import (
	"context"
	"fmt"
	"sync"
	"time"
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
}

// PeriodicResult is what the threads recorded.
type PeriodicResult struct {
	// Lateness has one sample per period that was run: how long after its
	// intended start the thread got the CPU back.
	Lateness []time.Duration
	// Missed counts periods skipped because the thread was still busy
	// (or waiting) when the next one was due; those are not in Lateness.
	Missed int
}

// Run runs the threads until ctx is done.
func (p Periodic) Run(ctx context.Context) (PeriodicResult, error) {
	if p.Period <= 0 || p.Compute < 0 || p.Compute >= p.Period {
		return PeriodicResult{}, fmt.Errorf("periodic task: compute %s must be less than period %s", p.Compute, p.Period)
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
	for i, r := range results {
		if errs[i] != nil {
			return all, errs[i]
		}
		all.Lateness = append(all.Lateness, r.Lateness...)
		all.Missed += r.Missed
	}
	return all, nil
}

func (p Periodic) thread(ctx context.Context) (PeriodicResult, error) {
	var res PeriodicResult
	if err := lockThread(p.Comm); err != nil {
		return res, err
	}
	next := monotonicNow() + p.Period
	for ctx.Err() == nil {
		if err := sleepUntil(next); err != nil {
			return res, err
		}
		woke := monotonicNow()
		res.Lateness = append(res.Lateness, woke-next)
		spinCPU(p.Compute)
		next += p.Period
		// Anchored to the schedule, like rt-app: a period that is
		// already over is skipped and counted, not run late.
		for now := monotonicNow(); next < now; next += p.Period {
			res.Missed++
		}
	}
	return res, nil
}
