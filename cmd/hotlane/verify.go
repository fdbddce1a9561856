package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/verify"
)

const verifyUsage = `Usage: hotlane verify [flags]

Measures run-queue latency - how long runnable tasks wait for a CPU - from
the kernel's sched_waking and sched_switch events, per task class (the
scheduler's classifier and policy), and checks it against a bound. Works
under any scheduler: EEVDF, scx_simple, hotlane.

Each wait is kept in two views. "felt" starts at the wake-up's cause where
the kernel tells it: a task woken by its own timer (nanosleep,
clock_nanosleep, poll and epoll timeouts) is late from the timer's expiry
(hrtimer_expire_entry) until its sleep call returns (fexit on
hrtimer_nanosleep and schedule_hrtimeout_range_clock; where the kernel
refuses fexit, until the switch-in), so the interrupt's delivery and the
context switch's tail count, as they do for the application. Other waits start at the wake-up (sched_waking) or the
preemption, where "wait" (runqlat's view) always starts. Bounds check the
felt view unless written CLASS/wait:. The report also shows, for timer
wake-ups, the time from expiry to wake-up ("timer").

The verdict is conservative: a percentile passes only if the upper edge of
its histogram bucket is within the bound. Each wait above the bound is
printed as it happens, with where the wait went on the CPU that ended it:
time in realtime/deadline tasks (rt_dl), in hardirq and softirq handlers,
in tasks of the fair class or chosen by a sched_ext scheduler (the three
longest named), idle, whether the task migrated and whether sched_ext
exited meanwhile. The report adds these up per class.

Pictures and actions: --trace FILE writes the worst violations as a trace
that ui.perfetto.dev and chrome://tracing open (Debian's perfetto package
has no trace processor): per violation the waiting task's track and its
CPU's, with the explanation's parts as slices. --plot FILE draws the worst
as an SVG timeline. --on-violation runs the command after -- for each
violation (at most --on-violation-per-second, one at a time; verify waits
for the last), as an argument vector, no shell, its output on standard
error, with the violation in its environment: HOTLANE_VIOLATION_PID, TGID,
COMM, CLASS, CPU, AT_NS (CLOCK_MONOTONIC), LATENCY_NS (the figure the
bound checked), VIEW, BOUND_NS, WAIT_NS, FELT_NS, TIMER_DELIVERY_NS,
PREV_PID, PREV_COMM, and with an explanation CAUSE, PARTS (KIND=NS ...),
RAN (COMM[PID] KIND/CLASS NS, ...), FROM_CPU, EXPLANATION.
--stop-on-violation ends the run at the first violation: a FAIL.

A bound without CLASS: covers the tasks --pid, --tid or --comm select,
whatever class the policy puts them in ('--pid 1234 --bound max<=1ms');
without those flags it covers the policy's first class. The report says
which tasks each bound covered.

Exit status: 0 bound held (or none given), 1 bound failed, 2 error (a bound
whose tasks had no samples is one: it was checked against nothing), 3
interrupted: Ctrl-C or SIGTERM ended the run before --duration; the
reports are written and say INTERRUPTED (JSON "verdict": "interrupted",
a JUnit error per clause), but they are no verdict. Without a duration
(--duration 0) a signal is the normal end.

In CI: --junit writes a JUnit report (one case per clause), and under
GitHub Actions (GITHUB_ACTIONS=true) each clause also becomes an
annotation (::error for a clause not met, ::notice for one met), beside
the text report.

Examples:
  hotlane verify --bound 'inference:p99<=200us,max<=5ms' --duration 30s
  hotlane verify --policy policy.json --bound 'inference:p99<=1ms;normal:p99<=20ms' --json report.json
  hotlane verify --bound 'inference/wait:p99<=100us' --duration 30s
  hotlane verify --tid 4242 --tid 4243 --top 2 --duration 5s
  hotlane verify --pid 1234 --bound 'p99<=1ms,max<=5ms'
  hotlane verify --bound 'inference:max<=5ms' --trace worst.json --plot worst.svg
  hotlane verify --bound 'inference:max<=5ms' --stop-on-violation --on-violation -- perf record -a -g -o perf.data sleep 1

Flags:
`

