package workloads

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// Sources of the rest-of-the-machine figures.
const (
	SourceTracer        = "tracer"         // the run-queue tracer, fair classes
	SourceLane          = "lane"           // the run-queue tracer, the lane's threads
	SourceJudge         = "judge"          // an outside judge's own figure
	SourceRequestServer = "request server" // our request server's own figures
)

// RestFigure is one line of the rest-of-the-machine table: what the
// variant left everyone else, beside the baseline's.
type RestFigure struct {
	Figure
	Source string `json:"source"`
	// Baseline is the baseline variant's figure, and VsBaseline this
	// figure over it (both 0 when the baseline has none).
	Baseline   float64 `json:"baseline,omitempty"`
	VsBaseline float64 `json:"vs_baseline,omitempty"`
}

// restFigures are the run's figures for the rest of the machine: the fair
// classes' wake-up latency (tracer), each judge's own figure, each
// request server's, and the lane's wake-up latency beside them.
func restFigures(run *Run) []RestFigure {
	var out []RestFigure
	latency := func(source, name string, h *verify.Histogram) {
		if h == nil || h.Count() == 0 {
			return
		}
		l := report.Summarize(h)
		for _, q := range []struct {
			what string
			v    time.Duration
		}{{"p50", l.P50}, {"p99", l.P99}, {"max", l.Max}} {
			out = append(out, RestFigure{Source: source, Figure: Figure{Name: name + " " + q.what, Unit: "ns", Value: float64(q.v)}})
		}
	}
	latency(SourceTracer, "fair wake-up", run.Fair)
	for i := range run.Judgements {
		if f, ok := run.Judgements[i].Figure(); ok {
			out = append(out, RestFigure{Source: SourceJudge, Figure: f})
		}
	}
	for i := range run.RequestServers {
		s := &run.RequestServers[i]
		name := "request-server"
		if len(run.RequestServers) > 1 {
			name = fmt.Sprintf("request-server#%d", i+1)
		}
		if s.Served > 0 {
			out = append(out,
				RestFigure{Source: SourceRequestServer, Figure: Figure{Name: name, Unit: "requests/s", Value: s.PerSecond(), HigherIsBetter: true}},
				RestFigure{Source: SourceRequestServer, Figure: Figure{Name: name + " request p99", Unit: "ns", Value: float64(s.Request.QuantileUpper(0.99))}},
				RestFigure{Source: SourceRequestServer, Figure: Figure{Name: name + " wake-up p99", Unit: "ns", Value: float64(s.WakeUp.QuantileUpper(0.99))}})
		}
	}
	latency(SourceLane, "lane wake-up", run.Lane)
	return out
}

// withBaseline sets each figure's baseline and ratio from base's figure of
// the same name.
func withBaseline(figs, base []RestFigure) []RestFigure {
	for i := range figs {
		for _, b := range base {
			if b.Name == figs[i].Name && b.Value > 0 {
				figs[i].Baseline, figs[i].VsBaseline = b.Value, figs[i].Value/b.Value
			}
		}
	}
	return figs
}

// formatFigure writes a figure's value in its unit.
func formatFigure(v float64, unit string) string {
	if unit == "ns" {
		return report.Duration(time.Duration(v))
	}
	return formatRate(v) + " " + unit
}

// writeRest writes, per variant, the rest-of-the-machine table: what the
// lane cost everyone else, as the tracer and the outside judges saw it,
// beside the baseline's figures.
func (r *Report) writeRest(w io.Writer) error {
	out := report.NewWriter(w)
	for _, run := range r.Runs {
		s := run.summary()
		if len(s.Rest) == 0 {
			continue
		}
		out.Printf("\nrest of the machine under %s: the fair classes' wake-up latency (tracer), each judge's own figure,\n", run.Scheduler)
		out.Printf("the request server's, and the lane's beside them; the ratio is %s's figure over %s's:\n", run.Scheduler, r.Baseline)
		t := report.Table{Header: []string{"figure", "better", run.Scheduler, r.Baseline, "ratio"}}
		for _, f := range s.Rest {
			better := "lower"
			if f.HigherIsBetter {
				better = "higher"
			}
			base := "-"
			if f.Baseline > 0 {
				base = formatFigure(f.Baseline, f.Unit)
			}
			t.Add(f.Name, better, formatFigure(f.Value, f.Unit), base, ratio(f.VsBaseline))
		}
		out.Do(t.WriteText)
	}
	return out.Err()
}

