package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/workloads"
)

const benchUsage = `Usage: hotlane bench [flags]
       hotlane bench hooks [flags]   (what each BPF hook kind costs; -h for its flags)

Runs the same workload under each variant in one boot, round after
round, with the run-queue latency tracer attached. Each round starts one
variant further down the list: with --repeats a multiple of the number
of variants, each runs equally often in every place. The lane is the
latency-critical part of the workload: the periodic "inference" task and
cyclictest's measuring thread. Variants:

  eevdf            the kernel's default scheduler
  eevdf+nice-20    EEVDF, the lane at nice -20
  eevdf+fifo       EEVDF, the lane at SCHED_FIFO --fifo-priority
  eevdf+deadline   EEVDF, the lane at SCHED_DEADLINE: period and deadline the
                   task's period, runtime its compute plus max(half, 1ms)
  scx_simple[-f]   the kernel's example scheduler (vtime, or -f global FIFO)
  scx_qmap         the kernel's example scheduler scx_qmap
  hotlane          hotlane's scheduler with its policy
  NAME             a --scheduler NAME=COMMAND

Only the lane gets FIFO, DEADLINE or nice; everything else stays
SCHED_OTHER. Before the first round each variant is checked (sched_ext in
the kernel, its program, CAP_SYS_NICE); one that cannot run is skipped
with one line and the report is INCOMPLETE.

Workloads: default (our inference task over CPU hogs, with cyclictest
beside it when found), cyclictest (cyclictest over stress-ng --cpu 2N),
judges (our inference task beside outside judges of the whole machine:
perf bench sched messaging and pipe, sysbench threads and cpu, rt-app's
periodic tasks and chain, stress-ng's switch, futex and pipe stressors
beside its CPU workers, and our request server), request-server (our
inference task beside a request server over CPU hogs), decode (an
inference server's decode loop over CPU hogs at 2x the CPUs: per token
300us of CPU work, an ioctl on /dev/full, 2ms on the "device"), or a file.

The report shows per variant the lane's latency in four views (the
tracer's run-queue wait of the lane's threads from their wake-up, the same
felt from their timer's expiry, our task's own wake-up lateness,
cyclictest's own histogram), missed periods, every other task's
run-queue wait, and background throughput per CPU-second the lane left; it
checks that the views order the variants alike and hotlane against the
bound. With judges or a request server, each judge's own figure (a time,
a rate, a latency), and per variant a "rest of the machine" table: the
fair classes' wake-up latency, each judge's figure and the request
server's as ratios to the baseline's, and the lane's beside them.
With decode servers, their tokens per second, time to first token and
inter-token latency per variant, and as ratios to the same servers run
alone (unloaded) under the kernel's default scheduler before the first
round, for one --warmup and --duration.

Needs a sched_ext kernel for the sched_ext variants: run it inside
'hotlane vm --scx scx_simple --scx scx_qmap --add /usr/bin/cyclictest
--add /usr/bin/stress-ng', with --judges for the judges.

Exit status: 0 all variants ran and hotlane met the bound, 1 the bound
failed, 2 error (including a variant that was skipped, failed to start or
ended mid-run), 3 interrupted: Ctrl-C or SIGTERM ended the bench before
its rounds were done; the report is written with the whole rounds
measured and says INTERRUPTED (report.json "verdict": "interrupted", a
JUnit error per case), but it is no verdict. In CI: --junit writes a JUnit report, and under GitHub
Actions (GITHUB_ACTIONS=true) each variant and clause also becomes an
annotation on standard output.

Flags:
`

// benchFlags are the flags of hotlane bench.
type benchFlags struct {
	list, baseline, workload, bound, out, junitPath, policyPath *string
	external, comms                                             listFlag
	duration, warmup, enableTimeout, period, compute            *time.Duration
	repeats, fifoPrio, hogs                                     *int
	scxSimple, scxQmap                                          *string
	cyclictest, stressNg, hackbench, perf, sysbench, rtApp      *string
}

