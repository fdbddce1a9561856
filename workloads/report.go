package workloads

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/verify"
)

// The views of the lane's latency.
const (
	// ViewTracer is the kernel's view: the run-queue tracer's wait of the
	// lane's threads, from wake-up to running.
	ViewTracer = "tracer"
	// ViewFelt is the tracer's felt view of the same threads: a wait that
	// a timer's expiry began is measured from the expiry, as the task
	// feels it.
	ViewFelt = "felt"
	// ViewApp is our periodic task's own wake-up lateness.
	ViewApp = "app"
	// ViewOutside is cyclictest's own histogram (rt-tests).
	ViewOutside = "cyclictest"
)

// Views lists the lane views in report order.
var Views = []string{ViewTracer, ViewFelt, ViewApp, ViewOutside}

// LaneView returns the run's lane latency in one view, all generators and
// repeats merged; empty when the workload lacks that view.
func (r Run) LaneView(view string) *verify.Histogram {
	h := &verify.Histogram{}
	switch view {
	case ViewTracer:
		if r.Lane != nil {
			h.Merge(r.Lane)
		}
	case ViewFelt:
		if r.LaneFelt != nil {
			h.Merge(r.LaneFelt)
		}
	case ViewApp:
		for i := range r.Periodic {
			h.Merge(&r.Periodic[i].Lateness)
		}
	case ViewOutside:
		for i := range r.Cyclictest {
			h.Merge(&r.Cyclictest[i].Lateness)
		}
	}
	return h
}

// missed is the periods the lane missed in a view (-1: not known there).
func (r Run) missed(view string) int {
	n := 0
	switch view {
	case ViewApp:
		for _, p := range r.Periodic {
			n += p.Missed
		}
	case ViewOutside:
		for _, c := range r.Cyclictest {
			n += c.Missed
		}
	default:
		return -1
	}
	return n
}

// RunSummary is every figure the report shows for one variant.
type RunSummary struct {
	// Lane is the lane's latency per view that has samples.
	Lane map[string]report.Latency `json:"lane"`
	// Missed is the lane's missed periods per view that counts them.
	Missed map[string]int `json:"missed"`
	// Normal is the tracer's run-queue latency of every other task (the
	// policy's catch-all class, NormalClass).
	Normal      report.Latency `json:"normal"`
	NormalClass string         `json:"normal_class"`
	// LaneCPUShare is the lane's share of the machine's CPU time.
	LaneCPUShare float64 `json:"lane_cpu_share"`
	// Background is the background's work per second; PerFreeCPU per
	// CPU-second the lane left (Run.BackgroundPerFreeCPU).
	Background           float64 `json:"background_per_s"`
	BackgroundPerFreeCPU float64 `json:"background_per_free_cpu_s"`
	BackgroundUnit       string  `json:"background_unit"`
	// Ratios to the baseline variant (0: no baseline figure).
	LaneP99VsBaseline    map[string]float64 `json:"lane_p99_vs_baseline,omitempty"`
	BackgroundVsBaseline float64            `json:"background_per_free_cpu_vs_baseline,omitempty"`
	// Rest is what the variant left everyone else: the fair classes'
	// wake-up latency, each judge's own figure, the request servers', and
	// the lane's beside them, each with the baseline's.
	Rest []RestFigure `json:"rest_of_machine"`
	// Decode is the decode servers' own figures (DecodeSummaries).
	Decode []DecodeSummary `json:"decode,omitempty"`
}

// DecodeSummary is what a decode server, or one of its streams, gave:
// tokens per second, time to first token and inter-token latency, and
// its tokens per second and ITL p99 over the baseline variant's and over
// the same server's alone (unloaded; 0: no such figure).
type DecodeSummary struct {
	// Name is the server's comm, with "#N" for its Nth stream; Stream is
	// N (0: all the server's streams together).
	Name             string         `json:"name"`
	Stream           int            `json:"stream,omitempty"`
	TokensPerSecond  float64        `json:"tokens_per_s"`
	Requests         uint64         `json:"requests"`
	TTFT             report.Latency `json:"ttft"`
	ITL              report.Latency `json:"itl"`
	TokensVsBaseline float64        `json:"tokens_per_s_vs_baseline,omitempty"`
	ITLP99VsBaseline float64        `json:"itl_p99_vs_baseline,omitempty"`
	TokensVsUnloaded float64        `json:"tokens_per_s_vs_unloaded,omitempty"`
	ITLP99VsUnloaded float64        `json:"itl_p99_vs_unloaded,omitempty"`
}

