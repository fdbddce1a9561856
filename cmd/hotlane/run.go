package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/sched"
)

const runUsage = `Usage: hotlane run [flags]

Registers the hotlane sched_ext scheduler and keeps it running until Ctrl-C
or SIGTERM. Tasks of high-priority classes ("inference") form the lane:
their queues are served before all others, and a lane task that finds no
idle CPU may preempt one running a lower class. The rest form the fair
class, scheduled by EEVDF's rules (lag, deadlines, weights) on queues per
last-level cache. If hotlane dies (even kill -9) the kernel returns every
task to its default scheduler.

On exit it prints why the scheduler ended (the kernel's exit kind, reason
and message) and exits non-zero if that was an error. With
--restart-on-error N an error exit loads the scheduler again, at most N
times, each said on stderr; the exit status is that of the last run.

Examples:
  hotlane run --inference-comm infer --inference-comm triton
  hotlane run --policy policy.json --stats-json stats.jsonl
  hotlane run --restart-on-error 3
  hotlane run --check-policy policy.json

Flags:
`

// runFlags are the flags of hotlane run.
type runFlags struct {
	policyPath, checkPolicy, listen, webConfig, statsJSON *string
	comms                                                 listFlag
	partial, quiet, cost                                  *bool
	interval, timeout, starvation                         *time.Duration
	debugError                                            *uint64
	restarts                                              *int
}

func newRunFlags(fs *flag.FlagSet) *runFlags {
	f := &runFlags{}
	f.policyPath = fs.String("policy", "", "policy file (JSON) defining the task classes; default: the built-in policy with --inference-comm")
	f.checkPolicy = fs.String("check-policy", "", "validate this policy file, print what the scheduler would do with each class and exit without loading anything")
	fs.Var(&f.comms, "inference-comm", "with the built-in policy: a comm prefix of inference tasks (repeatable)")
	f.partial = fs.Bool("partial", false, "schedule only tasks that chose SCHED_EXT (SCX_OPS_SWITCH_PARTIAL); others stay on the default scheduler")
	f.interval = durationFlag(fs, "stats-interval", time.Second, 100*time.Millisecond, 0, "how often to print a stats line")
	f.quiet = fs.Bool("q", false, "print no stats lines")
	f.listen = fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics (e.g. 127.0.0.1:9464): per class tasks enqueued and started, the policy's decisions, whether the scheduler is enabled and how earlier loads ended")
	f.webConfig = webConfigFlag(fs)
	f.statsJSON = fs.String("stats-json", "", "also write each stats interval as a JSON line to this file; it replaces an existing file once the scheduler is enabled (a run that fails to start leaves it as it was)")
	f.timeout = fs.Duration("timeout", sched.DefaultTimeout, "sched_ext watchdog: a task runnable this long without running ejects the scheduler (max 30s)")
	f.starvation = fs.Duration("starvation", sched.DefaultStarvation, "starvation guard: a CPU that gave the lane this much CPU time while normal tasks waited serves them for half this before the lane again; the startup line prints the resulting bound")
	f.debugError = fs.Uint64("debug-error-after", 0, "testing only: make the BPF code fail with scx_bpf_error after N enqueues")
	f.cost = fs.Bool("cost", false, "on exit, print each scheduler callback's runs and BPF run time (turns on the kernel's BPF run-time statistics: two clock reads per callback)")
	f.restarts = intFlag(fs, "restart-on-error", 0, 0, 100, "when the scheduler ends with an error exit (scx_bpf_error, watchdog stall), load it again, at most N times")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runUsage)
		printFlags(fs)
	}
	return f
}

// request is what the parsed flags of fs ask the scheduler for.
func (f *runFlags) request(fs *flag.FlagSet) sched.RunRequest {
	return sched.RunRequest{
		PolicyPath: *f.policyPath, InferenceComms: f.comms, CheckPolicy: *f.checkPolicy, Args: fs.Args(),
		Partial: *f.partial, Timeout: *f.timeout, Starvation: *f.starvation, DebugErrorAfter: *f.debugError,
		MeasureCost: *f.cost, StatsInterval: *f.interval, Restarts: *f.restarts, Progress: os.Stderr,
	}
}

func runRun(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f := newRunFlags(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	stats := &statsOutput{path: *f.statsJSON}
	code, err := schedRun(ctx, f.request(fs), f, stats)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
		code = exitError
	}
	// After the run's own error, if any: it is what went wrong first.
	if err := stats.close(); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
		code = exitError
	}
	return code
}

