package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/workloads"
)

func runBench(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	list := fs.String("schedulers", "eevdf,scx_simple,scx_simple-f,hotlane", "comma-separated schedulers to compare: eevdf, scx_simple, scx_simple-f, hotlane")
	baseline := fs.String("baseline", "scx_simple", "scheduler the ratios are relative to")
	duration := fs.Duration("duration", 20*time.Second, "measured time per scheduler and repeat")
	warmup := durationFlag(fs, "warmup", 2*time.Second, 0, 0, "unmeasured time after each scheduler starts")
	repeats := intFlag(fs, "repeats", 3, 1, 100, "rounds over the list, alternating the order")
	period := fs.Duration("period", 10*time.Millisecond, "inference task period (100 Hz by default)")
	compute := durationFlag(fs, "compute", 2*time.Millisecond, 0, 0, "inference task CPU time per period")
	hogs := intFlag(fs, "hogs", 2*runtime.NumCPU(), 0, 4096, "CPU hog threads (default: 2x the CPUs)")
	workloadFile := fs.String("workload", "", "workload file (JSON, see workloads/examples/); overrides --period, --compute and --hogs")
	scxSimple := fs.String("scx-simple", vm.ScxSimpleGuestPath, "path of the upstream scx_simple binary")
	bound := fs.String("bound", "inference:p99<=5ms", "latency bound hotlane must meet, checked on the tracer's run-queue latency ('' for none)")
	out := fs.String("out", defaultOutDir(), "write report.txt, report.json and cdf-inference.svg here")
	var comms listFlag
	fs.Var(&comms, "inference-comm", "comm prefix hotlane treats as inference (default: the task's own comm, infer)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane bench [flags]

Runs the same workload - a periodic "inference" task over CPU hogs - under
each scheduler in one boot, with the run-queue latency tracer attached,
and reports per scheduler and class the tracer's latency percentiles, the
task's own wake-up lateness, and the hogs' throughput, with ratios to the
baseline, then checks hotlane against the bound. Needs a sched_ext kernel:
run it inside 'hotlane vm --scx-simple'.

Exit status: 0 all schedulers ran and hotlane met the bound, 1 the bound
failed, 2 error (including a scheduler that failed to load or ended).

Flags:
`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	// Loading schedulers and the tracer: fail before anything starts.
	if err := loader.RequireCapabilities("CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	scheds, err := workloads.ParseSchedulers(*list)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	pol := policy.Default(comms...)
	var bounds []verify.Bound
	if *bound != "" {
		if bounds, err = verify.ParseBounds(*bound, "inference"); err != nil {
			fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
			return exitError
		}
		for _, bd := range bounds {
			if _, ok := pol.Class(bd.Class); !ok {
				fmt.Fprintf(os.Stderr, "hotlane bench: bound for unknown class %q (classes: %v)\n", bd.Class, pol.ClassNames())
				return exitError
			}
		}
	}
	if err := requireDir("--out", *out); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	if *compute >= *period || *duration < 10**period {
		fmt.Fprintf(os.Stderr, "hotlane bench: need compute < period and a duration of at least 10 periods (got compute %s, period %s, duration %s)\n", *compute, *period, *duration)
		return exitError
	}
	mix := workloads.Mix{
		Periodic: []workloads.Periodic{{Comm: "infer", Period: *period, Compute: *compute}},
		Hogs:     []workloads.Hogs{{Comm: "hog", Threads: *hogs}},
	}
	if *workloadFile != "" {
		if mix, err = workloads.LoadWorkload(*workloadFile, runtime.NumCPU()); err != nil {
			fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
			return exitError
		}
	}
	b := workloads.Bench{
		Schedulers: scheds,
		Workload:   mix,
		Warmup:     *warmup, Duration: *duration, Repeats: *repeats,
		ScxSimplePath: *scxSimple,
		Policy:        pol,
		Progress:      os.Stderr,
	}
	runs, err := b.Run(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	rep := workloads.NewReport(runs, *baseline, bounds)
	if err := rep.WriteText(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	if err := writeBenchFiles(rep, *out); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	fmt.Fprintf(os.Stderr, "hotlane bench: report.txt, report.json and cdf-inference.svg in %s\n", *out)
	switch {
	case !rep.Complete:
		return exitError
	case !rep.Pass:
		return exitFail
	}
	return exitOK
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
// before the run); a file that fails half-written is removed.
func writeBenchFiles(rep *workloads.Report, dir string) error {
	write := func(name string, fn func(io.Writer) error) error {
		out, err := createOutput(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		return out.write(fn)
	}
	if err := write("report.txt", rep.WriteText); err != nil {
		return err
	}
	if err := write("report.json", rep.WriteJSON); err != nil {
		return err
	}
	return write("cdf-inference.svg", func(w io.Writer) error { return rep.WriteCDF(w, "inference") })
}
