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

func runRun(ctx context.Context, args []string) (code int) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	policyPath := fs.String("policy", "", "policy file (JSON) defining the task classes; default: the built-in policy with --inference-comm")
	checkPolicy := fs.String("check-policy", "", "validate this policy file, print what the scheduler would do with each class and exit without loading anything")
	var comms listFlag
	fs.Var(&comms, "inference-comm", "with the built-in policy: a comm prefix of inference tasks (repeatable)")
	partial := fs.Bool("partial", false, "schedule only tasks that chose SCHED_EXT (SCX_OPS_SWITCH_PARTIAL); others stay on the default scheduler")
	interval := durationFlag(fs, "stats-interval", time.Second, 100*time.Millisecond, 0, "how often to print a stats line")
	quiet := fs.Bool("q", false, "print no stats lines")
	listen := fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics (e.g. 127.0.0.1:9464): per class tasks enqueued and started, the policy's decisions, whether the scheduler is enabled and how earlier loads ended")
	webConfig := webConfigFlag(fs)
	statsJSON := fs.String("stats-json", "", "also write each stats interval as a JSON line to this file; it replaces an existing file once the scheduler is enabled (a run that fails to start leaves it as it was)")
	timeout := fs.Duration("timeout", sched.DefaultTimeout, "sched_ext watchdog: a task runnable this long without running ejects the scheduler (max 30s)")
	starvation := fs.Duration("starvation", sched.DefaultStarvation, "starvation guard: a CPU that gave the lane this much CPU time while normal tasks waited serves them for half this before the lane again; the startup line prints the resulting bound")
	debugError := fs.Uint64("debug-error-after", 0, "testing only: make the BPF code fail with scx_bpf_error after N enqueues")
	cost := fs.Bool("cost", false, "on exit, print each scheduler callback's runs and BPF run time (turns on the kernel's BPF run-time statistics: two clock reads per callback)")
	restarts := intFlag(fs, "restart-on-error", 0, 0, 100, "when the scheduler ends with an error exit (scx_bpf_error, watchdog stall), load it again, at most N times")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane run [flags]

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
`)
		printFlags(fs)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "hotlane run: unexpected argument %q\n", fs.Arg(0))
		return exitError
	}

	if *checkPolicy != "" {
		p, err := policy.Load(ctx, *checkPolicy)
		if err == nil {
			_, err = p.Compile("")
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
			return exitError
		}
		fmt.Printf("%s: ok, %d classes:\n", *checkPolicy, len(p.Classes))
		printClasses(os.Stdout, "  ", p)
		return exitOK
	}

	var p *policy.Policy
	if *policyPath != "" {
		if len(comms) > 0 {
			fmt.Fprintln(os.Stderr, "hotlane run: --inference-comm applies to the built-in policy; put the comms in the policy file instead")
			return exitError
		}
		var err error
		if p, err = policy.Load(ctx, *policyPath); err != nil {
			fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
			return exitError
		}
	} else {
		p = policy.Default(comms...)
	}
	table, err := p.Compile("")
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
		return exitError
	}

	ran := false // the scheduler was enabled at least once
	opts := sched.RunOptions{StatsInterval: *interval, Text: os.Stdout}
	if *quiet {
		opts.Text = nil
	}
	var statsFile *safefile.File
	if *statsJSON != "" {
		// Created before loading, so that a bad path fails first. The
		// lines go to a temporary file beside it, which replaces the
		// file once the scheduler is enabled, so that it can be
		// followed as it grows; a run stopped before that (sched_ext
		// missing, --timeout out of range) leaves the old file as it was.
		f, err := safefile.Create(*statsJSON, anyoneReads)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
			return exitError
		}
		defer func() {
			if !ran {
				f.Abort()
				return
			}
			if err := f.Commit(); err != nil {
				fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
				code = exitError
			}
		}()
		opts.JSON = f
		statsFile = f
	}
	if opts.Text == nil && opts.JSON == nil {
		opts.StatsInterval = 0
	}
	cfg := sched.Config{
		Table: table, Partial: *partial, Timeout: *timeout, Starvation: *starvation, DebugErrorAfter: *debugError,
		MeasureCost: *cost, Progress: os.Stderr,
	}
	bound := "the starvation bound is unknown (no scheduler tick)"
	if tick, err := sched.Tick(); err == nil {
		bound = cfg.Bound(tick).String()
	}
	opts.Started = func(s *sched.Scheduler) {
		ran = true
		if err := statsFile.Publish(); err != nil {
			fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
		}
		fmt.Fprintf(os.Stderr, "hotlane: scheduler enabled (kfunc generation %s, %s mode); classes:\n",
			s.Object, map[bool]string{true: "partial", false: "full"}[*partial])
		printClasses(os.Stderr, "hotlane:   ", p)
		fmt.Fprintf(os.Stderr, "hotlane: starvation guard: %s\n", bound)
		fmt.Fprintf(os.Stderr, "hotlane: cpus: %s\n", s.Topology)
		fmt.Fprintf(os.Stderr, "hotlane: %s\n", s.Load)
	}
	if *cost {
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
	if *listen != "" {
		col := metrics.NewSchedulerCollector()
		srv, err := serveMetrics("hotlane run", *listen, *webConfig, *quiet, col)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
			return exitError
		}
		defer srv.Close()
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
	}
	info, used, err := sched.RunWithRestarts(ctx, cfg, opts, *restarts, os.Stderr)
	if err != nil {
		if used > 0 {
			fmt.Fprintf(os.Stderr, "hotlane run: after %d restarts: %v\n", used, err)
		} else {
			fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
		}
		return exitError
	}
	fmt.Fprintf(os.Stderr, "hotlane: scheduler exited: %s\n", info)
	if info.IsError() && info.Dump != "" {
		fmt.Fprintf(os.Stderr, "hotlane: the kernel's dump at the exit:\n%s\n", info.Dump)
	}
	if info.IsError() {
		if *restarts > 0 && used == *restarts {
			fmt.Fprintf(os.Stderr, "hotlane: giving up after %d restarts\n", used)
		}
		return exitFail
	}
	return exitOK
}

// printClasses writes what the scheduler does with each class, a line
// each, so that --check-policy and the start-up say the same.
func printClasses(w io.Writer, prefix string, p *policy.Policy) {
	for _, c := range p.Classes {
		fmt.Fprintf(w, "%s%s\n", prefix, c.Describe())
	}
}