// verifyFlags are the flags of hotlane verify.
type verifyFlags struct {
	policyPath, bound, listen, webConfig, jsonPath, junitPath, comm, hook, tracePath, plotPath *string
	comms                                                                                      listFlag
	tids                                                                                       tidList
	duration, interval                                                                         *time.Duration
	pid, top, maxTasks, ringBuf, violationLines, traceMax, actionRate                          *int
	perCPU, noHist, quiet, noExplain, extCallbacks, waitOnly, onViolation, stopOnViolation     *bool
}

func newVerifyFlags(fs *flag.FlagSet) *verifyFlags {
	f := &verifyFlags{}
	f.policyPath = fs.String("policy", "", "policy file whose classes the report uses (the scheduler's); default: the built-in policy with --inference-comm")
	fs.Var(&f.comms, "inference-comm", "with the built-in policy: a comm prefix of inference tasks (repeatable)")
	f.bound = fs.String("bound", "", "latency bound to check, e.g. 'inference:p99<=200us,max<=5ms' (classes separated by ';'; without CLASS: the tasks --pid, --tid or --comm select, whatever their class, else the policy's first class; CLASS/wait: checks the wait from the wake-up instead of the felt view, /wait: without a class)")
	f.duration = durationFlag(fs, "duration", 10*time.Second, 0, 0, "how long to measure (Ctrl-C ends early); 0: until Ctrl-C or SIGTERM, which is also the default with --listen")
	f.listen = fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics while measuring (e.g. 127.0.0.1:9464 or :9464): latency histograms per class and view at hotlane's bucket edges, events, losses, BPF run time")
	f.webConfig = webConfigFlag(fs)
	f.jsonPath = fs.String("json", "", "also write the full report as JSON to this file (-: standard output, and the text report goes to standard error)")
	f.junitPath = fs.String("junit", "", "also write the bound's verdicts as a JUnit XML report to this file: one test case per clause, a failure per clause not met (CI systems read it)")
	f.pid = intFlag(fs, "pid", 0, 0, maxPID, "trace only this process (tgid)")
	fs.Var(&f.tids, "tid", fmt.Sprintf("trace only this thread (repeatable, at most %d; with --top, the per-task table is per thread, like runqlat -L)", verify.MaxFilterTIDs))
	f.comm = fs.String("comm", "", "trace only threads whose comm starts with this")
	f.top = intFlag(fs, "top", 10, 0, 1<<20, "list this many tasks with the highest p99 (0: none)")
	f.maxTasks = intFlag(fs, "max-tasks", 1024, 1, 65536, "with --top: keep histograms for at most this many tasks (about 16 KiB each); samples of later tasks are left out of the per-task table only")
	f.perCPU = fs.Bool("per-cpu", false, "also report per CPU")
	f.interval = optionalDurationFlag(fs, "interval", 100*time.Millisecond, "every this long, one line per class with that interval's waits (count, p50, p99, max), as 'runqlat 1' prints a histogram a second")
	f.noHist = fs.Bool("no-histograms", false, "do not draw the per-class histograms")
	f.hook = fs.String("hook", "", "force the hook family: tp_btf or raw_tp (default: tp_btf, raw_tp if it cannot attach)")
	f.ringBuf = intFlag(fs, "ringbuf-bytes", 0, 0, 1<<30, "size of the violation ring buffer (power of two; default 256 KiB)")
	f.quiet = fs.Bool("q", false, "no progress lines and no per-violation lines; with --json -, no text report either: the JSON alone (machine-only)")
	f.noExplain = fs.Bool("no-explain", false, "do not explain violations (saves the per-switch history and the interrupt hooks)")
	f.extCallbacks = fs.Bool("ext-callbacks", false, "explanations also say how much of a wait went to the sched_ext scheduler's callbacks (fentry/fexit on each callback of the scheduler loaded now; taxes every callback run, about 1.5us per run under TCG)")
	f.waitOnly = fs.Bool("wait-only", false, "look for no wake-up causes: attach no timer or sleep-return hooks, so felt is the wait and timers cost the tracer nothing")
	f.violationLines = intFlag(fs, "violation-lines", verify.DefaultViolationLinesPerSecond, 1, 1<<20, "print at most this many violations a second, then how many more there were per class")
	f.tracePath = fs.String("trace", "", "write the worst violations (--trace-max) as a trace, Chrome's JSON trace event format: the waiting task's track and its CPU's, what ran there by name and kind, the wake-up, switch-in and bound; "+verify.HowToOpenTrace+"; mode 0600, it names tasks")
	f.traceMax = intFlag(fs, "trace-max", verify.DefaultTraceViolations, 1, verify.KeptViolations, "how many of the worst violations --trace holds")
	f.plotPath = fs.String("plot", "", "draw the worst violation as an SVG timeline to this file: its wait, its CPU's time by kind, the bound (mode 0600)")
	f.onViolation = fs.Bool("on-violation", false, "run the command given after -- for each violation, with HOTLANE_VIOLATION_* in its environment (see above); an argument vector, run without a shell")
	f.actionRate = intFlag(fs, "on-violation-per-second", verify.DefaultActionsPerSecond, 1, 1000, "start the --on-violation command for at most this many violations a second, one at a time")
	f.stopOnViolation = fs.Bool("stop-on-violation", false, "end the run at the first violation, a FAIL (exit status 1)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), verifyUsage)
		printFlags(fs)
	}
	return f
}

