package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/workloads"
)

func runWorkload(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	duration := fs.Duration("duration", 10*time.Second, "how long to run")
	period := fs.Duration("period", 10*time.Millisecond, "inference task period (100 Hz by default)")
	compute := fs.Duration("compute", 2*time.Millisecond, "inference task CPU time per period")
	threads := fs.Int("threads", 1, "inference threads, each with its own timer")
	comm := fs.String("comm", "infer", "inference threads' name (comm), what policies match on")
	hogs := fs.Int("hogs", 2*runtime.NumCPU(), "CPU hog threads (default: 2x the CPUs)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane workload [flags]

Runs a periodic "inference" task (a fixed amount of CPU work every period,
woken by an absolute timer) over CPU hogs, and prints the task's own wake-up
lateness: an application-level view to set beside 'hotlane verify'.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *duration <= 0 {
		fmt.Fprintf(os.Stderr, "hotlane workload: --duration must be positive\n")
		return exitError
	}
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	start := time.Now()
	res, err := workloads.Mix{
		Periodic: []workloads.Periodic{{Comm: *comm, Period: *period, Compute: *compute, Threads: *threads}},
		Hogs:     []workloads.Hogs{{Comm: "hog", Threads: *hogs}},
	}.Run(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane workload: %v\n", err)
		return exitError
	}
	took := time.Since(start)
	t := report.Table{Header: append(append([]string{"task"}, report.LatencyColumns()...), "missed", "hog Mloops/s")}
	t.Add(append(append([]string{*comm}, report.Summarize(&res.Periodic[0].Lateness).Cells()...),
		fmt.Sprint(res.Periodic[0].Missed), fmt.Sprintf("%.1f", float64(res.HogWork[0])/took.Seconds()/1e6))...)
	fmt.Println("wake-up lateness (the task's own measurement):")
	if err := t.WriteText(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane workload: %v\n", err)
		return exitError
	}
	return exitOK
}
