package workloads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/verify"
)

// Scheduler names the bench understands.
const (
	EEVDF       = "eevdf"        // the kernel's default: no sched_ext scheduler
	ScxSimple   = "scx_simple"   // upstream scx_simple, weighted vtime
	ScxSimpleF  = "scx_simple-f" // upstream scx_simple -f, global FIFO
	HotlaneName = "hotlane"
)

// ErrUnknownScheduler is returned for a scheduler name the bench lacks.
var ErrUnknownScheduler = errors.New("unknown scheduler")

// ParseSchedulers splits a comma-separated list and checks each name.
func ParseSchedulers(list string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "scx_simple -f" {
			name = ScxSimpleF
		}
		switch name {
		case EEVDF, ScxSimple, ScxSimpleF, HotlaneName:
			out = append(out, name)
		default:
			return nil, fmt.Errorf("%w %q: use a comma-separated list of %s, %s, %s, %s", ErrUnknownScheduler, name, EEVDF, ScxSimple, ScxSimpleF, HotlaneName)
		}
	}
	return out, nil
}

// Bench runs the same workload under each scheduler, in one boot.
type Bench struct {
	Schedulers []string
	Workload   Mix
	Warmup     time.Duration
	Duration   time.Duration
	// Repeats runs the whole list this many times, reversing the order
	// every other round so no scheduler always goes first.
	Repeats int
	// ScxSimplePath is the upstream scx_simple binary.
	ScxSimplePath string
	// Policy is hotlane's policy.
	Policy *policy.Policy
	// Progress receives a line per run.
	Progress io.Writer
}

// Run is one scheduler's share of the bench: all its repeats merged.
type Run struct {
	Scheduler string `json:"scheduler"`
	// Periodic is the application's own view: per periodic generator,
	// wake-up lateness of all repeats.
	Periodic []PeriodicResult `json:"periodic"`
	// Classes is the kernel's view: the tracer's run-queue latency per
	// policy class, all repeats merged.
	Classes []verify.ClassLatency `json:"classes"`
	// TracerLosses counts what the tracer could not record.
	TracerLosses uint64        `json:"tracer_losses"`
	HogWork      uint64        `json:"hog_work"`    // total hog loops over all repeats
	Measured     time.Duration `json:"measured_ns"` // total measured time over all repeats
	// Failure is set when the scheduler could not be loaded or ended
	// before the run did; its samples are then incomplete.
	Failure string `json:"failure,omitempty"`
}

// HogRate is the background throughput: hog loops per second.
func (r Run) HogRate() float64 {
	if r.Measured <= 0 {
		return 0
	}
	return float64(r.HogWork) / r.Measured.Seconds()
}

// Run executes the bench and returns one Run per scheduler, in the order
// of b.Schedulers.
func (b Bench) Run(ctx context.Context) ([]Run, error) {
	if b.Duration <= 0 {
		return nil, errors.New("bench: duration must be positive")
	}
	table, err := b.Policy.Compile("")
	if err != nil {
		return nil, err
	}
	runs := make([]Run, len(b.Schedulers))
	for i, name := range b.Schedulers {
		runs[i].Scheduler = name
		runs[i].Periodic = make([]PeriodicResult, len(b.Workload.Periodic))
		for _, class := range table.Names {
			runs[i].Classes = append(runs[i].Classes, verify.ClassLatency{Class: class, Hist: &verify.Histogram{}})
		}
	}
	repeats := max(b.Repeats, 1)
	for round := range repeats {
		order := make([]int, len(b.Schedulers))
		for i := range order {
			order[i] = i
			if round%2 == 1 {
				order[i] = len(order) - 1 - i
			}
		}
		for _, i := range order {
			if err := ctx.Err(); err != nil {
				return runs, err
			}
			if b.Progress != nil {
				fmt.Fprintf(b.Progress, "bench: round %d/%d: %s for %s (+%s warm-up)\n", round+1, repeats, b.Schedulers[i], b.Duration, b.Warmup)
			}
			if err := b.runOne(ctx, table, &runs[i]); err != nil {
				runs[i].Failure = err.Error()
				if b.Progress != nil {
					fmt.Fprintf(b.Progress, "bench: %s: %v\n", b.Schedulers[i], err)
				}
			}
		}
	}
	return runs, nil
}