func newBenchFlags(fs *flag.FlagSet) *benchFlags {
	f := &benchFlags{}
	f.list = fs.String("schedulers", strings.Join(workloads.BuiltinVariants, ","),
		"comma-separated variants to compare: "+strings.Join(workloads.BuiltinVariants, ", ")+", or a --scheduler NAME")
	fs.Var(&f.external, "scheduler", "a sched_ext scheduler program to compare, as NAME=COMMAND (repeatable); COMMAND is split at spaces and run without a shell (no quotes or redirections: put those in a script and name the script); the bench starts it, waits for sched_ext to be enabled and stops it with SIGINT, then SIGKILL")
	f.baseline = fs.String("baseline", workloads.EEVDF, "variant the ratios are relative to")
	f.duration = durationFlag(fs, "duration", 20*time.Second, 100*time.Millisecond, 0, "measured time per variant and repeat")
	f.warmup = durationFlag(fs, "warmup", 2*time.Second, 0, 0, "unmeasured time after each variant starts")
	f.repeats = intFlag(fs, "repeats", 3, 1, 100, "rounds over the list, each starting one variant further on")
	f.fifoPrio = intFlag(fs, "fifo-priority", workloads.DefaultFIFOPriority, 1, 99, "SCHED_FIFO priority of the lane under eevdf+fifo")
	f.enableTimeout = durationFlag(fs, "enable-timeout", workloads.DefaultEnableTimeout, 100*time.Millisecond, 10*time.Minute, "how long a scheduler program may take to enable sched_ext")
	f.period = durationFlag(fs, "period", 10*time.Millisecond, workloads.MinPeriod, 0, "default workload: inference task period (100 Hz by default)")
	f.compute = durationFlag(fs, "compute", 2*time.Millisecond, 0, 0, "default workload: inference task CPU time per period")
	f.hogs = intFlag(fs, "hogs", 2*runtime.NumCPU(), 0, 4096, "default workload: CPU hog threads (default: 2x the CPUs)")
	f.workload = fs.String("workload", workloads.WorkloadDefault, "the workload: "+strings.Join(workloads.BuiltinWorkloads, ", ")+" (see below), or a workload file (JSON, see workloads/examples/), which overrides --period, --compute and --hogs")
	f.cyclictest = fs.String("cyclictest", "cyclictest", "cyclictest (rt-tests) program; the default workload runs it beside the inference task as the outside view when it is found ('none': leave it out)")
	f.stressNg = fs.String("stress-ng", "stress-ng", "stress-ng program, for workloads that use it")
	f.hackbench = fs.String("hackbench", "hackbench", "hackbench (rt-tests) program, for workloads that use it")
	f.perf = fs.String("perf", "perf", "perf (linux-perf) program, for workloads that run perf bench sched")
	f.sysbench = fs.String("sysbench", "sysbench", "sysbench program, for workloads that use it")
	f.rtApp = fs.String("rt-app", "rt-app", "rt-app program, for workloads that use it")
	f.scxSimple = fs.String("scx-simple", vm.ScxSimpleGuestPath, "path of the kernel's scx_simple")
	f.scxQmap = fs.String("scx-qmap", vm.ScxQmapGuestPath, "path of the kernel's scx_qmap")
	f.bound = fs.String("bound", "inference:p99<=5ms", "latency bound hotlane must meet, checked on the tracer's run-queue latency of the class ('' for none)")
	f.out = fs.String("out", defaultOutDir(), "write report.txt, report.json, the SVG plots and, per variant, a trace of its worst waits over --bound (trace-VARIANT.json, as verify --trace) here")
	f.junitPath = fs.String("junit", "", "also write a JUnit XML report to this file: a test case per variant (an error if it did not run) and per clause of the bound")
	fs.Var(&f.comms, "inference-comm", "comm prefix hotlane treats as inference (default: the lane's own comms: infer, cyclictest)")
	f.policyPath = fs.String("policy", "", "hotlane's policy file, and the tracer's classes, instead of the default policy (not with --inference-comm); e.g. device matchers, with a workload whose periodic task has \"device\"")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		printFlags(fs)
	}
	return f
}

// request is what the parsed flags of fs ask the bench for.
func (f *benchFlags) request(fs *flag.FlagSet) workloads.BenchRequest {
	return workloads.BenchRequest{
		Schedulers: *f.list, External: f.external,
		Variant:  workloads.VariantOptions{ScxSimplePath: *f.scxSimple, ScxQmapPath: *f.scxQmap, FIFOPriority: *f.fifoPrio},
		Baseline: *f.baseline, BaselineGiven: flagGiven(fs, "baseline"), Args: fs.Args(),
		Workload: *f.workload, Period: *f.period, Compute: *f.compute, Hogs: *f.hogs,
		Programs: workloads.Programs{Cyclictest: *f.cyclictest, StressNg: *f.stressNg, Hackbench: *f.hackbench,
			Perf: *f.perf, Sysbench: *f.sysbench, RtApp: *f.rtApp},
		Bound: *f.bound, PolicyPath: *f.policyPath, InferenceComms: f.comms,
		Duration: *f.duration, Warmup: *f.warmup, Repeats: *f.repeats, EnableTimeout: *f.enableTimeout,
		Warn: func(msg string) { fmt.Fprintf(os.Stderr, "hotlane bench: %s\n", msg) },
	}
}

func runBench(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "hooks" {
		return runBenchHooks(ctx, args[1:])
	}
	return runCommand(ctx, "bench", args, newBenchFlags, func(ctx context.Context, fs *flag.FlagSet, f *benchFlags) (int, error) {
		return benchRun(ctx, f.request(fs), *f.out, *f.junitPath)
	})
}