// writeJudges writes the outside judges' own figures per variant: runs,
// work, latency, missed periods.
func (r *Report) writeJudges(w io.Writer) error {
	var rows [][]string
	for _, run := range r.Runs {
		if run.Rounds == 0 {
			continue // it failed before it measured anything; it says so below
		}
		for i := range run.Judgements {
			j := &run.Judgements[i]
			fig := "-"
			if f, ok := j.Figure(); ok {
				fig = formatFigure(f.Value, f.Unit)
			}
			lat := report.Latency{}
			if j.Latency != nil {
				lat = report.Summarize(j.Latency)
			}
			c := lat.Cells()
			rows = append(rows, []string{j.Judge, run.Scheduler, fmt.Sprint(j.Runs), fig, orDefault(j.LatencyOf, "-"), c[1], c[3], c[5], fmt.Sprint(j.Missed)})
		}
		for i := range run.RequestServers {
			s := &run.RequestServers[i]
			wake, req := report.Summarize(&s.WakeUp).Cells(), report.Summarize(&s.Request).Cells()
			rows = append(rows,
				[]string{"request-server", run.Scheduler, fmt.Sprint(s.Served), formatFigure(s.PerSecond(), "requests/s"), "wake-up", wake[1], wake[3], wake[5], fmt.Sprint(s.Unfinished)},
				[]string{"request-server", run.Scheduler, fmt.Sprint(s.Served), formatFigure(s.PerSecond(), "requests/s"), "request", req[1], req[3], req[5], fmt.Sprint(s.Unfinished)})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	out := report.NewWriter(w)
	out.Printf("\noutside judges, each in its own words (runs: finished runs, or requests served; missed: periods overrun,\n")
	out.Printf("or requests unfinished; latency percentiles from the judge's own samples):\n")
	t := report.Table{Header: []string{"judge", "variant", "runs", "figure", "latency of", "p50", "p99", "max", "missed"}, Rows: rows}
	out.Do(t.WriteText)
	return out.Err()
}

// LabeledReport is a bench report with what tells it apart from others
// in a comparison (the machine it ran on: "16 CPUs").
type LabeledReport struct {
	Label  string
	Report *Report
}

// WriteRestMarkdown writes the rest-of-the-machine figures of several
// benches (make scale: one per machine size) as one Markdown table: per
// bench and figure, each variant's value and its ratio to the bench's
// baseline, and a line saying which variants failed or were skipped.
func WriteRestMarkdown(w io.Writer, reports []LabeledReport) error {
	var variants []string
	for _, lr := range reports {
		for _, run := range lr.Report.Runs {
			if !slices.Contains(variants, run.Scheduler) {
				variants = append(variants, run.Scheduler)
			}
		}
	}
	out := report.NewWriter(w)
	out.Printf("| machine | figure | better | %s |\n", strings.Join(variants, " | "))
	out.Printf("|%s\n", strings.Repeat(" --- |", 3+len(variants)))
	for _, lr := range reports {
		rep := lr.Report
		var status []string
		for _, s := range rep.Skipped {
			status = append(status, s.Name+" skipped: "+s.Reason)
		}
		var names []string
		byVariant := map[string]map[string]RestFigure{}
		for _, run := range rep.Runs {
			if run.Failure != "" {
				status = append(status, run.Scheduler+" failed: "+run.Failure)
			}
			if run.Rounds == 0 {
				continue
			}
			byVariant[run.Scheduler] = map[string]RestFigure{}
			// A figure one variant lacks (a judge that finished no run)
			// keeps its place among the others.
			at := 0
			for _, f := range run.summary().Rest {
				byVariant[run.Scheduler][f.Name] = f
				if i := slices.Index(names, f.Name); i >= 0 {
					at = i + 1
					continue
				}
				names = slices.Insert(names, at, f.Name)
				at++
			}
		}
		if len(status) == 0 {
			status = []string{"every variant ran to the end"}
		}
		row := append([]string{lr.Label, mdEscape(strings.Join(status, "; ")), ""}, make([]string, len(variants))...)
		out.Printf("| %s |\n", strings.Join(row, " | "))
		for _, name := range names {
			cells := []string{lr.Label, name, "lower"}
			for _, v := range variants {
				f, ok := byVariant[v][name]
				switch {
				case !ok:
					cells = append(cells, "-")
					continue
				case f.HigherIsBetter:
					cells[2] = "higher"
				}
				cell := formatFigure(f.Value, f.Unit)
				if v != rep.Baseline && f.VsBaseline > 0 {
					cell += fmt.Sprintf(" (%s)", ratio(f.VsBaseline))
				}
				cells = append(cells, cell)
			}
			out.Printf("| %s |\n", strings.Join(cells, " | "))
		}
	}
	return out.Err()
}

// mdEscape keeps text inside one Markdown table cell.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