// DecodeSummaries summarizes decode servers' results: per server all its
// streams together, then each stream when it has more than one.
func DecodeSummaries(results []DecodeResult) []DecodeSummary {
	var out []DecodeSummary
	sum := func(name string, stream int, s *DecodeStats) {
		out = append(out, DecodeSummary{Name: name, Stream: stream, TokensPerSecond: s.TokensPerSecond(), Requests: s.Requests,
			TTFT: report.Summarize(&s.TTFT), ITL: report.Summarize(&s.ITL)})
	}
	for i := range results {
		r := &results[i]
		name := r.Comm
		if len(results) > 1 {
			name = fmt.Sprintf("%s#%d", r.Comm, i+1)
		}
		sum(name, 0, &r.Total)
		if len(r.Streams) > 1 {
			for j := range r.Streams {
				sum(fmt.Sprintf("%s stream %d", name, j+1), j+1, &r.Streams[j])
			}
		}
	}
	return out
}

// decodeAt is the summary in other of the same server or stream as the
// one at i named name (the same workload gives the same list).
func decodeAt(other []DecodeSummary, i int, name string) (DecodeSummary, bool) {
	if i >= len(other) || other[i].Name != name {
		return DecodeSummary{}, false
	}
	return other[i], true
}

// vs returns d's tokens per second and ITL p99 over o's (0 where o has
// no such figure).
func (d DecodeSummary) vs(o DecodeSummary) (tokens, itlP99 float64) {
	if o.TokensPerSecond > 0 {
		tokens = d.TokensPerSecond / o.TokensPerSecond
	}
	if o.ITL.P99 > 0 {
		itlP99 = float64(d.ITL.P99) / float64(o.ITL.P99)
	}
	return tokens, itlP99
}

// Report is a bench's outcome: every variant's runs, the variants that
// were skipped, the baseline the ratios are taken against, and hotlane's
// bound verdict.
type Report struct {
	report.Header
	Runs     []Run     `json:"runs"`
	Skipped  []Skipped `json:"skipped,omitempty"`
	Baseline string    `json:"baseline"`
	// Disagreements lists pairs of variants whose order the tracer shows
	// by a wide margin and a task's own view reverses (ViewsAgree).
	Disagreements []string               `json:"view_disagreements"`
	Bounds        []verify.ClassVerdicts `json:"bounds,omitempty"`
	// Unloaded is the decode servers' figures with nothing else running
	// (Bench.RunUnloaded), the "vs unloaded" ratios' base.
	Unloaded []DecodeSummary `json:"decode_unloaded,omitempty"`
	// Pass: every variant ran to the end and hotlane met the bounds.
	Pass bool `json:"pass"`
	// Verdict is Pass in one word, or that a signal cut the bench short
	// (Interrupt).
	Verdict report.Verdict `json:"verdict"`
	// Complete: every variant asked for ran to the end.
	Complete bool `json:"complete"`
	// Tick is the kernel's scheduler tick (0: unknown). A sched_ext
	// scheduler ends a slice only at a tick, where EEVDF ends one by its
	// own timer, so reports from kernels of other tick rates do not
	// compare (docs/results.md, 2026-11-28).
	Tick time.Duration `json:"tick_ns,omitempty"`
}

// Margins of ViewsAgree as the report applies them.
const (
	AgreeFactor = 3.0
	AgreeGap    = time.Millisecond
)

