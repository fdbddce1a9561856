package workloads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/verify"
)

// Bench runs the same workload under each variant, in one boot.
type Bench struct {
	Variants []Variant
	Workload Mix
	Warmup   time.Duration
	Duration time.Duration
	// Repeats runs the whole list this many times, reversing the order
	// every other round so no variant always goes first. A variant that
	// failed is not tried again.
	Repeats int
	// Policy is hotlane's policy, and the tracer's classes for all.
	Policy *policy.Policy
	// EnableTimeout bounds how long a sched_ext scheduler program may
	// take to enable sched_ext; 0 means DefaultEnableTimeout.
	EnableTimeout time.Duration
	// Progress receives a line per run.
	Progress io.Writer
	// Bounds, if set, have the tracer explain the waits over them, and
	// each Run keep its worst in Violations, for a trace.
	Bounds []verify.Bound
}

// DefaultEnableTimeout is how long a scheduler program may take to enable.
const DefaultEnableTimeout = 30 * time.Second

// Run is one variant's share of the bench: all its repeats merged.
type Run struct {
	Scheduler string  `json:"scheduler"`
	Variant   Variant `json:"variant"`
	// Periodic is the application's own view: per periodic generator,
	// wake-up lateness of all repeats.
	Periodic []PeriodicResult `json:"periodic"`
	// Cyclictest is the outside tool's view, per cyclictest generator.
	Cyclictest []CyclictestResult `json:"cyclictest,omitempty"`
	// Lane is the kernel's view of the lane: the tracer's run-queue
	// latency of the lane's threads (periodic tasks and cyclictest's
	// measuring threads), all repeats merged.
	Lane *verify.Histogram `json:"lane_tracer"`
	// LaneFelt is the same threads' waits as they felt them: a wait a
	// timer's expiry began is measured from the expiry.
	LaneFelt *verify.Histogram `json:"lane_felt"`
	// LaneOf is part of Lane: the waits of the threads behind one task
	// view (ViewApp: the periodic tasks, ViewOutside: cyclictest's
	// measuring threads), which that view can be checked against.
	LaneOf map[string]*verify.Histogram `json:"lane_tracer_by_view,omitempty"`
	// Classes is the tracer's run-queue latency per policy class.
	Classes []verify.ClassLatency `json:"classes"`
	// Fair is the tracer's run-queue latency of every task outside the
	// policy's high-priority classes: everyone but the lane.
	Fair *verify.Histogram `json:"fair_tracer"`
	// Judgements are the outside judges' own figures (perf bench,
	// sysbench, rt-app, stress-ng's waking stressors), in the order of
	// Mix.Judges; RequestServers each request server's.
	Judgements     []Judgement           `json:"judgements,omitempty"`
	RequestServers []RequestServerResult `json:"request_servers,omitempty"`
	// Decode is each decode server's own figures, all repeats merged.
	Decode []DecodeResult `json:"decode,omitempty"`
	// TracerLosses counts what the tracer could not record.
	TracerLosses uint64 `json:"tracer_losses"`
	HogWork      uint64 `json:"hog_work"`           // total hog loops over all repeats
	StressOps    uint64 `json:"stress_ng_bogo_ops"` // total stress-ng bogo ops
	// LaneCPU is the CPU time the lane's threads used.
	LaneCPU  time.Duration `json:"lane_cpu_ns"`
	Measured time.Duration `json:"measured_ns"` // total measured time over all repeats
	CPUs     int           `json:"cpus"`
	Rounds   int           `json:"rounds"`
	// Ops is the sched_ext scheduler the kernel reported running.
	Ops string `json:"ops,omitempty"`
	// Enable is, per round, how long the sched_ext scheduler took from
	// its start to sched_ext enabled (loading, verification, enabling).
	Enable []time.Duration `json:"enable_ns,omitempty"`
	// Failure is set when the variant could not start or ended before
	// the run did; its samples are then incomplete.
	Failure string `json:"failure,omitempty"`
	// Summary has the figures of the report; NewReport fills it.
	Summary *RunSummary `json:"summary,omitempty"`
	// Violations keeps the worst waits over Bench.Bounds, all repeats.
	Violations *verify.ViolationLog `json:"-"`
}