// request is what the parsed flags of fs ask verify for.
func (f *verifyFlags) request(fs *flag.FlagSet) verify.Request {
	r := verify.Request{
		PolicyPath: *f.policyPath, InferenceComms: f.comms, Bound: *f.bound,
		Duration: *f.duration, DurationGiven: flagGiven(fs, "duration"), Served: *f.listen != "",
		PID: *f.pid, TIDs: f.tids, Comm: *f.comm, TopTasks: *f.top, MaxTasks: *f.maxTasks,
		Hook: *f.hook, RingBufferBytes: *f.ringBuf,
		NoExplain: *f.noExplain, ExtCallbacks: *f.extCallbacks, WaitOnly: *f.waitOnly,
		OnViolation: *f.onViolation, Args: fs.Args(), OnViolationPerSecond: *f.actionRate, StopOnViolation: *f.stopOnViolation,
		ViolationLinesPerSecond: *f.violationLines,
		// Where the text report goes depends on the --json path alone;
		// the file itself is checked later.
		Interval: *f.interval, Intervals: textOut(&output{path: *f.jsonPath}, false),
	}
	for _, name := range []string{"trace", "plot", "on-violation", "stop-on-violation"} {
		if flagGiven(fs, name) {
			r.ViolationFlags = append(r.ViolationFlags, name)
		}
	}
	if !*f.quiet {
		r.Log = os.Stderr
	}
	return r
}

func runVerify(ctx context.Context, args []string) int {
	return runCommand(ctx, "verify", args, newVerifyFlags, func(ctx context.Context, fs *flag.FlagSet, f *verifyFlags) (int, error) {
		return verifyRun(ctx, f.request(fs), f)
	})
}