// schedRun checks req, runs the scheduler until ctx is done or it ends,
// and says how it ended; it returns the exit status.
func schedRun(ctx context.Context, req sched.RunRequest, f *runFlags, stats *statsOutput) (int, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	if req.CheckPolicy != "" {
		return checkPolicy(ctx, req)
	}
	p, table, err := req.Policy(ctx)
	if err != nil {
		return 0, err
	}
	// Created before loading, so that a bad path fails first.
	if err := stats.create(); err != nil {
		return 0, err
	}
	var text io.Writer = os.Stdout
	if *f.quiet {
		text = nil
	}
	cfg := req.Config(table)
	opts := req.Options(text, stats.writer())
	opts.Started = runStarted(req, p, sched.StarvationBound(cfg), stats)
	if req.MeasureCost {
		withCost(&opts)
	}
	if *f.listen != "" {
		srv, err := withMetrics(&opts, *f.listen, *f.webConfig, *f.quiet)
		if err != nil {
			return 0, err
		}
		defer srv.Close()
	}
	info, used, err := sched.RunWithRestarts(ctx, cfg, opts, req.Restarts, os.Stderr)
	if err != nil {
		return 0, req.RunError(err, used)
	}
	info.WriteReport(os.Stderr)
	if !info.IsError() {
		return exitOK, nil
	}
	if req.GaveUp(info, used) {
		fmt.Fprintf(os.Stderr, "hotlane: giving up after %d restarts\n", used)
	}
	return exitFail, nil
}

// checkPolicy says what the scheduler would do with each class of the
// policy req.CheckPolicy, without loading anything.
func checkPolicy(ctx context.Context, req sched.RunRequest) (int, error) {
	p, err := req.CheckedPolicy(ctx)
	if err != nil {
		return 0, err
	}
	fmt.Printf("%s: ok, %d classes:\n", req.CheckPolicy, len(p.Classes))
	printClasses(os.Stdout, "  ", p)
	return exitOK, nil
}

// runStarted is what the run says once the scheduler is enabled, each
// time it is: the stats file becomes visible, and the start-up lines say
// what was loaded and how it treats the classes of p.
func runStarted(req sched.RunRequest, p *policy.Policy, bound string, stats *statsOutput) func(*sched.Scheduler) {
	return func(s *sched.Scheduler) {
		stats.ran = true
		if err := stats.file.Publish(); err != nil {
			fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
		}
		fmt.Fprintf(os.Stderr, "hotlane: scheduler enabled (kfunc generation %s, %s mode); classes:\n", s.Object, req.Mode())
		printClasses(os.Stderr, "hotlane:   ", p)
		fmt.Fprintf(os.Stderr, "hotlane: starvation guard: %s\n", bound)
		fmt.Fprintf(os.Stderr, "hotlane: cpus: %s\n", s.Topology)
		fmt.Fprintf(os.Stderr, "hotlane: %s\n", s.Load)
		if root, err := policy.CgroupRoot(); err == nil {
			if note := sched.QuotaNote(sched.CPUQuotas(root), s.EnforcesCPUMax()); note != "" {
				fmt.Fprintf(os.Stderr, "hotlane: %s\n", note)
			}
		}
	}
}

// withCost makes opts print, as the scheduler stops, each callback's BPF
// run time since it was last enabled.
func withCost(opts *sched.RunOptions) {
	var started time.Time
	started0 := opts.Started
	opts.Started = func(s *sched.Scheduler) {
		started = time.Now()
		started0(s)
	}
	opts.Stopping = func(s *sched.Scheduler) {
		costs, err := s.Cost()
		if err != nil {
			fmt.Fprintf(os.Stderr, "hotlane: cost: %v\n", err)
			return
		}
		report.WriteCosts(os.Stderr, "hotlane: BPF run time per callback", costs, time.Since(started))
	}
}

// withMetrics serves the scheduler's metrics on listen and has opts tell
// the collector when a scheduler starts and stops; the caller closes the
// server.
func withMetrics(opts *sched.RunOptions, listen, webConfig string, quiet bool) (*metrics.Server, error) {
	col := metrics.NewSchedulerCollector()
	srv, err := serveMetrics("hotlane run", listen, webConfig, quiet, col)
	if err != nil {
		return nil, err
	}
	started, stopping := opts.Started, opts.Stopping
	opts.Started = func(s *sched.Scheduler) {
		col.Started(s)
		started(s)
	}
	opts.Stopping = func(s *sched.Scheduler) {
		col.Stopping(s)
		if stopping != nil {
			stopping(s)
		}
	}
	return srv, nil
}

// statsOutput is the --stats-json file. Its lines go to a temporary file
// beside it, which replaces the file once the scheduler is enabled, so
// that it can be followed as it grows; a run stopped before that
// (sched_ext missing, --timeout out of range) leaves the old file as it
// was.
type statsOutput struct {
	path string
	file *safefile.File
	ran  bool // the scheduler was enabled at least once
}

// create creates the temporary file, if a path was given.
func (o *statsOutput) create() error {
	if o.path == "" {
		return nil
	}
	f, err := safefile.Create(o.path, anyoneReads)
	if err != nil {
		return err
	}
	o.file = f
	return nil
}

// writer is where the JSON lines go; nil without a file, so that the
// run does not read stats for nobody.
func (o *statsOutput) writer() io.Writer {
	if o.file == nil {
		return nil
	}
	return o.file
}

// close keeps the file if the scheduler ran, else leaves the old one.
func (o *statsOutput) close() error {
	switch {
	case o.file == nil:
		return nil
	case !o.ran:
		o.file.Abort()
		return nil
	}
	return o.file.Commit()
}

// printClasses writes what the scheduler does with each class, a line
// each, so that --check-policy and the start-up say the same.
func printClasses(w io.Writer, prefix string, p *policy.Policy) {
	for _, c := range p.Classes {
		fmt.Fprintf(w, "%s%s\n", prefix, c.Describe())
	}
}
