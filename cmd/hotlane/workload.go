package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/hotlane/hotlane/workloads"
)

const workloadUsage = `Usage: hotlane workload [flags]

Runs a periodic "inference" task (a fixed amount of CPU work every period,
woken by an absolute timer) over CPU hogs, and prints the task's own wake-up
lateness: an application-level view to set beside 'hotlane verify'. With
--file, any workload file's generators, and what its request servers,
decode servers and outside judges measured.

Flags:
`

// workloadFlags are the flags of hotlane workload.
type workloadFlags struct {
	duration, period, compute *time.Duration
	threads, hogs             *int
	comm, file                *string
}

func newWorkloadFlags(fs *flag.FlagSet) *workloadFlags {
	f := &workloadFlags{}
	f.duration = durationFlag(fs, "duration", 10*time.Second, time.Millisecond, 0, "how long to run")
	f.period = durationFlag(fs, "period", 10*time.Millisecond, workloads.MinPeriod, 0, "inference task period (100 Hz by default)")
	f.compute = durationFlag(fs, "compute", 2*time.Millisecond, 0, 0, "inference task CPU time per period")
	f.threads = intFlag(fs, "threads", 1, 1, 1024, "inference threads, each with its own timer")
	f.comm = fs.String("comm", "infer", "inference threads' name (comm), what policies match on")
	f.hogs = intFlag(fs, "hogs", 2*runtime.NumCPU(), 0, 4096, "CPU hog threads (default: 2x the CPUs)")
	f.file = fs.String("file", "", "workload file (JSON, see workloads/examples/); overrides the other workload flags")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), workloadUsage)
		printFlags(fs)
	}
	return f
}

// request is what the parsed flags ask the workload for.
func (f *workloadFlags) request() workloads.WorkloadRequest {
	return workloads.WorkloadRequest{
		Duration: *f.duration, File: *f.file,
		Period: *f.period, Compute: *f.compute, Threads: *f.threads, Comm: *f.comm, Hogs: *f.hogs,
	}
}

func runWorkload(ctx context.Context, args []string) int {
	return runCommand(ctx, "workload", args, newWorkloadFlags, func(ctx context.Context, _ *flag.FlagSet, f *workloadFlags) (int, error) {
		return workloadRun(ctx, f.request())
	})
}

// workloadRun runs the workload req asks for, for its duration, and says
// what it measured.
func workloadRun(ctx context.Context, req workloads.WorkloadRequest) (int, error) {
	mix, err := req.Mix()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, req.Duration)
	defer cancel()
	start := time.Now()
	res, err := mix.Run(ctx)
	if err != nil {
		return 0, err
	}
	if err := workloads.WriteMixText(os.Stdout, mix, res, time.Since(start)); err != nil {
		return 0, err
	}
	return exitOK, nil
}