// BackgroundWork is the background's work: hog loops and stress-ng bogo
// ops (a workload normally has one kind), and the unit it is counted in.
func (r Run) BackgroundWork() (work uint64, unit string) {
	switch {
	case r.HogWork > 0 && r.StressOps > 0:
		return r.HogWork + r.StressOps, "hog loops + bogo ops"
	case r.StressOps > 0:
		return r.StressOps, "stress-ng bogo ops"
	}
	return r.HogWork, "hog loops"
}

// BackgroundRate is the background throughput: work per second.
func (r Run) BackgroundRate() float64 {
	if r.Measured <= 0 {
		return 0
	}
	w, _ := r.BackgroundWork()
	return float64(w) / r.Measured.Seconds()
}

// BackgroundPerFreeCPU is the background throughput per CPU-second the
// lane left: work / (CPUs x time - lane CPU time). A variant that starves
// the lane hands its CPU time to the background, which then does more work
// without being any faster; this figure does not reward that.
func (r Run) BackgroundPerFreeCPU() float64 {
	free := time.Duration(r.CPUs)*r.Measured - r.LaneCPU
	if free <= 0 {
		return 0
	}
	w, _ := r.BackgroundWork()
	return float64(w) / free.Seconds()
}

// LaneCPUShare is the fraction of the machine's CPU time the lane used.
func (r Run) LaneCPUShare() float64 {
	if r.Measured <= 0 || r.CPUs <= 0 {
		return 0
	}
	return r.LaneCPU.Seconds() / (float64(r.CPUs) * r.Measured.Seconds())
}

// roundOrder is the order the variants run in, in round r (from 0): the
// list rotated to start at its r-th variant, so that over n rounds each
// variant runs once in each place (two variants alternate). The place
// counts: when the list ran forwards, then backwards, the middle one of
// three always ran in the middle, and in 10 boots of 10 it had the
// better request server of the two hotlane builds, main's build beside
// itself included (docs/results.md, 2026-11-27).
func roundOrder(n, r int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = (r + i) % n
	}
	return order
}

// Run executes the bench and returns one Run per variant, in the order of
// b.Variants. When ctx ends first (a signal) it returns the whole rounds
// measured so far with an error that matches report.ErrInterrupted.
func (b Bench) Run(ctx context.Context) ([]Run, error) {
	if b.Duration <= 0 {
		return nil, errors.New("bench: duration must be positive")
	}
	if !b.Workload.HasLane() {
		return nil, errors.New("bench: the workload has no periodic task, no cyclictest and no decode server: nothing to measure")
	}
	table, err := b.Policy.Compile("")
	if err != nil {
		return nil, err
	}
	// Measured once, under the scheduler the bench starts from, so that
	// every variant's judges do the same work.
	b.Workload.RtApp = slices.Clone(b.Workload.RtApp)
	if len(b.Workload.RtApp) > 0 {
		b.progress("bench: calibrating rt-app (its ns per loop)\n")
	}
	if err := b.Workload.Calibrate(ctx); err != nil {
		return nil, err
	}
	runs := make([]Run, len(b.Variants))
	for i, v := range b.Variants {
		runs[i] = Run{
			Scheduler:      v.Name,
			Variant:        v,
			Periodic:       make([]PeriodicResult, len(b.Workload.Periodic)),
			Cyclictest:     make([]CyclictestResult, len(b.Workload.Cyclictest)),
			Lane:           &verify.Histogram{},
			LaneFelt:       &verify.Histogram{},
			LaneOf:         map[string]*verify.Histogram{ViewApp: {}, ViewOutside: {}},
			Fair:           &verify.Histogram{},
			Judgements:     make([]Judgement, b.Workload.Judges()),
			RequestServers: make([]RequestServerResult, len(b.Workload.RequestServers)),
			Decode:         make([]DecodeResult, len(b.Workload.Decode)),
			CPUs:           runtime.NumCPU(),
		}
		for _, class := range table.Names {
			runs[i].Classes = append(runs[i].Classes, verify.ClassLatency{Class: class,
				Hist: &verify.Histogram{}, Felt: &verify.Histogram{}, TimerDelivery: &verify.Histogram{}})
		}
	}
	repeats := max(b.Repeats, 1)
	for round := range repeats {
		for _, i := range roundOrder(len(b.Variants), round) {
			if ctx.Err() != nil {
				return runs, fmt.Errorf("before round %d/%d of %s: %w", round+1, repeats, b.Variants[i].Name, report.ErrInterrupted)
			}
			if runs[i].Failure != "" {
				continue
			}
			b.progress("bench: round %d/%d: %s for %s (+%s warm-up)\n", round+1, repeats, b.Variants[i].Name, b.Duration, b.Warmup)
			if err := b.runOne(ctx, table, &runs[i]); errors.Is(err, report.ErrInterrupted) {
				return runs, fmt.Errorf("round %d/%d of %s: %w", round+1, repeats, b.Variants[i].Name, err)
			} else if err != nil {
				runs[i].Failure = err.Error()
				b.progress("bench: %s: %v\n", b.Variants[i].Name, err)
			}
		}
	}
	return runs, nil
}