// verifyRun checks req, runs it and writes its reports; it returns the
// verdict's exit status.
func verifyRun(ctx context.Context, req verify.Request, f *verifyFlags) (int, error) {
	opts, out, err := prepareVerify(ctx, req, f)
	if err != nil {
		return 0, err
	}
	var tracerMetrics *metrics.TracerCollector
	if *f.listen != "" {
		tracerMetrics = metrics.NewTracerCollector()
		srv, err := serveMetrics("hotlane verify", *f.listen, *f.webConfig, *f.quiet, tracerMetrics)
		if err != nil {
			return 0, err
		}
		defer srv.Close()
		opts.Live = tracerMetrics.Attach
	}
	started := time.Now()
	res, err := verify.Run(ctx, opts)
	if err != nil {
		return 0, err
	}
	if tracerMetrics != nil {
		tracerMetrics.Detach(res.Snapshot)
	}
	if err := out.write(res, started); err != nil {
		return 0, err
	}
	if err := res.Unchecked(opts.Duration); err != nil {
		return 0, err
	}
	return exitCode(res.Verdict), nil
}

// prepareVerify checks everything req and the flags ask for before
// anything is attached, so that a mistake fails first, and says what the
// bound covers and what the per-task table costs.
func prepareVerify(ctx context.Context, req verify.Request, f *verifyFlags) (verify.Options, *verifyOutputs, error) {
	if err := req.Validate(); err != nil {
		return verify.Options{}, nil, err
	}
	opts, err := req.Options(ctx)
	if err != nil {
		return verify.Options{}, nil, err
	}
	if note := req.ClasslessNote(opts); note != "" && !*f.quiet {
		fmt.Fprintf(os.Stderr, "hotlane verify: %s\n", note)
	}
	for _, o := range []struct{ flag, path string }{{"--trace", *f.tracePath}, {"--plot", *f.plotPath}} {
		if o.path == stdoutPath {
			return verify.Options{}, nil, fmt.Errorf("%s needs a file name", o.flag)
		}
		if _, err := newOutput(o.path, ownerReads); err != nil {
			return verify.Options{}, nil, err
		}
	}
	if err := req.CheckTargets(); err != nil {
		return verify.Options{}, nil, err
	}
	// Said even with -q: it is memory the machine gives up.
	note, err := req.PreallocNote()
	if err != nil {
		return verify.Options{}, nil, err
	}
	if note != "" {
		fmt.Fprintf(os.Stderr, "hotlane verify: %s\n", note)
	}
	jsonOut, err := newOutput(*f.jsonPath, ownerReads)
	if err != nil {
		return verify.Options{}, nil, err
	}
	ci, err := createCIOutputs(*f.junitPath, textOut(jsonOut, false))
	if err != nil {
		return verify.Options{}, nil, err
	}
	return opts, &verifyOutputs{json: jsonOut, ci: ci, f: f}, nil
}

// verifyOutputs are the files and the text report a verify run ends by
// writing.
type verifyOutputs struct {
	json *output
	ci   *ciOutputs
	f    *verifyFlags
}

func (o *verifyOutputs) write(res *verify.Result, started time.Time) error {
	f := o.f
	if *f.tracePath != "" {
		if err := res.WriteTraceFile(*f.tracePath, *f.traceMax); errors.Is(err, verify.ErrNoViolation) {
			fmt.Fprintf(os.Stderr, "hotlane verify: --trace %s: no violation, not written\n", *f.tracePath)
		} else if err != nil {
			return err
		}
	}
	if *f.plotPath != "" {
		if err := res.WritePlotFile(*f.plotPath); errors.Is(err, verify.ErrNoViolation) {
			fmt.Fprintf(os.Stderr, "hotlane verify: --plot %s: no violation, not written\n", *f.plotPath)
		} else if err != nil {
			return err
		}
	}
	text := verify.TextOptions{TopTasks: *f.top, Histograms: !*f.noHist, PerCPU: *f.perCPU, HideTGID: uint32(os.Getpid())}
	if err := res.WriteText(textOut(o.json, *f.quiet), text); err != nil {
		return err
	}
	if err := o.json.write(func(w io.Writer) error { return res.WriteJSON(w) }); err != nil {
		return err
	}
	return o.ci.write("hotlane verify", started, res.Cases("hotlane verify", time.Since(started)))
}
