package workloads

import (
	"fmt"
	"io"

	"github.com/hotlane/hotlane/report"
)

// WriteReport writes the bench results as a text table: per scheduler the
// periodic task's wake-up lateness percentiles, its missed periods and the
// background throughput, with ratios to the baseline scheduler.
func WriteReport(w io.Writer, runs []Run, baseline string) error {
	var base *Run
	for i := range runs {
		if runs[i].Scheduler == baseline {
			base = &runs[i]
		}
	}
	t := report.Table{Header: append(append([]string{"scheduler"}, report.LatencyColumns()...),
		"missed", "hog Mloops/s", "p99 vs "+baseline, "hog vs "+baseline)}
	var failures []string
	for _, r := range runs {
		for gi := range r.Periodic {
			s := report.Summarize(&r.Periodic[gi].Lateness)
			name := r.Scheduler
			if len(r.Periodic) > 1 {
				name = fmt.Sprintf("%s[%d]", r.Scheduler, gi)
			}
			p99Ratio, hogRatio := "-", "-"
			if base != nil && gi < len(base.Periodic) {
				if b := report.Summarize(&base.Periodic[gi].Lateness); b.P99 > 0 {
					p99Ratio = fmt.Sprintf("%.3f", float64(s.P99)/float64(b.P99))
				}
				if base.HogRate() > 0 {
					hogRatio = fmt.Sprintf("%.3f", r.HogRate()/base.HogRate())
				}
			}
			row := append(append([]string{name}, s.Cells()...),
				fmt.Sprint(r.Periodic[gi].Missed), fmt.Sprintf("%.1f", r.HogRate()/1e6), p99Ratio, hogRatio)
			t.Add(row...)
		}
		if r.Failure != "" {
			failures = append(failures, fmt.Sprintf("%s FAILED: %s", r.Scheduler, r.Failure))
		}
	}
	if err := t.WriteText(w); err != nil {
		return err
	}
	for _, f := range failures {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return err
		}
	}
	return nil
}