// runOne loads the scheduler, runs warm-up and measurement with the tracer
// attached, and unloads it.
func (b Bench) runOne(ctx context.Context, table *policy.Table, r *Run) error {
	stop, alive, err := b.start(r.Scheduler, table)
	if err != nil {
		return err
	}
	defer stop()
	if b.Warmup > 0 {
		wctx, cancel := context.WithTimeout(ctx, b.Warmup)
		_, err := b.Workload.Run(wctx)
		cancel()
		if err != nil {
			return err
		}
	}
	tr, err := verify.Attach(verify.TracerConfig{Table: table})
	if err != nil {
		return err
	}
	defer tr.Close()
	mctx, cancel := context.WithTimeout(ctx, b.Duration)
	start := time.Now()
	res, err := b.Workload.Run(mctx)
	cancel()
	if err != nil {
		return err
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
	took := time.Since(start)
	r.Measured += took
	if b.Progress != nil && took > b.Duration+max(time.Second, b.Duration/10) {
		fmt.Fprintf(b.Progress, "bench: %s: the %s run took %s: the workload could not stop on time\n", r.Scheduler, b.Duration, took.Round(time.Millisecond))
	}
	var work uint64
	for _, w := range res.HogWork {
		work += w
	}
	if b.Progress != nil {
		var sampled uint64
		var missed int
		for _, p := range res.Periodic {
			sampled += p.Lateness.Count()
			missed += p.Missed
		}
		fmt.Fprintf(b.Progress, "bench: %s: %d periods sampled, %d missed, hogs %.1f Mloops/s over %s\n",
			r.Scheduler, sampled, missed, float64(work)/took.Seconds()/1e6, took.Round(time.Millisecond))
	}
	for i := range res.Periodic {
		r.Periodic[i].Merge(&res.Periodic[i])
	}
	for i, c := range snap.Classes {
		r.Classes[i].Hist.Merge(c.Hist)
	}
	r.TracerLosses += snap.Counters.StampFailures + snap.Counters.RingbufDrops
	r.HogWork += work
	return nil
}

// start enables a scheduler and returns how to stop it and how to check
// it is still the one running.
func (b Bench) start(name string, table *policy.Table) (stop func(), alive func() error, err error) {
	status, err := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
	if err != nil {
		return nil, nil, err
	}
	if status.State != "" && status.State != "disabled" {
		return nil, nil, fmt.Errorf("sched_ext is %s (%s) before %s starts", status.State, status.Ops, name)
	}
	switch name {
	case EEVDF:
		return func() {}, func() error {
			if s, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs); s.State != "" && s.State != "disabled" {
				return fmt.Errorf("a sched_ext scheduler (%s) appeared", s.Ops)
			}
			return nil
		}, nil
	case HotlaneName:
		s, err := sched.Load(sched.Config{Table: table})
		if err != nil {
			return nil, nil, err
		}
		return func() { s.Close() }, func() error {
			if info, exited, err := s.Exited(); err != nil || exited {
				return errors.Join(err, fmt.Errorf("%s", info))
			}
			return nil
		}, nil
	case ScxSimple, ScxSimpleF:
		var args []string
		if name == ScxSimpleF {
			args = []string{"-f"}
		}
		cmd := exec.Command(b.ScxSimplePath, args...)
		cmd.Stdout = io.Discard
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, nil, fmt.Errorf("start %s: %w", b.ScxSimplePath, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if err := waitOps("simple", exited, 30*time.Second); err != nil {
			cmd.Process.Kill()
			return nil, nil, err
		}
		stop := func() {
			cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
			waitDisabled(10 * time.Second)
		}
		alive := func() error {
			select {
			case err := <-exited:
				exited <- err
				return fmt.Errorf("scx_simple exited: %v", err)
			default:
			}
			if s, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs); s.Ops != "simple" {
				return fmt.Errorf("sched_ext runs %q, not simple", s.Ops)
			}
			return nil
		}
		return stop, alive, nil
	}
	return nil, nil, fmt.Errorf("%w %q", ErrUnknownScheduler, name)
}

func waitOps(ops string, exited <-chan error, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if s, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs); s.State == "enabled" && s.Ops == ops {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited before enabling: %v", ops, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not enable within %s", ops, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
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
