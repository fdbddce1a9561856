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
	duration := durationFlag(fs, "duration", 10*time.Second, time.Millisecond, 0, "how long to run")
	period := durationFlag(fs, "period", 10*time.Millisecond, workloads.MinPeriod, 0, "inference task period (100 Hz by default)")
	compute := durationFlag(fs, "compute", 2*time.Millisecond, 0, 0, "inference task CPU time per period")
	threads := intFlag(fs, "threads", 1, 1, 1024, "inference threads, each with its own timer")
	comm := fs.String("comm", "infer", "inference threads' name (comm), what policies match on")
	hogs := intFlag(fs, "hogs", 2*runtime.NumCPU(), 0, 4096, "CPU hog threads (default: 2x the CPUs)")
	file := fs.String("file", "", "workload file (JSON, see workloads/examples/); overrides the other workload flags")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane workload [flags]

Runs a periodic "inference" task (a fixed amount of CPU work every period,
woken by an absolute timer) over CPU hogs, and prints the task's own wake-up
lateness: an application-level view to set beside 'hotlane verify'. With
--file, any workload file's generators, and what its request servers,
decode servers and outside judges measured.

Flags:
`)
		printFlags(fs)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	mix := workloads.Mix{
		Periodic: []workloads.Periodic{{Comm: *comm, Period: *period, Compute: *compute, Threads: *threads}},
		Hogs:     []workloads.Hogs{{Comm: "hog", Threads: *hogs}},
	}
	if *file != "" {
		var err error
		if mix, err = workloads.LoadWorkload(*file, runtime.NumCPU()); err != nil {
			fmt.Fprintf(os.Stderr, "hotlane workload: %v\n", err)
			return exitError
		}
	}
	if err := mix.CheckTasks(); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane workload: --threads and --hogs: %v\n", err)
		return exitError
	}
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	start := time.Now()
	res, err := mix.Run(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane workload: %v\n", err)
		return exitError
	}
	took := time.Since(start).Seconds()
	t := report.Table{Header: append(append([]string{"periodic task"}, report.LatencyColumns()...), "missed")}
	for i, p := range mix.Periodic {
		t.Add(append(append([]string{p.Comm}, report.Summarize(&res.Periodic[i].Lateness).Cells()...), fmt.Sprint(res.Periodic[i].Missed))...)
	}
	if len(mix.Periodic) > 0 {
		fmt.Println("wake-up lateness (the tasks' own measurement):")
		if err := t.WriteText(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "hotlane workload: %v\n", err)
			return exitError
		}
	}
	for i, h := range mix.Hogs {
		fmt.Printf("hogs %s: %d threads, %.1f Mloops/s\n", h.Comm, h.Threads, float64(res.HogWork[i])/took/1e6)
	}
	for i, g := range mix.Messaging {
		fmt.Printf("messaging %s: %d pairs, %.0f round trips/s\n", g.Comm, g.Pairs, float64(res.RoundTrips[i])/took)
	}
	for i, rs := range mix.RequestServers {
		r := &res.RequestServers[i]
		w, q := report.Summarize(&r.WakeUp), report.Summarize(&r.Request)
		fmt.Printf("request server %s: %d served (%.0f/s), %d unfinished; wake-up p50 %s p99 %s max %s; request p50 %s p99 %s max %s\n",
			rs.Comm, r.Served, r.PerSecond(), r.Unfinished, report.Duration(w.P50), report.Duration(w.P99), report.Duration(w.Max),
			report.Duration(q.P50), report.Duration(q.P99), report.Duration(q.Max))
	}
	for _, d := range workloads.DecodeSummaries(res.Decode) {
		fmt.Printf("decode %s: %.1f tokens/s, %d requests; TTFT p50 %s p99 %s; inter-token p50 %s p99 %s max %s\n",
			d.Name, d.TokensPerSecond, d.Requests, report.Duration(d.TTFT.P50), report.Duration(d.TTFT.P99),
			report.Duration(d.ITL.P50), report.Duration(d.ITL.P99), report.Duration(d.ITL.Max))
	}
	for _, j := range res.Judgements {
		if f, ok := j.Figure(); ok {
			fmt.Printf("%s: %d runs, %s %.4g %s\n", j.Judge, j.Runs, f.Name, f.Value, f.Unit)
		} else {
			fmt.Printf("%s: %d runs, no figure (no run finished)\n", j.Judge, j.Runs)
		}
	}
	return exitOK
}