// benchRun checks req, runs the bench and writes its reports into out;
// it returns the exit status.
func benchRun(ctx context.Context, req workloads.BenchRequest, out, junitPath string) (int, error) {
	// Every flag and file is checked before the privileges, and those
	// before anything is created, started or loaded.
	variants, err := req.Variants()
	if err != nil {
		return 0, err
	}
	if err := safefile.CheckDir("--out", out); err != nil {
		return 0, err
	}
	b, err := req.Bench(ctx, variants)
	if err != nil {
		return 0, err
	}
	// Loading schedulers and the tracer: fail before anything starts.
	if err := loader.RequireCapabilities("CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"); err != nil {
		return 0, err
	}
	if err := requireDir("--out", out); err != nil {
		return 0, err
	}
	ci, err := createCIOutputs(junitPath, os.Stdout)
	if err != nil {
		return 0, err
	}
	started := time.Now()
	run, skipped := workloads.Preflight(b.Variants, workloads.DetectHost())
	for _, s := range skipped {
		fmt.Fprintf(os.Stderr, "hotlane bench: skipping %s: %s\n", s.Name, s.Reason)
	}
	if len(run) == 0 {
		return 0, errors.New("none of the variants can run here")
	}
	b.Variants, b.Progress = run, os.Stderr
	rep, err := runBenchRounds(ctx, b, started, skipped, req.Baseline)
	if err != nil {
		return 0, err
	}
	if err := writeBenchReports(rep, out, ci, started); err != nil {
		return 0, err
	}
	if !rep.Complete && !rep.Interrupted {
		return exitError, nil
	}
	return exitCode(rep.Verdict), nil
}

// runBenchRounds runs the unloaded servers and the rounds of b; a signal
// ends them with a report of what was measured, marked interrupted.
func runBenchRounds(ctx context.Context, b workloads.Bench, started time.Time, skipped []workloads.Skipped, baseline string) (*workloads.Report, error) {
	// A signal here leaves the rounds to say so.
	unloaded, err := b.RunUnloaded(ctx)
	if err != nil && !errors.Is(err, report.ErrInterrupted) {
		return nil, err
	}
	runs, err := b.Run(ctx)
	interrupted := errors.Is(err, report.ErrInterrupted)
	if err != nil && !interrupted {
		return nil, err
	}
	rep := workloads.NewReport(started, runs, skipped, baseline, b.Bounds)
	rep.SetUnloaded(unloaded)
	if interrupted {
		rep.Interrupt()
	}
	return rep, nil
}

// writeBenchReports writes the text report, the files into out and the
// CI outputs.
func writeBenchReports(rep *workloads.Report, out string, ci *ciOutputs, started time.Time) error {
	if err := rep.WriteText(os.Stdout); err != nil {
		return err
	}
	files, err := writeBenchFiles(rep, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "hotlane bench: %s in %s\n", strings.Join(files, ", "), out)
	if slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, "trace-") }) {
		fmt.Fprintf(os.Stderr, "hotlane bench: each trace-VARIANT.json holds that variant's worst waits over the bound: %s\n", verify.HowToOpenTrace)
	}
	return ci.write("hotlane bench", started, rep.Cases(time.Since(started)))
}

// defaultOutDir is the VM's result directory inside the guest (copied back
// to the host), the working directory elsewhere.
func defaultOutDir() string {
	if d := os.Getenv("HOTLANE_RESULTS"); d != "" {
		return d
	}
	return "."
}

// writeBenchFiles writes the report files into dir (made by requireDir
// before the run) and returns their names; a file that fails is not
// written (an earlier run's stays as it was), and a plot with nothing to
// draw is left out.
func writeBenchFiles(rep *workloads.Report, dir string) ([]string, error) {
	var names []string
	write := func(name string, fn func(io.Writer) error) error {
		out, err := newOutput(filepath.Join(dir, name), anyoneReads)
		if err != nil {
			return err
		}
		if err := out.write(fn); err != nil {
			if errors.Is(err, workloads.ErrNoSamples) {
				// An earlier run's plot must not pass for this one's.
				os.Remove(filepath.Join(dir, name))
				return nil
			}
			return err
		}
		names = append(names, name)
		return nil
	}
	if err := write("report.txt", rep.WriteText); err != nil {
		return nil, err
	}
	if err := write("report.json", rep.WriteJSON); err != nil {
		return nil, err
	}
	for _, view := range workloads.Views {
		if err := write("tail-"+view+".svg", func(w io.Writer) error { return rep.WriteTail(w, view) }); err != nil {
			return nil, err
		}
	}
	if len(rep.Runs) > 0 && len(rep.Runs[0].Classes) > 0 {
		normal := rep.Runs[0].Classes[len(rep.Runs[0].Classes)-1].Class
		if err := write("tail-"+normal+".svg", func(w io.Writer) error { return rep.WriteClassTail(w, normal) }); err != nil {
			return nil, err
		}
	}
	if err := write("cost.svg", rep.WriteCost); err != nil {
		return nil, err
	}
	// Each variant's worst violations, as verify --trace writes them.
	for _, run := range rep.Runs {
		if run.Violations == nil {
			continue
		}
		// A --scheduler NAME may hold anything; the file's name may not.
		name := "trace-" + strings.Map(func(r rune) rune {
			if r == '/' || r == 0 || r > unicode.MaxASCII || unicode.IsSpace(r) {
				return '_'
			}
			return r
		}, run.Scheduler) + ".json"
		if err := run.Violations.WriteTraceFile(filepath.Join(dir, name), 0); errors.Is(err, verify.ErrNoViolation) {
			os.Remove(filepath.Join(dir, name)) // an earlier run's must not pass for this one's
			continue
		} else if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}
