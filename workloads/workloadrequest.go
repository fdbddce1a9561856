package workloads

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/hotlane/hotlane/report"
)

// A WorkloadRequest is what a workload command line asks for, as given:
// Mix builds and checks the workload to run, WriteText says what it
// measured. Its errors name the command's flags, for they are what the
// user has to change.
type WorkloadRequest struct {
	Duration time.Duration
	// File is a workload file; "" is the default workload, a periodic
	// task of Threads threads called Comm over Hogs CPU hogs.
	File    string
	Period  time.Duration
	Compute time.Duration
	Threads int
	Comm    string
	Hogs    int
}

// Mix is the workload to run: the file's, else the default one.
func (r WorkloadRequest) Mix() (Mix, error) {
	mix := Mix{
		Periodic: []Periodic{{Comm: r.Comm, Period: r.Period, Compute: r.Compute, Threads: r.Threads}},
		Hogs:     []Hogs{{Comm: "hog", Threads: r.Hogs}},
	}
	if r.File != "" {
		var err error
		if mix, err = LoadWorkload(r.File, runtime.NumCPU()); err != nil {
			return Mix{}, err
		}
	}
	if err := mix.CheckTasks(); err != nil {
		return Mix{}, fmt.Errorf("--threads and --hogs: %w", err)
	}
	return mix, nil
}

// WriteMixText writes what each generator of mix measured in res, a run
// that took took: the periodic tasks' lateness as a table, a line for
// each other generator.
func WriteMixText(w io.Writer, mix Mix, res MixResult, took time.Duration) error {
	t := report.Table{Header: append(append([]string{"periodic task"}, report.LatencyColumns()...), "missed")}
	for i, p := range mix.Periodic {
		t.Add(append(append([]string{p.Comm}, report.Summarize(&res.Periodic[i].Lateness).Cells()...), fmt.Sprint(res.Periodic[i].Missed))...)
	}
	if len(mix.Periodic) > 0 {
		fmt.Fprintln(w, "wake-up lateness (the tasks' own measurement):")
		if err := t.WriteText(w); err != nil {
			return err
		}
	}
	secs := took.Seconds()
	for i, h := range mix.Hogs {
		fmt.Fprintf(w, "hogs %s: %d threads, %.1f Mloops/s\n", h.Comm, h.Threads, float64(res.HogWork[i])/secs/1e6)
	}
	for i, g := range mix.Messaging {
		fmt.Fprintf(w, "messaging %s: %d pairs, %.0f round trips/s\n", g.Comm, g.Pairs, float64(res.RoundTrips[i])/secs)
	}
	for i, rs := range mix.RequestServers {
		r := &res.RequestServers[i]
		wu, q := report.Summarize(&r.WakeUp), report.Summarize(&r.Request)
		fmt.Fprintf(w, "request server %s: %d served (%.0f/s), %d unfinished; wake-up p50 %s p99 %s max %s; request p50 %s p99 %s max %s\n",
			rs.Comm, r.Served, r.PerSecond(), r.Unfinished, report.Duration(wu.P50), report.Duration(wu.P99), report.Duration(wu.Max),
			report.Duration(q.P50), report.Duration(q.P99), report.Duration(q.Max))
	}
	for _, d := range DecodeSummaries(res.Decode) {
		fmt.Fprintf(w, "decode %s: %.1f tokens/s, %d requests; TTFT p50 %s p99 %s; inter-token p50 %s p99 %s max %s\n",
			d.Name, d.TokensPerSecond, d.Requests, report.Duration(d.TTFT.P50), report.Duration(d.TTFT.P99),
			report.Duration(d.ITL.P50), report.Duration(d.ITL.P99), report.Duration(d.ITL.Max))
	}
	for _, j := range res.Judgements {
		if f, ok := j.Figure(); ok {
			fmt.Fprintf(w, "%s: %d runs, %s %.4g %s\n", j.Judge, j.Runs, f.Name, f.Value, f.Unit)
		} else {
			fmt.Fprintf(w, "%s: %d runs, no figure (no run finished)\n", j.Judge, j.Runs)
		}
	}
	return nil
}
