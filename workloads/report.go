package workloads

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// latencySummary condenses one run's lateness. Percentiles are the upper
// edges of their histogram buckets (at most 3.2% above the true value),
// the same conservative reading bound checks use.
type latencySummary struct {
	Samples             uint64
	Missed              int
	P50, P90, P99, P999 time.Duration
	Max                 time.Duration
}

func summarize(p PeriodicResult) latencySummary {
	h := &p.Lateness
	q := func(q float64) time.Duration { return time.Duration(h.QuantileUpper(q)) }
	return latencySummary{
		Samples: h.Count(), Missed: p.Missed,
		P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999),
		Max: time.Duration(h.Max()),
	}
}

// WriteReport writes the bench results as a text table: per scheduler the
// periodic task's wake-up lateness percentiles and the background
// throughput, with ratios to the baseline scheduler.
func WriteReport(w io.Writer, runs []Run, baseline string) error {
	var base *Run
	for i := range runs {
		if runs[i].Scheduler == baseline {
			base = &runs[i]
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "scheduler\tsamples\tmissed\tp50\tp90\tp99\tp99.9\tmax\thog Mloops/s\tp99 vs %s\thog vs %s\t\n", baseline, baseline)
	for _, r := range runs {
		for gi, p := range r.Periodic {
			s := summarize(p)
			name := r.Scheduler
			if len(r.Periodic) > 1 {
				name = fmt.Sprintf("%s[%d]", r.Scheduler, gi)
			}
			p99Ratio, hogRatio := "-", "-"
			if base != nil && gi < len(base.Periodic) {
				if b := summarize(base.Periodic[gi]); b.P99 > 0 {
					p99Ratio = fmt.Sprintf("%.3f", float64(s.P99)/float64(b.P99))
				}
				if base.HogRate() > 0 {
					hogRatio = fmt.Sprintf("%.3f", r.HogRate()/base.HogRate())
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t\n", name, s.Samples, s.Missed,
				fmtDur(s.P50), fmtDur(s.P90), fmtDur(s.P99), fmtDur(s.P999), fmtDur(s.Max), r.HogRate()/1e6, p99Ratio, hogRatio)
		}
		if r.Failure != "" {
			fmt.Fprintf(tw, "%s\tFAILED: %s\t\n", r.Scheduler, r.Failure)
		}
	}
	return tw.Flush()
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	}
}