func (b Bench) progress(format string, args ...any) {
	if b.Progress != nil {
		fmt.Fprintf(b.Progress, format, args...)
	}
}

// runOne starts the variant, runs warm-up and measurement with the tracer
// attached, and stops it.
func (b Bench) runOne(ctx context.Context, table *policy.Table, r *Run) error {
	stop, alive, err := b.start(r.Variant, table, r)
	if err != nil {
		return err
	}
	defer stop()
	mix := b.Workload
	mix.Lane = r.Variant.Lane
	if b.Warmup > 0 {
		began := time.Now()
		wctx, cancel := context.WithTimeout(ctx, b.Warmup)
		_, err := mix.Run(wctx)
		cancel()
		b.progress("bench: %s: warm-up of %s took %s, starting and stopping the mix\n", r.Scheduler, b.Warmup, time.Since(began).Round(time.Millisecond))
		// A warm-up is for starting up: one whose outside programs had
		// not begun working by its end is what it is for.
		if errors.Is(err, ErrNoWork) {
			b.progress("bench: %s: warm-up: %v\n", r.Scheduler, err)
		} else if err != nil {
			return err
		}
	}
	cfg := verify.TracerConfig{Table: table, PerTask: true}
	verify.WatchBounds(&cfg, b.Bounds)
	began := time.Now()
	tr, err := verify.Attach(cfg)
	if err != nil {
		return err
	}
	b.progress("bench: %s: tracer attached in %s\n", r.Scheduler, time.Since(began).Round(time.Millisecond))
	if r.Violations == nil {
		r.Violations = &verify.ViolationLog{}
	}
	defer r.Violations.Follow(tr, cfg)()
	defer tr.Close()
	win := report.StartWindow(ctx, b.Duration)
	res, err := mix.Run(win.Context())
	win.Stop()
	// Outside programs that did no work are a failure of the variant,
	// but what everything else measured is kept for the report: it shows
	// what the variant left them.
	noWork := err
	if err != nil && !errors.Is(err, ErrNoWork) {
		return err
	}
	// A round cut short is left out: the figures are of whole rounds.
	if win.Interrupted() {
		return report.ErrInterrupted
	}
	if err := tr.Stop(); err != nil {
		return err
	}
	snap, err := tr.Snapshot()
	if err != nil {
		return err
	}
	if err := alive(); err != nil {
		return fmt.Errorf("%s ended during the run: %w", r.Scheduler, err)
	}
	// The generators ran until the bench saw the deadline; stopping them
	// (cyclictest writing its histogram, stress-ng its metrics) is not
	// measured time. A late deadline means a starved machine.
	if res.Ran > b.Duration+max(time.Second, b.Duration/10) {
		b.progress("bench: %s: the %s run saw its deadline %s late: this machine's timers fire late\n", r.Scheduler, b.Duration, (res.Ran - b.Duration).Round(time.Millisecond))
	}
	r.Measured += res.Ran
	r.Rounds++
	for i := range res.Periodic {
		r.Periodic[i].Merge(&res.Periodic[i])
	}
	for i := range res.Cyclictest {
		r.Cyclictest[i].Merge(&res.Cyclictest[i])
	}
	for i, c := range snap.Classes {
		r.Classes[i].Hist.Merge(c.Hist)
		r.Classes[i].Felt.Merge(c.Felt)
		r.Classes[i].TimerDelivery.Merge(c.TimerDelivery)
		if i < len(b.Policy.Classes) && !b.Policy.Classes[i].HighPriority {
			r.Fair.Merge(c.Hist)
		}
	}
	for i := range min(len(r.Judgements), len(res.Judgements)) {
		r.Judgements[i].Merge(&res.Judgements[i])
	}
	for i := range res.RequestServers {
		r.RequestServers[i].Merge(&res.RequestServers[i])
	}
	for i := range res.Decode {
		r.Decode[i].Merge(&res.Decode[i])
	}
	lane := res.LaneTIDs()
	var appTIDs, outsideTIDs []int
	for _, p := range res.Periodic {
		appTIDs = append(appTIDs, p.TIDs...)
	}
	for _, c := range res.Cyclictest {
		outsideTIDs = append(outsideTIDs, c.TIDs...)
	}
	for _, t := range snap.Tasks {
		if slices.Contains(lane, int(t.PID)) {
			r.Lane.Merge(t.Hist)
			r.LaneFelt.Merge(t.Felt)
		}
		if slices.Contains(appTIDs, int(t.PID)) {
			r.LaneOf[ViewApp].Merge(t.Hist)
		}
		if slices.Contains(outsideTIDs, int(t.PID)) {
			r.LaneOf[ViewOutside].Merge(t.Hist)
		}
	}
	r.TracerLosses += snap.Counters.Lost()
	var hog, stress uint64
	for _, w := range res.HogWork {
		hog += w
	}
	for _, w := range res.StressOps {
		stress += w
	}
	r.HogWork += hog
	r.StressOps += stress
	r.LaneCPU += res.LaneCPU()

	var app, outside uint64
	var missed int
	var appCPU, outsideCPU time.Duration
	for _, p := range res.Periodic {
		app += p.Lateness.Count()
		missed += p.Missed
		appCPU += p.CPU
	}
	for _, c := range res.Cyclictest {
		outside += c.Lateness.Count()
		outsideCPU += c.CPU
	}
	b.progress("bench: %s: lane samples: tracer %d, app %d (%d missed), cyclictest %d; lane CPU: app %s, cyclictest %s; background %d hog loops, %d bogo ops over %s\n",
		r.Scheduler, laneTracerCount(snap.Tasks, lane), app, missed, outside, appCPU.Round(time.Millisecond), outsideCPU.Round(time.Millisecond),
		hog, stress, res.Ran.Round(time.Millisecond))
	for _, d := range res.Decode {
		b.progress("bench: %s: decode %s: %d tokens (%.0f/s), %d requests\n", r.Scheduler, d.Comm, d.Total.Tokens, d.Total.TokensPerSecond(), d.Total.Requests)
	}
	if len(res.Judgements)+len(res.RequestServers) > 0 {
		var said []string
		for _, j := range res.Judgements {
			said = append(said, fmt.Sprintf("%s %d runs", j.Judge, j.Runs))
			for _, n := range j.Notes {
				said[len(said)-1] += " (" + n + ")"
			}
		}
		for _, s := range res.RequestServers {
			said = append(said, fmt.Sprintf("request server %d served, %d unfinished", s.Served, s.Unfinished))
		}
		b.progress("bench: %s: judges: %s\n", r.Scheduler, strings.Join(said, ", "))
	}
	return noWork
}

