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
// Outside programs (cyclictest, stress-ng, hackbench, and the judges perf
// bench, sysbench and rt-app) run as child processes for the same time.
// The lane is the periodic tasks, cyclictest's measuring threads and the
// decode servers' stream threads; Lane is applied to those threads only.
type Mix struct {
	Periodic       []Periodic      `json:"periodic,omitempty"`
	Hogs           []Hogs          `json:"hogs,omitempty"`
	Messaging      []Messaging     `json:"messaging,omitempty"`
	Cyclictest     []Cyclictest    `json:"cyclictest,omitempty"`
	StressNg       []StressNg      `json:"stress_ng,omitempty"`
	Hackbench      []Hackbench     `json:"hackbench,omitempty"`
	PerfBench      []PerfBench     `json:"perf_bench,omitempty"`
	Sysbench       []Sysbench      `json:"sysbench,omitempty"`
	RtApp          []RtApp         `json:"rt_app,omitempty"`
	RequestServers []RequestServer `json:"request_server,omitempty"`
	Decode         []Decode        `json:"decode,omitempty"`
	Lane           LanePolicy      `json:"-"`
}

// MixResult holds each generator's result, in the order of the Mix.
type MixResult struct {
	Periodic   []PeriodicResult
	HogWork    []uint64
	RoundTrips []uint64
	Cyclictest []CyclictestResult
	StressOps  []uint64
	// Judgements are the judges': each perf bench, each sysbench, each
	// rt-app's periodic tasks and chain, each stress-ng's waking
	// stressors, in that order (Mix.Judges).
	Judgements     []Judgement
	RequestServers []RequestServerResult
	Decode         []DecodeResult
	// Ran is how long the generators ran: until this process saw ctx
	// done, which on a starved machine (a guest whose timers fire late)
	// can be well after ctx's deadline. Stopping them is not included.
	Ran time.Duration
}

// HasLane reports whether the mix has a lane task to measure: a periodic
// task, cyclictest or a decode server.
func (m Mix) HasLane() bool { return len(m.Periodic)+len(m.Cyclictest)+len(m.Decode) > 0 }

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
	for _, s := range m.RequestServers {
		n += s.threads()
	}
	for _, d := range m.Decode {
		n += d.threads()
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

// Judges is the number of judgements a run of the mix gives.
func (m Mix) Judges() int {
	n := len(m.PerfBench) + len(m.Sysbench)
	for _, r := range m.RtApp {
		n += min(r.Periodic, 1) + min(r.Chain, 1)
	}
	for _, s := range m.StressNg {
		n += len(s.wakers())
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
	for _, d := range m.Decode {
		comms = append(comms, d.Comm)
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
	for _, d := range r.Decode {
		tids = append(tids, d.TIDs...)
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
	for _, s := range r.Decode {
		d += s.CPU
	}
	return d
}

// Calibrate measures, once, what the mix's generators need measured
// before they run (rt-app's ns per loop), so that every later run does
// the same work.
func (m *Mix) Calibrate(ctx context.Context) error {
	for i := range m.RtApp {
		if err := m.RtApp[i].Calibrate(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Run runs all generators until ctx is done.
func (m Mix) Run(ctx context.Context) (MixResult, error) {
	prev := runtime.GOMAXPROCS(runtime.NumCPU() + m.ownThreads())
	defer runtime.GOMAXPROCS(prev)

	res := MixResult{
		Periodic:       make([]PeriodicResult, len(m.Periodic)),
		HogWork:        make([]uint64, len(m.Hogs)),
		RoundTrips:     make([]uint64, len(m.Messaging)),
		Cyclictest:     make([]CyclictestResult, len(m.Cyclictest)),
		StressOps:      make([]uint64, len(m.StressNg)),
		RequestServers: make([]RequestServerResult, len(m.RequestServers)),
		Decode:         make([]DecodeResult, len(m.Decode)),
	}
	var (
		perf    = make([]Judgement, len(m.PerfBench))
		sysb    = make([]Judgement, len(m.Sysbench))
		rtapp   = make([][]Judgement, len(m.RtApp))
		stress  = make([]StressNgResult, len(m.StressNg))
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		started = time.Now()
		ran     = make(chan time.Duration, 1)
	)
	spawn := func(run func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	go func() {
		<-ctx.Done()
		ran <- time.Since(started)
	}()
	for i, p := range m.Periodic {
		p.Lane = m.Lane
		spawn(func() (err error) { res.Periodic[i], err = p.Run(ctx); return })
	}
	for i, c := range m.Cyclictest {
		spawn(func() (err error) { res.Cyclictest[i], err = c.Run(ctx, m.Lane); return })
	}
	for i, s := range m.StressNg {
		spawn(func() (err error) { stress[i], err = s.Run(ctx); return })
	}
	for _, h := range m.Hackbench {
		spawn(func() error { return h.Run(ctx) })
	}
	for i, h := range m.Hogs {
		spawn(func() (err error) { res.HogWork[i], err = h.Run(ctx); return })
	}
	for i, g := range m.Messaging {
		spawn(func() (err error) { res.RoundTrips[i], err = g.Run(ctx); return })
	}
	for i, p := range m.PerfBench {
		spawn(func() (err error) { perf[i], err = p.Run(ctx); return })
	}
	for i, s := range m.Sysbench {
		spawn(func() (err error) { sysb[i], err = s.Run(ctx); return })
	}
	for i, r := range m.RtApp {
		spawn(func() (err error) { rtapp[i], err = r.Run(ctx); return })
	}
	for i, s := range m.RequestServers {
		spawn(func() (err error) { res.RequestServers[i], err = s.Run(ctx); return })
	}
	for i, d := range m.Decode {
		d.Lane = m.Lane
		spawn(func() (err error) { res.Decode[i], err = d.Run(ctx); return })
	}
	wg.Wait()
	res.Ran = <-ran
	res.Judgements = append(append(res.Judgements, perf...), sysb...)
	for _, js := range rtapp {
		res.Judgements = append(res.Judgements, js...)
	}
	for i, s := range stress {
		res.StressOps[i] = s.CPUOps
		res.Judgements = append(res.Judgements, s.Judgements...)
	}
	if len(errs) > 0 {
		return res, errs[0]
	}
	return res, nil
}
