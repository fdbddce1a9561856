package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/sched"
)

func runRun(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	policyPath := fs.String("policy", "", "policy file (JSON) defining the task classes; default: the built-in policy with --inference-comm")
	checkPolicy := fs.String("check-policy", "", "validate this policy file, print its classes and exit without loading anything")
	var comms listFlag
	fs.Var(&comms, "inference-comm", "with the built-in policy: a comm prefix of inference tasks (repeatable)")
	partial := fs.Bool("partial", false, "schedule only tasks that chose SCHED_EXT (SCX_OPS_SWITCH_PARTIAL); others stay on the default scheduler")
	interval := durationFlag(fs, "stats-interval", time.Second, 100*time.Millisecond, 0, "how often to print a stats line")
	quiet := fs.Bool("q", false, "print no stats lines")
	listen := fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics (e.g. 127.0.0.1:9464): per class tasks enqueued and started, the policy's decisions, whether the scheduler is enabled and how earlier loads ended")
	webConfig := webConfigFlag(fs)
	statsJSON := fs.String("stats-json", "", "also write each stats interval as a JSON line to this file")
	timeout := fs.Duration("timeout", sched.DefaultTimeout, "sched_ext watchdog: a task runnable this long without running ejects the scheduler (max 30s)")
	starvation := fs.Duration("starvation", sched.DefaultStarvation, "starvation guard: a CPU that the lane kept this long from normal work, while normal tasks waited, gives the longest-waiting one a turn (half this, rounded up to a tick); the startup line prints the resulting bound")
	debugError := fs.Uint64("debug-error-after", 0, "testing only: make the BPF code fail with scx_bpf_error after N enqueues")
	cost := fs.Bool("cost", false, "on exit, print each scheduler callback's runs and BPF run time (turns on the kernel's BPF run-time statistics: two clock reads per callback)")
	restarts := intFlag(fs, "restart-on-error", 0, 0, 100, "when the scheduler ends with an error exit (scx_bpf_error, watchdog stall), load it again, at most N times")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane run [flags]

Registers the hotlane sched_ext scheduler and keeps it running until Ctrl-C
or SIGTERM. Tasks of high-priority classes ("inference") get their own
dispatch queue, consumed before all others, and may preempt lower classes;
the rest share a weighted-vtime queue. If hotlane dies (even kill -9) the
kernel returns every task to its default scheduler.

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
		fmt.Printf("%s: ok, %d classes: %v\n", *checkPolicy, len(p.Classes), p.ClassNames())
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
	if *statsJSON != "" {
		// Created before loading, so that a bad path fails first; the
		// scheduler's own checks (sched_ext present, --timeout range)
		// come later, and a run they stop leaves no empty file behind.
		f, err := os.Create(*statsJSON)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hotlane run: %v\n", err)
			return exitError
		}
		defer func() {
			if fi, err := f.Stat(); err == nil && fi.Size() == 0 && !ran {
				os.Remove(*statsJSON)
			}
			f.Close()
		}()
		opts.JSON = f
	}
	if opts.Text == nil && opts.JSON == nil {
		opts.StatsInterval = 0
	}
	cfg := sched.Config{
		Table: table, Partial: *partial, Timeout: *timeout, Starvation: *starvation, DebugErrorAfter: *debugError,
		MeasureCost: *cost,
	}
	bound := "unknown"
	if tick, err := sched.Tick(); err == nil {
		bound = cfg.GuardedWaitBound(tick).String()
	}
	opts.Started = func(s *sched.Scheduler) {
		ran = true
		fmt.Fprintf(os.Stderr, "hotlane: scheduler enabled (kfunc generation %s, classes %v, %s mode; a normal task waits at most %s behind high-priority ones while up to 8 wait)\n",
			s.Object, s.Classes(), map[bool]string{true: "partial", false: "full"}[*partial], bound)
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
	if info.IsError() {
		if *restarts > 0 && used == *restarts {
			fmt.Fprintf(os.Stderr, "hotlane: giving up after %d restarts\n", used)
		}
		return exitFail
	}
	return exitOK
}
