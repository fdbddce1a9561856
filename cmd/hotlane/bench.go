package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/workloads"
)

func runBench(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "hooks" {
		return runBenchHooks(ctx, args[1:])
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	list := fs.String("schedulers", strings.Join(workloads.BuiltinVariants, ","),
		"comma-separated variants to compare: "+strings.Join(workloads.BuiltinVariants, ", ")+", or a --scheduler NAME")
	var external listFlag
	fs.Var(&external, "scheduler", "a sched_ext scheduler program to compare, as NAME=COMMAND (repeatable); the bench starts it, waits for sched_ext to be enabled and stops it with SIGINT, then SIGKILL")
	baseline := fs.String("baseline", workloads.EEVDF, "variant the ratios are relative to")
	duration := durationFlag(fs, "duration", 20*time.Second, 100*time.Millisecond, 0, "measured time per variant and repeat")
	warmup := durationFlag(fs, "warmup", 2*time.Second, 0, 0, "unmeasured time after each variant starts")
	repeats := intFlag(fs, "repeats", 3, 1, 100, "rounds over the list, alternating the order")
	fifoPrio := intFlag(fs, "fifo-priority", workloads.DefaultFIFOPriority, 1, 99, "SCHED_FIFO priority of the lane under eevdf+fifo")
	enableTimeout := durationFlag(fs, "enable-timeout", workloads.DefaultEnableTimeout, 100*time.Millisecond, 10*time.Minute, "how long a scheduler program may take to enable sched_ext")
	period := durationFlag(fs, "period", 10*time.Millisecond, workloads.MinPeriod, 0, "default workload: inference task period (100 Hz by default)")
	compute := durationFlag(fs, "compute", 2*time.Millisecond, 0, 0, "default workload: inference task CPU time per period")
	hogs := intFlag(fs, "hogs", 2*runtime.NumCPU(), 0, 4096, "default workload: CPU hog threads (default: 2x the CPUs)")
	workloadName := fs.String("workload", workloads.WorkloadDefault, "the workload: "+strings.Join(workloads.BuiltinWorkloads, ", ")+" (see below), or a workload file (JSON, see workloads/examples/), which overrides --period, --compute and --hogs")
	cyclictest := fs.String("cyclictest", "cyclictest", "cyclictest (rt-tests) program; the default workload runs it beside the inference task as the outside view when it is found ('none': leave it out)")
	stressNg := fs.String("stress-ng", "stress-ng", "stress-ng program, for workloads that use it")
	hackbench := fs.String("hackbench", "hackbench", "hackbench (rt-tests) program, for workloads that use it")
	perf := fs.String("perf", "perf", "perf (linux-perf) program, for workloads that run perf bench sched")
	sysbench := fs.String("sysbench", "sysbench", "sysbench program, for workloads that use it")
	rtApp := fs.String("rt-app", "rt-app", "rt-app program, for workloads that use it")
	scxSimple := fs.String("scx-simple", vm.ScxSimpleGuestPath, "path of the kernel's scx_simple")
	scxQmap := fs.String("scx-qmap", vm.ScxQmapGuestPath, "path of the kernel's scx_qmap")
	bound := fs.String("bound", "inference:p99<=5ms", "latency bound hotlane must meet, checked on the tracer's run-queue latency of the class ('' for none)")
	out := fs.String("out", defaultOutDir(), "write report.txt, report.json, the SVG plots and, per variant, a trace of its worst waits over --bound (trace-VARIANT.json, as verify --trace) here")
	junitPath := fs.String("junit", "", "also write a JUnit XML report to this file: a test case per variant (an error if it did not run) and per clause of the bound")
	var comms listFlag
	fs.Var(&comms, "inference-comm", "comm prefix hotlane treats as inference (default: the lane's own comms: infer, cyclictest)")
	policyPath := fs.String("policy", "", "hotlane's policy file, and the tracer's classes, instead of the default policy (not with --inference-comm); e.g. device matchers, with a workload whose periodic task has \"device\"")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane bench [flags]
       hotlane bench hooks [flags]   (what each BPF hook kind costs; -h for its flags)

Runs the same workload under each variant in one boot, in alternating
order, with the run-queue latency tracer attached. The lane is the
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
`)
		printFlags(fs)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	// Every flag and file is checked before the privileges, and those
	// before anything is created, started or loaded.
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	opts := workloads.VariantOptions{ScxSimplePath: *scxSimple, ScxQmapPath: *scxQmap, FIFOPriority: *fifoPrio}
	for _, spec := range external {
		v, err := workloads.ParseScheduler(spec)
		if err != nil {
			return fail(err)
		}
		opts.External = append(opts.External, v)
	}
	variants, err := workloads.ParseVariants(*list, opts)
	if err != nil {
		return fail(err)
	}
	// The default baseline may be left out of the list (no ratios then);
	// one asked for by name must be compared, or the run is for nothing.
	if flagGiven(fs, "baseline") && !slices.ContainsFunc(variants, func(v workloads.Variant) bool { return v.Name == *baseline }) {
		return fail(fmt.Errorf("--baseline %s is not among the variants compared (%s): the ratios need it", *baseline, variantNames(variants)))
	}
	if err := checkDir("--out", *out); err != nil {
		return fail(err)
	}

	var mix workloads.Mix
	if *workloadName == workloads.WorkloadDefault {
		if *compute >= *period || *duration < 10**period {
			return fail(fmt.Errorf("need compute < period and a duration of at least 10 periods (got compute %s, period %s, duration %s)", *compute, *period, *duration))
		}
		mix = workloads.Mix{
			Periodic: []workloads.Periodic{{Comm: "infer", Period: *period, Compute: *compute}},
			Hogs:     []workloads.Hogs{{Comm: "hog", Threads: *hogs}},
		}
		if *cyclictest != "none" {
			if _, err := exec.LookPath(*cyclictest); err != nil {
				fmt.Fprintf(os.Stderr, "hotlane bench: %s not found: the outside view is left out (install rt-tests; in the VM add it with --add /usr/bin/cyclictest)\n", *cyclictest)
			} else {
				mix.Cyclictest = []workloads.Cyclictest{{Interval: *period, Threads: 1, Limit: workloads.DefaultCyclictestLimit}}
			}
		}
	} else if mix, err = workloads.LoadWorkload(*workloadName, runtime.NumCPU()); err != nil {
		return fail(err)
	}
	if err := mix.CheckTasks(); err != nil {
		return fail(err)
	}
	if !mix.HasLane() {
		return fail(fmt.Errorf("workload %s has no periodic task, no cyclictest and no decode server: the bench measures a lane", *workloadName))
	}
	// The workload's outside programs must be there: refuse, don't skip.
	for _, o := range []struct {
		paths          []*string
		name, pkg, def string
	}{
		{pathsOf(mix.Cyclictest, func(c *workloads.Cyclictest) *string { return &c.Path }), "cyclictest", "rt-tests", *cyclictest},
		{pathsOf(mix.StressNg, func(s *workloads.StressNg) *string { return &s.Path }), "stress-ng", "stress-ng", *stressNg},
		{pathsOf(mix.Hackbench, func(h *workloads.Hackbench) *string { return &h.Path }), "hackbench", "rt-tests", *hackbench},
		{pathsOf(mix.PerfBench, func(p *workloads.PerfBench) *string { return &p.Path }), "perf", "linux-perf", *perf},
		{pathsOf(mix.Sysbench, func(s *workloads.Sysbench) *string { return &s.Path }), "sysbench", "sysbench", *sysbench},
		{pathsOf(mix.RtApp, func(r *workloads.RtApp) *string { return &r.Path }), "rt-app", "rt-app", *rtApp},
	} {
		for _, p := range o.paths {
			if *p == "" {
				*p = o.def
			}
			if _, err := exec.LookPath(*p); err != nil {
				return fail(fmt.Errorf("the workload runs %s, but %s is not found: install %s (in the VM: --add /usr/bin/%s, or --judges) or give --%s PATH", o.name, *p, o.pkg, o.name, o.name))
			}
		}
	}

	var pol *policy.Policy
	if *policyPath != "" {
		if len(comms) > 0 {
			return fail(fmt.Errorf("--policy and --inference-comm both given: put the comms in the policy file"))
		}
		if pol, err = policy.Load(ctx, *policyPath); err != nil {
			return fail(err)
		}
	} else {
		if len(comms) == 0 {
			comms = mix.LaneComms()
		}
		pol = policy.Default(comms...)
		if err := pol.Validate(); err != nil {
			return fail(err)
		}
	}
	var bounds []verify.Bound
	if *bound != "" {
		if bounds, err = verify.ParseBounds(*bound, "inference"); err != nil {
			return fail(err)
		}
		for _, bd := range bounds {
			if _, ok := pol.Class(bd.Class); !ok {
				return fail(fmt.Errorf("bound for unknown class %q (classes: %v)", bd.Class, pol.ClassNames()))
			}
		}
	}

	// Loading schedulers and the tracer: fail before anything starts.
	if err := loader.RequireCapabilities("CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"); err != nil {
		return fail(err)
	}
	if err := requireDir("--out", *out); err != nil {
		return fail(err)
	}
	ci, err := createCIOutputs(*junitPath, os.Stdout)
	if err != nil {
		return fail(err)
	}
	started := time.Now()
	run, skipped := workloads.Preflight(variants, workloads.DetectHost())
	for _, s := range skipped {
		fmt.Fprintf(os.Stderr, "hotlane bench: skipping %s: %s\n", s.Name, s.Reason)
	}
	if len(run) == 0 {
		return fail(fmt.Errorf("none of the variants can run here"))
	}
	b := workloads.Bench{
		Variants: run,
		Workload: mix,
		Warmup:   *warmup, Duration: *duration, Repeats: *repeats,
		Policy:        pol,
		EnableTimeout: *enableTimeout,
		Progress:      os.Stderr,
		Bounds:        bounds,
	}
	// A signal here leaves the rounds to say so.
	unloaded, err := b.RunUnloaded(ctx)
	if err != nil && !errors.Is(err, report.ErrInterrupted) {
		return fail(err)
	}
	runs, err := b.Run(ctx)
	interrupted := errors.Is(err, report.ErrInterrupted)
	if err != nil && !interrupted {
		return fail(err)
	}
	rep := workloads.NewReport(started, runs, skipped, *baseline, bounds)
	rep.SetUnloaded(unloaded)
	if interrupted {
		rep.Interrupt()
	}
	if err := rep.WriteText(os.Stdout); err != nil {
		return fail(err)
	}
	files, err := writeBenchFiles(rep, *out)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "hotlane bench: %s in %s\n", strings.Join(files, ", "), *out)
	if slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, "trace-") }) {
		fmt.Fprintf(os.Stderr, "hotlane bench: each trace-VARIANT.json holds that variant's worst waits over the bound: %s\n", verify.HowToOpenTrace)
	}
	if err := ci.write("hotlane bench", started, rep.Cases(time.Since(started))); err != nil {
		return fail(err)
	}
	if !rep.Complete && !rep.Interrupted {
		return exitError
	}
	return exitCode(rep.Verdict)
}

func variantNames(vs []workloads.Variant) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	return strings.Join(names, ", ")
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

// pathsOf returns a pointer to each generator's program path.
func pathsOf[T any](gens []T, path func(*T) *string) []*string {
	out := make([]*string, len(gens))
	for i := range gens {
		out[i] = path(&gens[i])
	}
	return out
}
