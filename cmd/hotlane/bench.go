package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/workloads"
)

func runBench(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	list := fs.String("schedulers", "eevdf,scx_simple,scx_simple-f,hotlane", "comma-separated schedulers to compare: eevdf, scx_simple, scx_simple-f, hotlane")
	baseline := fs.String("baseline", "scx_simple", "scheduler the ratios are relative to")
	duration := fs.Duration("duration", 20*time.Second, "measured time per scheduler and repeat")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured time after each scheduler starts")
	repeats := fs.Int("repeats", 3, "rounds over the list, alternating the order")
	period := fs.Duration("period", 10*time.Millisecond, "inference task period (100 Hz by default)")
	compute := fs.Duration("compute", 2*time.Millisecond, "inference task CPU time per period")
	hogs := fs.Int("hogs", 2*runtime.NumCPU(), "CPU hog threads (default: 2x the CPUs)")
	scxSimple := fs.String("scx-simple", vm.ScxSimpleGuestPath, "path of the upstream scx_simple binary")
	var comms listFlag
	fs.Var(&comms, "inference-comm", "comm prefix hotlane treats as inference (default: the task's own comm, infer)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane bench [flags]

Runs the same workload - a periodic "inference" task over CPU hogs - under
each scheduler in one boot, and prints the task's wake-up lateness
percentiles and the hogs' throughput per scheduler, with ratios to the
baseline. Needs a sched_ext kernel: run it inside 'hotlane vm --scx-simple'.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	scheds, err := workloads.ParseSchedulers(*list)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	if *compute >= *period || *duration < 10**period {
		fmt.Fprintf(os.Stderr, "hotlane bench: need compute < period and a duration of at least 10 periods (got compute %s, period %s, duration %s)\n", *compute, *period, *duration)
		return exitError
	}
	b := workloads.Bench{
		Schedulers: scheds,
		Workload: workloads.Mix{
			Periodic: []workloads.Periodic{{Comm: "infer", Period: *period, Compute: *compute}},
			Hogs:     []workloads.Hogs{{Comm: "hog", Threads: *hogs}},
		},
		Warmup: *warmup, Duration: *duration, Repeats: *repeats,
		ScxSimplePath: *scxSimple,
		Policy:        policy.Default(comms...),
		Progress:      os.Stderr,
	}
	runs, err := b.Run(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	if err := workloads.WriteReport(os.Stdout, runs, *baseline); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane bench: %v\n", err)
		return exitError
	}
	for _, r := range runs {
		if r.Failure != "" {
			return exitError
		}
	}
	return exitOK
}
