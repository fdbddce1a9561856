package workloads

import (
	"fmt"
	"io"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// Report is a bench's outcome: every scheduler's runs, the baseline the
// ratios are taken against, and hotlane's bound verdict.
type Report struct {
	Runs     []Run                  `json:"runs"`
	Baseline string                 `json:"baseline"`
	Bounds   []verify.ClassVerdicts `json:"bounds,omitempty"`
	// Pass: every scheduler ran to the end and hotlane met the bounds.
	Pass bool `json:"pass"`
	// Complete: every scheduler ran to the end.
	Complete bool `json:"complete"`
}

// NewReport checks the bounds against hotlane's tracer histograms.
func NewReport(runs []Run, baseline string, bounds []verify.Bound) *Report {
	r := &Report{Runs: runs, Baseline: baseline, Pass: true, Complete: true}
	for _, run := range runs {
		if run.Failure != "" {
			r.Complete, r.Pass = false, false
		}
	}
	hot := r.run(HotlaneName)
	for _, b := range bounds {
		h := &verify.Histogram{}
		if hot != nil {
			h = hot.class(b.Class)
		}
		cv := verify.ClassVerdicts{Class: b.Class, Verdicts: b.Check(h)}
		for _, v := range cv.Verdicts {
			r.Pass = r.Pass && v.Pass
		}
		r.Bounds = append(r.Bounds, cv)
	}
	return r
}

func (r *Report) run(name string) *Run {
	for i := range r.Runs {
		if r.Runs[i].Scheduler == name {
			return &r.Runs[i]
		}
	}
	return nil
}

// class returns the tracer's histogram of a class; empty when the run has
// none (a scheduler that failed to load).
func (r Run) class(name string) *verify.Histogram {
	for _, c := range r.Classes {
		if c.Class == name && c.Hist != nil {
			return c.Hist
		}
	}
	return &verify.Histogram{}
}

// ratio formats a/b, or "-" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", a/b)
}

// WriteText writes the report for people: the tracer's run-queue latency
// per class, the application's own lateness, background throughput, and
// the verdict.
func (r *Report) WriteText(w io.Writer) error {
	base := r.run(r.Baseline)
	var classes []string
	if len(r.Runs) > 0 {
		for _, c := range r.Runs[0].Classes {
			classes = append(classes, c.Class)
		}
	}
	for _, class := range classes {
		fmt.Fprintf(w, "run-queue latency, class %s (tracer; percentiles are bucket upper edges):\n", class)
		t := report.Table{Header: append(append([]string{"scheduler"}, report.LatencyColumns()...), "p99 vs "+r.Baseline)}
		var baseP99 float64
		if base != nil {
			baseP99 = float64(report.Summarize(base.class(class)).P99)
		}
		for _, run := range r.Runs {
			s := report.Summarize(run.class(class))
			t.Add(append(append([]string{run.Scheduler}, s.Cells()...), ratio(float64(s.P99), baseP99))...)
		}
		if err := t.WriteText(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "application view: periodic task wake-up lateness, and background throughput:")
	t := report.Table{Header: append(append([]string{"scheduler"}, report.LatencyColumns()...),
		"missed", "p99 vs "+r.Baseline, "hog Mloops/s", "hog vs "+r.Baseline)}
	for _, run := range r.Runs {
		for gi := range run.Periodic {
			s := report.Summarize(&run.Periodic[gi].Lateness)
			name := run.Scheduler
			if len(run.Periodic) > 1 {
				name = fmt.Sprintf("%s[%d]", run.Scheduler, gi)
			}
			p99Ratio, hogRatio := "-", "-"
			if base != nil && gi < len(base.Periodic) {
				p99Ratio = ratio(float64(s.P99), float64(report.Summarize(&base.Periodic[gi].Lateness).P99))
				hogRatio = ratio(run.HogRate(), base.HogRate())
			}
			t.Add(append(append([]string{name}, s.Cells()...),
				fmt.Sprint(run.Periodic[gi].Missed), p99Ratio, fmt.Sprintf("%.1f", run.HogRate()/1e6), hogRatio)...)
		}
	}
	if err := t.WriteText(w); err != nil {
		return err
	}

	fmt.Fprintln(w)
	for _, run := range r.Runs {
		if run.Failure != "" {
			fmt.Fprintf(w, "%s FAILED: %s\n", run.Scheduler, run.Failure)
		}
		if run.TracerLosses > 0 {
			fmt.Fprintf(w, "%s: the tracer lost %d events\n", run.Scheduler, run.TracerLosses)
		}
	}
	for _, b := range r.Bounds {
		for _, v := range b.Verdicts {
			fmt.Fprintf(w, "hotlane %s %s\n", b.Class, v)
		}
	}
	verdict := "PASS"
	switch {
	case !r.Complete:
		verdict = "INCOMPLETE: a scheduler failed to load or ended mid-run"
	case !r.Pass:
		verdict = "FAIL: hotlane missed the bound"
	case len(r.Bounds) == 0:
		verdict = "PASS (no bound given)"
	}
	_, err := fmt.Fprintf(w, "verdict: %s\n", verdict)
	return err
}

// WriteJSON writes the report for machines.
func (r *Report) WriteJSON(w io.Writer) error {
	return report.WriteJSON(w, r)
}