// NewReport summarizes the runs of a bench begun at started and checks
// the bounds against hotlane's tracer histograms.
func NewReport(started time.Time, runs []Run, skipped []Skipped, baseline string, bounds []verify.Bound) *Report {
	r := &Report{Header: report.NewHeader("bench", started),
		Runs: runs, Skipped: skipped, Baseline: baseline, Pass: true, Complete: len(skipped) == 0}
	r.Tick, _ = sched.Tick()
	losses := report.Losses{}
	for _, run := range runs {
		if run.Failure != "" {
			r.Complete = false
		}
		losses = append(losses, report.Loss{What: "tracer events under " + run.Scheduler, Count: run.TracerLosses})
	}
	r.Finish(time.Since(started), losses)
	r.Pass = r.Complete
	base := r.run(baseline)
	for i := range r.Runs {
		r.Runs[i].Summary = summarize(&r.Runs[i], base)
	}
	r.Disagreements = ViewsAgree(r.Runs, AgreeFactor, AgreeGap)
	if r.Disagreements == nil {
		r.Disagreements = []string{}
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
	r.Verdict = report.Judge(false, r.Pass)
	return r
}

// SetUnloaded records the decode servers' figures with nothing else
// running (Bench.RunUnloaded) and every variant's ratios to them.
func (r *Report) SetUnloaded(unloaded []DecodeResult) {
	r.Unloaded = DecodeSummaries(unloaded)
	for i := range r.Runs {
		s := r.Runs[i].Summary
		if s == nil {
			continue
		}
		for j := range s.Decode {
			if u, ok := decodeAt(r.Unloaded, j, s.Decode[j].Name); ok {
				s.Decode[j].TokensVsUnloaded, s.Decode[j].ITLP99VsUnloaded = s.Decode[j].vs(u)
			}
		}
	}
}

// Interrupt marks the report as that of a bench a signal cut short: its
// rounds are reported, but it is no verdict.
func (r *Report) Interrupt() {
	r.Interrupted = true
	r.Verdict = report.Judge(true, r.Pass)
	r.Pass = false
}

func summarize(run, base *Run) *RunSummary {
	s := &RunSummary{Lane: map[string]report.Latency{}, Missed: map[string]int{}, LaneP99VsBaseline: map[string]float64{}}
	for _, v := range Views {
		h := run.LaneView(v)
		if h.Count() == 0 {
			continue
		}
		s.Lane[v] = report.Summarize(h)
		if m := run.missed(v); m >= 0 {
			s.Missed[v] = m
		}
		if base != nil {
			if b := report.Summarize(base.LaneView(v)); b.P99 > 0 {
				s.LaneP99VsBaseline[v] = float64(s.Lane[v].P99) / float64(b.P99)
			}
		}
	}
	if n := len(run.Classes); n > 0 {
		s.NormalClass = run.Classes[n-1].Class
		s.Normal = report.Summarize(run.Classes[n-1].Hist)
	}
	s.LaneCPUShare = run.LaneCPUShare()
	s.Background = run.BackgroundRate()
	s.BackgroundPerFreeCPU = run.BackgroundPerFreeCPU()
	_, s.BackgroundUnit = run.BackgroundWork()
	if base != nil && base.BackgroundPerFreeCPU() > 0 {
		s.BackgroundVsBaseline = s.BackgroundPerFreeCPU / base.BackgroundPerFreeCPU()
	}
	s.Rest = restFigures(run)
	s.Decode = DecodeSummaries(run.Decode)
	if base != nil {
		s.Rest = withBaseline(s.Rest, restFigures(base))
		bd := DecodeSummaries(base.Decode)
		for i := range s.Decode {
			if b, ok := decodeAt(bd, i, s.Decode[i].Name); ok {
				s.Decode[i].TokensVsBaseline, s.Decode[i].ITLP99VsBaseline = s.Decode[i].vs(b)
			}
		}
	}
	return s
}

// ViewsAgree checks that the tasks' own views (ViewApp, ViewOutside) show
// every ordering of two variants that the tracer shows clearly for the
// same threads: where the tracer's median run-queue wait of a view's
// threads under variant a is at least factor times b's and at least gap
// more, that view, with samples of both, must put a's median lateness
// above b's. It returns one line per disagreement.
//
// The check runs one way only. What the tracer sees (wake-up to running)
// is part of what the tasks see, so a clear difference there must show in
// their views; what the tasks see beyond it (timer delivery, SCHED_DEADLINE
// throttling, a task's own overruns, and under TCG the emulator's own
// timer thread competing for host CPUs) need not show in the tracer's.
// Each view is held to its own threads' waits, not the whole lane's: the
// periodic task's waits under EEVDF (1.25 ms at the median against 197
// µs under hotlane) once made cyclictest, whose own waits differed far
// less, a "disagreement". Runs without that split (older reports) are
// held to the whole lane's. Medians, with at least 20 samples each: a
// short run's tail rests on a handful of samples and orders nothing.
func ViewsAgree(runs []Run, factor float64, gap time.Duration) []string {
	const minSamples = 20
	medianOf := func(h *verify.Histogram) (time.Duration, bool) {
		return time.Duration(h.QuantileUpper(0.5)), h.Count() >= minSamples
	}
	median := func(r Run, view string) (time.Duration, bool) { return medianOf(r.LaneView(view)) }
	tracer := func(r Run, view string) (time.Duration, bool) {
		if h := r.LaneOf[view]; h != nil {
			return medianOf(h)
		}
		return median(r, ViewTracer)
	}
	var out []string
	for a := range runs {
		for b := range runs {
			if a == b {
				continue
			}
			for _, w := range []string{ViewApp, ViewOutside} {
				hi, oka := tracer(runs[a], w)
				lo, okb := tracer(runs[b], w)
				if !oka || !okb || float64(hi) < factor*float64(lo) || hi-lo < gap {
					continue
				}
				wa, oka := median(runs[a], w)
				wb, okb := median(runs[b], w)
				if !oka || !okb || wa > wb {
					continue
				}
				out = append(out, fmt.Sprintf("p50: tracer %s %s vs %s %s, but %s %s vs %s",
					runs[a].Scheduler, report.Duration(hi), runs[b].Scheduler, report.Duration(lo),
					w, report.Duration(wa), report.Duration(wb)))
			}
		}
	}
	return out
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

// ratio formats a ratio, or "-" when there is none.
func ratio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func ratioOf(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return ratio(a / b)
}

// WriteText writes the report for people: the decode servers' tokens per
// second first where there are any, the lane's latency in its views, what
// each variant cost everyone else, the tracer's latency per class, whether
// the views agree, and the verdict.
func (r *Report) WriteText(w io.Writer) error {
	out := report.NewWriter(w)
	if r.Tick > 0 {
		fmt.Fprintf(w, "kernel %s, tick %v (%d Hz): a sched_ext scheduler ends a slice only at a tick\n\n", r.Kernel, r.Tick, time.Second/r.Tick)
	}
	// An inference user reads tokens per second first.
	if err := r.writeDecode(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "lane latency, four views: tracer = run-queue wait of the lane's threads (kernel, from the wake-up),")
	fmt.Fprintln(w, "felt = the same from the timer's expiry where a timer woke them, app = our periodic task's own wake-up")
	fmt.Fprintln(w, "lateness, cyclictest = rt-tests' own histogram (percentiles are bucket upper edges):")
	t := report.Table{Header: append(append([]string{"variant", "view"}, report.LatencyColumns()...), "missed", "p99 vs "+r.Baseline)}
	for _, run := range r.Runs {
		s := run.summary()
		for _, v := range Views {
			l, ok := s.Lane[v]
			if !ok {
				continue
			}
			missed := "-"
			if m, ok := s.Missed[v]; ok {
				missed = fmt.Sprint(m)
			}
			t.Add(append(append([]string{run.Scheduler, v}, l.Cells()...), missed, ratio(s.LaneP99VsBaseline[v]))...)
		}
		if len(s.Lane) == 0 {
			t.Add(append(append([]string{run.Scheduler, "-"}, report.Latency{}.Cells()...), "-", "-")...)
		}
	}
	if err := t.WriteText(w); err != nil {
		return err
	}

	unit := "work"
	if len(r.Runs) > 0 {
		_, unit = r.Runs[0].BackgroundWork()
	}
	normal := "normal"
	if len(r.Runs) > 0 && len(r.Runs[0].Classes) > 0 {
		normal = r.Runs[0].Classes[len(r.Runs[0].Classes)-1].Class
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "cost to everyone else: run-queue wait of all other tasks (tracer, class %s), background throughput\n", normal)
	fmt.Fprintf(w, "(%s per second, and per CPU-second the lane left: a starved lane must not make the background look faster):\n", unit)
	t = report.Table{Header: []string{"variant", "lane CPU", "normal p99", "normal max", "bg/s", "bg/free CPU-s", "vs " + r.Baseline}}
	for _, run := range r.Runs {
		s := run.summary()
		cells := report.Latency{}.Cells()
		if s.Normal.Samples > 0 {
			cells = s.Normal.Cells()
		}
		t.Add(run.Scheduler, fmt.Sprintf("%.1f%%", 100*s.LaneCPUShare), cells[3], cells[5],
			formatRate(s.Background), formatRate(s.BackgroundPerFreeCPU), ratio(s.BackgroundVsBaseline))
	}
	if err := t.WriteText(w); err != nil {
		return err
	}

	base := r.run(r.Baseline)
	var classes []string
	if len(r.Runs) > 0 {
		for _, c := range r.Runs[0].Classes {
			classes = append(classes, c.Class)
		}
	}
	for _, class := range classes {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "run-queue latency, class %s (tracer):\n", class)
		t := report.Table{Header: append(append([]string{"variant"}, report.LatencyColumns()...), "p99 vs "+r.Baseline)}
		var baseP99 float64
		if base != nil {
			baseP99 = float64(report.Summarize(base.class(class)).P99)
		}
		for _, run := range r.Runs {
			s := report.Summarize(run.class(class))
			t.Add(append(append([]string{run.Scheduler}, s.Cells()...), ratioOf(float64(s.P99), baseP99))...)
		}
		if err := t.WriteText(w); err != nil {
			return err
		}
	}

	if err := r.writeJudges(w); err != nil {
		return err
	}
	if err := r.writeRest(w); err != nil {
		return err
	}

	fmt.Fprintln(w)
	switch {
	case len(r.Disagreements) > 0:
		out.Printf("the tasks' views DISAGREE with %d orderings the tracer shows for their own threads (median wait, margin %gx and %s):\n", len(r.Disagreements), AgreeFactor, report.Duration(AgreeGap))
		for _, d := range r.Disagreements {
			out.Printf("  %s\n", d)
		}
	default:
		out.Printf("the tasks' views show every ordering the tracer shows clearly for their own threads (median wait, margin %gx and %s)\n", AgreeFactor, report.Duration(AgreeGap))
	}
	for _, s := range r.Skipped {
		out.Printf("%s SKIPPED: %s\n", s.Name, s.Reason)
	}
	for _, run := range r.Runs {
		if run.Failure != "" {
			out.Printf("%s FAILED: %s\n", run.Scheduler, run.Failure)
		}
		if run.TracerLosses > 0 {
			out.Printf("%s: the tracer lost %d events\n", run.Scheduler, run.TracerLosses)
		}
	}
	if line := enableLine(r.Runs); line != "" {
		out.Printf("%s\n", line)
	}
	for _, b := range r.Bounds {
		for _, v := range b.Verdicts {
			out.Printf("hotlane %s %s\n", b.Class, v)
		}
	}
	verdict := "PASS"
	switch {
	case r.Interrupted:
		verdict = r.InterruptedNote()
	case !r.Complete:
		verdict = "INCOMPLETE: a variant was skipped, failed to start or ended mid-run"
	case !r.Pass:
		verdict = "FAIL: hotlane missed the bound"
	case len(r.Bounds) == 0:
		verdict = "PASS (no bound given)"
	}
	out.Printf("verdict: %s\n", verdict)
	return out.Err()
}

// writeDecode writes the decode servers' figures per variant, after
// those with nothing else running: tokens per second and their ratios to
// the baseline's and the unloaded, time to first token, inter-token
// latency.
func (r *Report) writeDecode(w io.Writer) error {
	t := report.Table{Header: []string{"variant", "server", "tokens/s", "vs " + r.Baseline, "vs unloaded", "requests",
		"TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "ITL max", "ITL p99 vs unloaded"}}
	add := func(variant string, d DecodeSummary) {
		t.Add(variant, d.Name, fmt.Sprintf("%.1f", d.TokensPerSecond), ratio(d.TokensVsBaseline), ratio(d.TokensVsUnloaded), fmt.Sprint(d.Requests),
			report.Duration(d.TTFT.P50), report.Duration(d.TTFT.P99), report.Duration(d.ITL.P50), report.Duration(d.ITL.P99),
			report.Duration(d.ITL.Max), ratio(d.ITLP99VsUnloaded))
	}
	for _, d := range r.Unloaded {
		add("unloaded", d)
	}
	for _, run := range r.Runs {
		if run.Rounds == 0 {
			continue
		}
		for _, d := range run.summary().Decode {
			add(run.Scheduler, d)
		}
	}
	if len(t.Rows) == 0 {
		return nil
	}
	out := report.NewWriter(w)
	out.Printf("decode servers, in their own words: tokens per second (and as a fraction of the baseline's and of the\n")
	out.Printf("same servers' alone, unloaded), time to first token (TTFT) and inter-token latency (ITL):\n")
	out.Do(t.WriteText)
	out.Printf("\n")
	return out.Err()
}

// summary returns the run's summary, computing one if NewReport did not.
func (r Run) summary() *RunSummary {
	if r.Summary != nil {
		return r.Summary
	}
	return summarize(&r, nil)
}

// formatRate writes a rate with three significant digits and an SI prefix.
func formatRate(v float64) string {
	switch {
	case v >= 1e9:
		return strings.TrimSpace(fmt.Sprintf("%.3gG", v/1e9))
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}

// WriteJSON writes the report for machines.
func (r *Report) WriteJSON(w io.Writer) error {
	return report.WriteJSON(w, r)
}

// Cases is the report for a CI system: one case per variant (it ran to
// the end, or why not: a variant the host could not run is an error), and
// one per clause of hotlane's bounds.
func (r *Report) Cases(took time.Duration) []report.Case {
	const suite = "hotlane bench"
	var cases []report.Case
	for _, run := range r.Runs {
		c := report.Case{Suite: suite, Class: "variants", Name: run.Variant.Name, Time: took}
		if run.Failure != "" {
			c.Error = run.Variant.Name + " did not run to the end: " + run.Failure
		}
		cases = append(cases, c)
	}
	for _, s := range r.Skipped {
		cases = append(cases, report.Case{Suite: suite, Class: "variants", Name: s.Name, Time: took, Error: s.Name + " was skipped: " + s.Reason})
	}
	return report.InterruptedCases(r.Header, suite, append(cases, verify.Cases(suite, r.Bounds, took)...), took)
}

// enableLine says how long each sched_ext scheduler took from its start
// to sched_ext enabled, the fastest and slowest of its rounds; empty when
// no run started one.
func enableLine(runs []Run) string {
	var parts []string
	for _, run := range runs {
		if len(run.Enable) == 0 {
			continue
		}
		lo, hi := slices.Min(run.Enable), slices.Max(run.Enable)
		span := report.Duration(lo)
		if hi != lo {
			span += "-" + report.Duration(hi)
		}
		parts = append(parts, run.Scheduler+" "+span)
	}
	if len(parts) == 0 {
		return ""
	}
	return "start to sched_ext enabled: " + strings.Join(parts, ", ")
}