// RunUnloaded runs the workload's decode servers alone, with nothing else
// running (a warm-up, then b.Duration), under the scheduler the machine
// has now, for the decode figures' ratios to unloaded (Report.SetUnloaded).
// The bench calls it before the first round, when no variant's scheduler
// is loaded: the kernel's default scheduler. Without decode servers it
// does nothing.
func (b Bench) RunUnloaded(ctx context.Context) ([]DecodeResult, error) {
	if len(b.Workload.Decode) == 0 {
		return nil, nil
	}
	alone := Mix{Decode: b.Workload.Decode}
	if b.Warmup > 0 {
		b.progress("bench: decode servers alone, unloaded: %s (+%s warm-up)\n", b.Duration, b.Warmup)
		wctx, cancel := context.WithTimeout(ctx, b.Warmup)
		_, err := alone.Run(wctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("decode servers alone: %w", err)
		}
	}
	win := report.StartWindow(ctx, b.Duration)
	res, err := alone.Run(win.Context())
	win.Stop()
	switch {
	case win.Interrupted():
		return nil, report.ErrInterrupted
	case err != nil:
		return nil, fmt.Errorf("decode servers alone: %w", err)
	}
	for _, d := range res.Decode {
		b.progress("bench: unloaded: decode %s: %d tokens (%.0f/s), %d requests\n", d.Comm, d.Total.Tokens, d.Total.TokensPerSecond(), d.Total.Requests)
	}
	return res.Decode, nil
}

