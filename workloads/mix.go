package workloads

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Mix runs several generators at once in this process.
//
// Every generator thread is locked to its own OS thread and, while it runs
// Go code, holds one of the Go runtime's processors (GOMAXPROCS). With
// fewer processors than threads a woken periodic thread would wait for the
// Go scheduler, not the kernel's, and the lateness it records would be Go's
// doing. Mix raises GOMAXPROCS to cover every thread for the run, so what
// is measured is the kernel scheduler.
//
// Outside programs (cyclictest, stress-ng, hackbench) run as child
// processes for the same time. The lane is the periodic tasks and
// cyclictest's measuring threads; Lane is applied to those threads only.
type Mix struct {
	Periodic   []Periodic   `json:"periodic,omitempty"`
	Hogs       []Hogs       `json:"hogs,omitempty"`
	Messaging  []Messaging  `json:"messaging,omitempty"`
	Cyclictest []Cyclictest `json:"cyclictest,omitempty"`
	StressNg   []StressNg   `json:"stress_ng,omitempty"`
	Hackbench  []Hackbench  `json:"hackbench,omitempty"`
	Lane       LanePolicy   `json:"-"`
}

// MixResult holds each generator's result, in the order of the Mix.
type MixResult struct {
	Periodic   []PeriodicResult
	HogWork    []uint64
	RoundTrips []uint64
	Cyclictest []CyclictestResult
	StressOps  []uint64
	// Ran is how long the generators ran: until this process saw ctx
	// done, which on a starved machine (a guest whose timers fire late)
	// can be well after ctx's deadline. Stopping them is not included.
	Ran time.Duration
}

// HasLane reports whether the mix has a lane task to measure.
func (m Mix) HasLane() bool { return len(m.Periodic)+len(m.Cyclictest) > 0 }

// ownThreads are the threads the mix runs in this process.
func (m Mix) ownThreads() int {
	n := 0
	for _, p := range m.Periodic {
		n += max(p.Threads, 1)
	}
	for _, h := range m.Hogs {
		n += h.Threads
	}
	for _, g := range m.Messaging {
		n += 2 * g.Pairs
	}
	return n
}

// Tasks are the threads and processes the mix starts in all: its own
// threads and those of the outside programs (cyclictest's measuring
// threads, stress-ng's workers, hackbench's senders and receivers).
func (m Mix) Tasks() int {
	n := m.ownThreads()
	for _, c := range m.Cyclictest {
		n += c.Threads
	}
	for _, s := range m.StressNg {
		n += s.CPU
	}
	for _, h := range m.Hackbench {
		n += 2 * h.Groups * h.Fds
	}
	return n
}

// CheckTasks refuses a mix that would start more than MaxTasks threads and
// processes in all.
func (m Mix) CheckTasks() error {
	if n := m.Tasks(); n > MaxTasks {
		return fmt.Errorf("the generators start %d threads and processes in all; at most %d", n, MaxTasks)
	}
	return nil
}

// LaneComms are the comms of the lane's threads, what a policy matches.
func (m Mix) LaneComms() []string {
	var comms []string
	for _, p := range m.Periodic {
		comms = append(comms, p.Comm)
	}
	if len(m.Cyclictest) > 0 {
		comms = append(comms, CyclictestComm)
	}
	return comms
}

// LaneTIDs are the thread ids of the lane's threads in this run.
func (r MixResult) LaneTIDs() []int {
	var tids []int
	for _, p := range r.Periodic {
		tids = append(tids, p.TIDs...)
	}
	for _, c := range r.Cyclictest {
		tids = append(tids, c.TIDs...)
	}
	return tids
}

// LaneCPU is the CPU time the lane's threads used in this run.
func (r MixResult) LaneCPU() time.Duration {
	var d time.Duration
	for _, p := range r.Periodic {
		d += p.CPU
	}
	for _, c := range r.Cyclictest {
		d += c.CPU
	}
	return d
}

// Run runs all generators until ctx is done.
func (m Mix) Run(ctx context.Context) (MixResult, error) {
	prev := runtime.GOMAXPROCS(runtime.NumCPU() + m.ownThreads())
	defer runtime.GOMAXPROCS(prev)

	res := MixResult{
		Periodic:   make([]PeriodicResult, len(m.Periodic)),
		HogWork:    make([]uint64, len(m.Hogs)),
		RoundTrips: make([]uint64, len(m.Messaging)),
		Cyclictest: make([]CyclictestResult, len(m.Cyclictest)),
		StressOps:  make([]uint64, len(m.StressNg)),
	}
	errs := make([]error, len(m.Periodic)+len(m.Hogs)+len(m.Messaging)+len(m.Cyclictest)+len(m.StressNg)+len(m.Hackbench))
	var wg sync.WaitGroup
	start := time.Now()
	ran := make(chan time.Duration, 1)
	go func() {
		<-ctx.Done()
		ran <- time.Since(start)
	}()
	for i, p := range m.Periodic {
		wg.Add(1)
		p.Lane = m.Lane
		go func() {
			defer wg.Done()
			res.Periodic[i], errs[i] = p.Run(ctx)
		}()
	}
	ctOff := len(m.Periodic) + len(m.Hogs) + len(m.Messaging)
	for i, c := range m.Cyclictest {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.Cyclictest[i], errs[ctOff+i] = c.Run(ctx, m.Lane)
		}()
	}
	snOff := ctOff + len(m.Cyclictest)
	for i, s := range m.StressNg {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.StressOps[i], errs[snOff+i] = s.Run(ctx)
		}()
	}
	hbOff := snOff + len(m.StressNg)
	for i, h := range m.Hackbench {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[hbOff+i] = h.Run(ctx)
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
	res.Ran = <-ran
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	return res, nil
}
