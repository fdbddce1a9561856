package workloads

import (
	"context"
	"runtime"
	"sync"
)

// Mix runs several generators at once in this process.
//
// Every generator thread is locked to its own OS thread and, while it runs
// Go code, holds one of the Go runtime's processors (GOMAXPROCS). With
// fewer processors than threads a woken periodic thread would wait for the
// Go scheduler, not the kernel's, and the lateness it records would be Go's
// doing. Mix raises GOMAXPROCS to cover every thread for the run, so what
// is measured is the kernel scheduler.
type Mix struct {
	Periodic  []Periodic  `json:"periodic,omitempty"`
	Hogs      []Hogs      `json:"hogs,omitempty"`
	Messaging []Messaging `json:"messaging,omitempty"`
}

// MixResult holds each generator's result, in the order of the Mix.
type MixResult struct {
	Periodic   []PeriodicResult
	HogWork    []uint64
	RoundTrips []uint64
}

// Run runs all generators until ctx is done.
func (m Mix) Run(ctx context.Context) (MixResult, error) {
	threads := 0
	for _, p := range m.Periodic {
		threads += max(p.Threads, 1)
	}
	for _, h := range m.Hogs {
		threads += h.Threads
	}
	for _, g := range m.Messaging {
		threads += 2 * g.Pairs
	}
	prev := runtime.GOMAXPROCS(runtime.NumCPU() + threads)
	defer runtime.GOMAXPROCS(prev)

	res := MixResult{
		Periodic:   make([]PeriodicResult, len(m.Periodic)),
		HogWork:    make([]uint64, len(m.Hogs)),
		RoundTrips: make([]uint64, len(m.Messaging)),
	}
	errs := make([]error, len(m.Periodic)+len(m.Hogs)+len(m.Messaging))
	var wg sync.WaitGroup
	for i, p := range m.Periodic {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.Periodic[i], errs[i] = p.Run(ctx)
		}()
	}
	for i, h := range m.Hogs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.HogWork[i], errs[len(m.Periodic)+i] = h.Run(ctx)
		}()
	}
	for i, g := range m.Messaging {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.RoundTrips[i], errs[len(m.Periodic)+len(m.Hogs)+i] = g.Run(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	return res, nil
}
