package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hotlane/hotlane/internal/infile"
	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/verify"
)

// bigPrealloc is the kernel memory a flag may preallocate before the
// command says how much, even with -q: the default per-task table (about
// 16 MiB) stays below it.
const bigPrealloc = 64 << 20

func runVerify(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	policyPath := fs.String("policy", "", "policy file whose classes the report uses (the scheduler's); default: the built-in policy with --inference-comm")
	var comms listFlag
	fs.Var(&comms, "inference-comm", "with the built-in policy: a comm prefix of inference tasks (repeatable)")
	bound := fs.String("bound", "", "latency bound to check, e.g. 'inference:p99<=200us,max<=5ms' (classes separated by ';'; without CLASS: the tasks --pid, --tid or --comm select, whatever their class, else the policy's first class; CLASS/wait: checks the wait from the wake-up instead of the felt view, /wait: without a class)")
	duration := durationFlag(fs, "duration", 10*time.Second, 0, 0, "how long to measure (Ctrl-C ends early); 0: until Ctrl-C or SIGTERM, which is also the default with --listen")
	listen := fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics while measuring (e.g. 127.0.0.1:9464 or :9464): latency histograms per class and view at hotlane's bucket edges, events, losses, BPF run time")
	webConfig := webConfigFlag(fs)
	jsonPath := fs.String("json", "", "also write the full report as JSON to this file (-: standard output, and the text report goes to standard error)")
	junitPath := fs.String("junit", "", "also write the bound's verdicts as a JUnit XML report to this file: one test case per clause, a failure per clause not met (CI systems read it)")
	pid := intFlag(fs, "pid", 0, 0, maxPID, "trace only this process (tgid)")
	var tids tidList
	fs.Var(&tids, "tid", fmt.Sprintf("trace only this thread (repeatable, at most %d; with --top, the per-task table is per thread, like runqlat -L)", verify.MaxFilterTIDs))
	comm := fs.String("comm", "", "trace only threads whose comm starts with this")
	top := intFlag(fs, "top", 10, 0, 1<<20, "list this many tasks with the highest p99 (0: none)")
	maxTasks := intFlag(fs, "max-tasks", 1024, 1, 65536, "with --top: keep histograms for at most this many tasks (about 16 KiB each); samples of later tasks are left out of the per-task table only")
	perCPU := fs.Bool("per-cpu", false, "also report per CPU")
	interval := optionalDurationFlag(fs, "interval", 100*time.Millisecond, "every this long, one line per class with that interval's waits (count, p50, p99, max), as 'runqlat 1' prints a histogram a second")
	noHist := fs.Bool("no-histograms", false, "do not draw the per-class histograms")
	hook := fs.String("hook", "", "force the hook family: tp_btf or raw_tp (default: tp_btf, raw_tp if it cannot attach)")
	ringBuf := intFlag(fs, "ringbuf-bytes", 0, 0, 1<<30, "size of the violation ring buffer (power of two; default 256 KiB)")
	quiet := fs.Bool("q", false, "no progress lines and no per-violation lines; with --json -, no text report either: the JSON alone (machine-only)")
	noExplain := fs.Bool("no-explain", false, "do not explain violations (saves the per-switch history and the interrupt hooks)")
	extCallbacks := fs.Bool("ext-callbacks", false, "explanations also say how much of a wait went to the sched_ext scheduler's callbacks (fentry/fexit on each callback of the scheduler loaded now; taxes every callback run, about 1.5us per run under TCG)")
	waitOnly := fs.Bool("wait-only", false, "look for no wake-up causes: attach no timer or sleep-return hooks, so felt is the wait and timers cost the tracer nothing")
	violationLines := intFlag(fs, "violation-lines", verify.DefaultViolationLinesPerSecond, 1, 1<<20, "print at most this many violations a second, then how many more there were per class")
	tracePath := fs.String("trace", "", "write the worst violations (--trace-max) as a trace, Chrome's JSON trace event format: the waiting task's track and its CPU's, what ran there by name and kind, the wake-up, switch-in and bound; "+verify.HowToOpenTrace+"; mode 0600, it names tasks")
	traceMax := intFlag(fs, "trace-max", verify.DefaultTraceViolations, 1, verify.KeptViolations, "how many of the worst violations --trace holds")
	plotPath := fs.String("plot", "", "draw the worst violation as an SVG timeline to this file: its wait, its CPU's time by kind, the bound (mode 0600)")
	onViolation := fs.Bool("on-violation", false, "run the command given after -- for each violation, with HOTLANE_VIOLATION_* in its environment (see above); an argument vector, run without a shell")
	actionRate := intFlag(fs, "on-violation-per-second", verify.DefaultActionsPerSecond, 1, 1000, "start the --on-violation command for at most this many violations a second, one at a time")
	stopOnViolation := fs.Bool("stop-on-violation", false, "end the run at the first violation, a FAIL (exit status 1)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane verify [flags]

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
`)
		printFlags(fs)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "hotlane verify: %v\n", err)
		return exitError
	}
	var action []string
	switch {
	case *onViolation && fs.NArg() == 0:
		return fail(errors.New("--on-violation needs the command after --, e.g. --on-violation -- logger -t hotlane violation"))
	case *onViolation:
		action = fs.Args()
		if _, err := exec.LookPath(action[0]); err != nil {
			return fail(fmt.Errorf("--on-violation: %w", err))
		}
	case fs.NArg() > 0:
		return fail(fmt.Errorf("unexpected argument %q (a command to run on each violation goes after --on-violation --)", fs.Arg(0)))
	}
	if *listen != "" && !flagGiven(fs, "duration") {
		*duration = 0 // a service: until stopped
	}
	var p *policy.Policy
	var err error
	if *policyPath != "" {
		if p, err = policy.Load(ctx, *policyPath); err != nil {
			return fail(err)
		}
	} else {
		p = policy.Default(comms...)
	}
	table, err := p.Compile("")
	if err != nil {
		return fail(err)
	}
	tracer := verify.TracerConfig{
		Table: table, FilterTGID: uint32(*pid), FilterTIDs: tids, FilterComm: *comm,
		PerTask: *top > 0, MaxTasks: *maxTasks, Hook: *hook, RingBufferBytes: *ringBuf,
		MeasureCost: true, ExtCallbacks: *extCallbacks, WaitOnly: *waitOnly,
	}
	var bounds []verify.Bound
	if *bound != "" {
		classless := verify.ClasslessTarget(tracer, table.Names[0])
		if bounds, err = verify.ParseBoundsFor(*bound, classless); err != nil {
			return fail(err)
		}
		if !*quiet && verify.HasClasslessPart(*bound) {
			what := verify.Bound{Class: classless.Class, Selected: classless.Selected}.Covers(tracer.Selection())
			if !classless.Selected {
				what += " (the policy's first)"
			}
			fmt.Fprintf(os.Stderr, "hotlane verify: the bound's clauses without CLASS: check %s\n", what)
		}
	}
	tracer.Explain = len(bounds) > 0 && !*noExplain
	for _, f := range []string{"trace", "plot", "on-violation", "stop-on-violation"} {
		if flagGiven(fs, f) && len(bounds) == 0 {
			return fail(fmt.Errorf("--%s needs --bound: a violation is a wait over it", f))
		}
	}
	// Checked before tracing, so that a bad path fails first.
	for _, f := range []struct{ flag, path string }{{"--trace", *tracePath}, {"--plot", *plotPath}} {
		if f.path == stdoutPath {
			return fail(fmt.Errorf("%s needs a file name", f.flag))
		}
		if _, err := newOutput(f.path, ownerReads); err != nil {
			return fail(err)
		}
	}
	if *pid > 0 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", *pid)); err != nil {
			return fail(fmt.Errorf("--pid %d: no such process", *pid))
		}
	}

	for _, tid := range tids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", tid)); err != nil {
			return fail(fmt.Errorf("--tid %d: no such thread", tid))
		}
	}
	if len(tids) > verify.MaxFilterTIDs {
		return fail(fmt.Errorf("--tid given %d times: at most %d threads", len(tids), verify.MaxFilterTIDs))
	}

	// A preallocated table: its memory is taken at load, used or not.
	if *top > 0 {
		bytes, err := verify.TaskTableBytes(*maxTasks)
		if err != nil {
			return fail(err)
		}
		if bytes >= bigPrealloc {
			fmt.Fprintf(os.Stderr, "hotlane verify: --max-tasks %d preallocates about %s of kernel memory for the per-task table (--top 0: none)\n", *maxTasks, infile.Size(bytes>>20<<20))
		}
	}

	opts := verify.Options{Tracer: tracer, Bounds: bounds, Duration: *duration,
		OnViolation: action, OnViolationPerSecond: *actionRate, StopOnViolation: *stopOnViolation}
	if !*quiet {
		opts.Progress = os.Stderr
		opts.ProgressInterval = max(*duration/10, time.Second)
		opts.Violations = os.Stderr
		opts.ViolationLinesPerSecond = *violationLines
	}
	// Checked before tracing, so that a bad path fails first.
	jsonOut, err := newOutput(*jsonPath, ownerReads)
	if err != nil {
		return fail(err)
	}
	if *interval > 0 {
		opts.Interval, opts.Intervals = *interval, textOut(jsonOut, false)
	}
	ci, err := createCIOutputs(*junitPath, textOut(jsonOut, false))
	if err != nil {
		return fail(err)
	}
	var tracerMetrics *metrics.TracerCollector
	if *listen != "" {
		tracerMetrics = metrics.NewTracerCollector()
		srv, err := serveMetrics("hotlane verify", *listen, *webConfig, *quiet, tracerMetrics)
		if err != nil {
			return fail(err)
		}
		defer srv.Close()
		opts.Live = tracerMetrics.Attach
		if *duration == 0 {
			opts.ProgressInterval = time.Minute
		}
	}
	started := time.Now()
	res, err := verify.Run(ctx, opts)
	if err != nil {
		return fail(err)
	}
	if tracerMetrics != nil {
		tracerMetrics.Detach(res.Snapshot)
	}
	if *tracePath != "" {
		if err := res.WriteTraceFile(*tracePath, *traceMax); errors.Is(err, verify.ErrNoViolation) {
			fmt.Fprintf(os.Stderr, "hotlane verify: --trace %s: no violation, not written\n", *tracePath)
		} else if err != nil {
			return fail(err)
		}
	}
	if *plotPath != "" {
		if err := res.WritePlotFile(*plotPath); errors.Is(err, verify.ErrNoViolation) {
			fmt.Fprintf(os.Stderr, "hotlane verify: --plot %s: no violation, not written\n", *plotPath)
		} else if err != nil {
			return fail(err)
		}
	}
	if err := res.WriteText(textOut(jsonOut, *quiet), verify.TextOptions{TopTasks: *top, Histograms: !*noHist, PerCPU: *perCPU, HideTGID: uint32(os.Getpid())}); err != nil {
		return fail(err)
	}
	if err := jsonOut.write(func(w io.Writer) error { return res.WriteJSON(w) }); err != nil {
		return fail(err)
	}
	if err := ci.write("hotlane verify", started, res.Cases("hotlane verify", time.Since(started))); err != nil {
		return fail(err)
	}
	if res.UnmeasuredSelection != "" && !res.Interrupted {
		return fail(fmt.Errorf("none of the selected tasks (%s) waited for a CPU in %s, so the bound was checked against nothing: "+
			"check the filters (--pid, --tid, --comm)", res.UnmeasuredSelection, *duration))
	}
	// Cut short, a class may not have had its samples yet: that is the
	// interruption, not a mistake in the policy.
	if len(res.Unmeasured) > 0 && !res.Interrupted {
		return fail(fmt.Errorf("no task of class %s waited for a CPU in %s, so the bound was checked against nothing: "+
			"check which tasks the policy puts in it (--policy, --inference-comm) and the filters (--pid, --comm)",
			strings.Join(res.Unmeasured, ", "), *duration))
	}
	return exitCode(res.Verdict)
}