func laneTracerCount(tasks []verify.TaskLatency, lane []int) uint64 {
	var n uint64
	for _, t := range tasks {
		if slices.Contains(lane, int(t.PID)) {
			n += t.Hist.Count()
		}
	}
	return n
}

// start enables a variant's scheduler and returns how to stop it and how
// to check it is still the one running.
func (b Bench) start(v Variant, table *policy.Table, r *Run) (stop func(), alive func() error, err error) {
	status, err := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
	if err != nil {
		return nil, nil, err
	}
	if status.State != "" && status.State != "disabled" {
		return nil, nil, fmt.Errorf("sched_ext is %s (%s) before %s starts", status.State, status.Ops, v.Name)
	}
	started := time.Now()
	switch {
	case v.Hotlane:
		s, err := sched.Load(sched.Config{Table: table})
		if err != nil {
			return nil, nil, err
		}
		r.Ops = "hotlane"
		r.Enable = append(r.Enable, time.Since(started))
		return func() { s.Close() }, func() error {
			if info, exited, err := s.Exited(); err != nil || exited {
				return errors.Join(err, fmt.Errorf("%s", info))
			}
			return nil
		}, nil
	case len(v.Command) > 0:
		stop, alive, err := b.startProgram(v, r)
		if err == nil {
			r.Enable = append(r.Enable, time.Since(started))
		}
		return stop, alive, err
	}
	return func() {}, func() error {
		if s, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs); s.State != "" && s.State != "disabled" {
			return fmt.Errorf("a sched_ext scheduler (%s) appeared", s.Ops)
		}
		return nil
	}, nil
}

// startProgram starts a sched_ext scheduler program in its own process
// group and waits until the kernel reports sched_ext enabled (with v.Ops
// when set). It stops the program with SIGINT, then SIGKILL, and waits for
// sched_ext to be disabled again.
func (b Bench) startProgram(v Variant, r *Run) (stop func(), alive func() error, err error) {
	within := b.EnableTimeout
	if within <= 0 {
		within = DefaultEnableTimeout
	}
	p, out, err := startProcess("", 0, v.Command...)
	if err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", v.Command[0], err)
	}
	stop = func() {
		if err := p.stop(10 * time.Second); err != nil {
			b.progress("bench: %s %v\n", v.Name, err)
		}
		waitDisabled(10 * time.Second)
	}
	deadline := time.Now().Add(within)
	for {
		s, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
		if s.State == "enabled" && (v.Ops == "" || s.Ops == v.Ops) {
			r.Ops = s.Ops
			break
		}
		if p.exited() {
			stop()
			return nil, nil, fmt.Errorf("%s exited before sched_ext was enabled (%v): %s", strings.Join(v.Command, " "), p.err, out.last())
		}
		if time.Now().After(deadline) {
			stop()
			state := s.State
			if s.Ops != "" {
				state += " with " + s.Ops
			}
			return nil, nil, fmt.Errorf("sched_ext was not enabled within %s of starting %s (state: %s); stopped it: check that it is a sched_ext scheduler, or raise --enable-timeout",
				within, strings.Join(v.Command, " "), orDefault(state, "absent"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	ops := r.Ops
	alive = func() error {
		if p.exited() {
			return fmt.Errorf("%s exited (%v): %s", v.Command[0], p.err, out.last())
		}
		if s, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs); s.State != "enabled" || s.Ops != ops {
			return fmt.Errorf("sched_ext is %s running %q, not %s", s.State, s.Ops, ops)
		}
		return nil
	}
	return stop, alive, nil
}

func waitDisabled(within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if s, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs); s.State == "" || s.State == "disabled" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
