package workloads

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

func hist(samples ...time.Duration) *verify.Histogram {
	var h verify.Histogram
	for _, s := range samples {
		h.Record(uint64(s))
	}
	return &h
}

func lateness(samples ...time.Duration) PeriodicResult {
	return PeriodicResult{Lateness: *hist(samples...)}
}

func testRuns() []Run {
	const ms = time.Millisecond
	classes := func(infer ...time.Duration) []verify.ClassLatency {
		return []verify.ClassLatency{{Class: "inference", Hist: hist(infer...)}, {Class: "normal", Hist: hist(ms, 2*ms)}}
	}
	ct := func(samples ...time.Duration) []CyclictestResult {
		return []CyclictestResult{{Lateness: *hist(samples...), Missed: 1}}
	}
	return []Run{
		{Scheduler: ScxSimple, Periodic: []PeriodicResult{lateness(10*ms, 20*ms, 40*ms)}, Cyclictest: ct(12*ms, 30*ms),
			Lane: hist(10*ms, 40*ms), LaneFelt: hist(11*ms, 41*ms), Classes: classes(10*ms, 40*ms), HogWork: 2e6, Measured: time.Second, CPUs: 2},
		{Scheduler: HotlaneName, Periodic: []PeriodicResult{lateness(ms, 2*ms, 4*ms)}, Cyclictest: ct(ms, 3*ms),
			Lane: hist(ms, 4*ms), LaneFelt: hist(2*ms, 5*ms), Classes: classes(ms, 4*ms), HogWork: 1e6, LaneCPU: time.Second, Measured: time.Second, CPUs: 2},
	}
}

// row returns the fields of the first line under heading whose first
// field is name.
func row(t *testing.T, out, heading, name string) []string {
	t.Helper()
	_, section, ok := strings.Cut(out, heading)
	if !ok {
		t.Fatalf("no %q in:\n%s", heading, out)
	}
	for _, l := range strings.Split(section, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return f
		}
	}
	t.Fatalf("no row %s under %q in:\n%s", name, heading, out)
	return nil
}

func TestReportRatiosAndVerdict(t *testing.T) {
	bounds, err := verify.ParseBounds("inference:p99<=5ms", "inference")
	if err != nil {
		t.Fatal(err)
	}
	rep := NewReport(testStart, testRuns(), nil, ScxSimple, bounds)
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Tracer view of the class: hotlane's p99 (4ms) over scx_simple's (40ms).
	if f := row(t, out, "class inference", HotlaneName); f[len(f)-1] != "0.100" {
		t.Errorf("tracer p99 ratio %v, want 0.100:\n%s", f, out)
	}
	// The lane in four views, each with its ratio and missed periods.
	for _, want := range []string{
		"hotlane tracer 2 1.02ms 4.00ms 4.00ms 4.00ms 4.00ms - 0.100",
		"hotlane felt 2 2.03ms 5.00ms 5.00ms 5.00ms 5.00ms - 0.122",
		"hotlane app 3 2.03ms 4.00ms 4.00ms 4.00ms 4.00ms 0 0.100",
		"hotlane cyclictest 2 1.02ms 3.00ms 3.00ms 3.00ms 3.00ms 1 0.100",
	} {
		if !strings.Contains(squash(out), want) {
			t.Errorf("lane table lacks %q:\n%s", want, out)
		}
	}
	// Cost: hotlane's lane took 1 of 2 CPU-seconds; its hogs did half the
	// loops with half the free CPU, so per free CPU-second they match.
	if f := row(t, out, "cost to everyone else", HotlaneName); f[1] != "50.0%" || f[4] != "1M" || f[5] != "1M" || f[6] != "1.000" {
		t.Errorf("cost row %v, want lane CPU 50%%, 1M/s, 1M per free CPU-s, 1.000:\n%s", f, out)
	}
	if !rep.Pass || !strings.Contains(out, "verdict: PASS") || !strings.Contains(out, "the tasks' views show every ordering") {
		t.Errorf("4ms p99 against a 5ms bound did not pass, or the views disagree:\n%s", out)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := report.CheckHeader(js.Bytes(), "bench"); err != nil {
		t.Errorf("report.json: %v", err)
	}
	if len(rep.Losses) != len(rep.Runs) {
		t.Errorf("losses %+v: want one per variant", rep.Losses)
	}

	failing, _ := verify.ParseBounds("inference:p99<=1ms", "inference")
	if rep := NewReport(testStart, testRuns(), nil, ScxSimple, failing); rep.Pass {
		t.Error("4ms p99 passed a 1ms bound")
	}
	runs := append(testRuns(), Run{Scheduler: EEVDF, Failure: "did not start"})
	rep = NewReport(testStart, runs, []Skipped{{Name: ScxQmap, Reason: "no sched_ext"}}, ScxSimple, bounds)
	b.Reset()
	rep.WriteText(&b)
	for _, want := range []string{"eevdf FAILED: did not start", "scx_qmap SKIPPED: no sched_ext", "verdict: INCOMPLETE"} {
		if rep.Complete || !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	// Skipped alone makes it incomplete too.
	if rep := NewReport(testStart, testRuns(), []Skipped{{Name: ScxQmap, Reason: "x"}}, ScxSimple, nil); rep.Complete || rep.Pass {
		t.Error("a skipped variant left the report complete")
	}
}

func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestViewsAgree(t *testing.T) {
	const ms = time.Millisecond
	many := func(d time.Duration) *verify.Histogram {
		var h verify.Histogram
		h.RecordN(uint64(d), 50)
		return &h
	}
	mk := func(name string, tracer, app, outside time.Duration) Run {
		return Run{Scheduler: name, Lane: many(tracer), Periodic: []PeriodicResult{{Lateness: *many(app)}},
			Cyclictest: []CyclictestResult{{Lateness: *many(outside)}}}
	}
	agree := []Run{mk("a", 20*ms, 22*ms, 21*ms), mk("b", ms, 1500*time.Microsecond, 1200*time.Microsecond)}
	if d := ViewsAgree(agree, 3, ms); len(d) != 0 {
		t.Errorf("consistent views: %v", d)
	}
	// Within the margin: no claim either way.
	close := []Run{mk("a", 2*ms, 2*ms, 2*ms), mk("b", 1500*time.Microsecond, 3*ms, 1*ms)}
	if d := ViewsAgree(close, 3, ms); len(d) != 0 {
		t.Errorf("orderings inside the margin were judged: %v", d)
	}
	// A task's view reverses what the tracer shows clearly.
	d := ViewsAgree([]Run{mk("a", 20*ms, 22*ms, ms), mk("b", ms, ms, 5*ms)}, 3, ms)
	if len(d) != 1 || d[0] != "p50: tracer a 20.0ms vs b 1.00ms, but cyclictest 1.00ms vs 5.00ms" {
		t.Errorf("a reversed ordering was not reported: %v", d)
	}
	// The tasks may see differences the tracer does not (timer delivery,
	// throttling): that is no disagreement.
	if d := ViewsAgree([]Run{mk("a", ms, 20*ms, 20*ms), mk("b", ms, ms, ms)}, 3, ms); len(d) != 0 {
		t.Errorf("a difference only the tasks see was judged: %v", d)
	}
	// Each view is held to its own threads' waits: the periodic task's
	// waits differ clearly, cyclictest's do not, and cyclictest's slight
	// reversal is no disagreement; the periodic task's own reversal is.
	split := func(name string, appWait, outsideWait, app, outside time.Duration) Run {
		r := mk(name, max(appWait, outsideWait), app, outside)
		r.LaneOf = map[string]*verify.Histogram{ViewApp: many(appWait), ViewOutside: many(outsideWait)}
		return r
	}
	d = ViewsAgree([]Run{split("eevdf", 20*ms, 300*time.Microsecond, 22*ms, 450*time.Microsecond),
		split("hotlane", ms/5, ms/5, ms/2, 490*time.Microsecond)}, 3, ms)
	if len(d) != 0 {
		t.Errorf("a view was held to other threads' waits: %v", d)
	}
	d = ViewsAgree([]Run{split("eevdf", 20*ms, 300*time.Microsecond, ms/4, 450*time.Microsecond),
		split("hotlane", ms/5, ms/5, ms/2, 490*time.Microsecond)}, 3, ms)
	if len(d) != 1 || !strings.Contains(d[0], "but app") {
		t.Errorf("the periodic task's reversal of its own threads' order was not reported: %v", d)
	}
	// Too few samples to say anything.
	few := []Run{{Scheduler: "a", Lane: hist(20 * ms), Cyclictest: []CyclictestResult{{Lateness: *hist(ms)}}},
		{Scheduler: "b", Lane: hist(ms), Cyclictest: []CyclictestResult{{Lateness: *hist(20 * ms)}}}}
	if d := ViewsAgree(few, 3, ms); len(d) != 0 {
		t.Errorf("single samples were compared: %v", d)
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	rep := NewReport(testStart, testRuns(), []Skipped{{Name: ScxQmap, Reason: "x"}}, ScxSimple, nil)
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != 2 || back.Runs[1].Classes[0].Hist.Max() != uint64(4*time.Millisecond) ||
		back.Runs[0].Periodic[0].Lateness.Count() != 3 || back.Runs[0].Cyclictest[0].Lateness.Count() != 2 ||
		back.Runs[1].Lane.Count() != 2 || len(back.Skipped) != 1 {
		t.Errorf("JSON round trip lost data: %+v", back)
	}
	// Every figure of the text is in the summary.
	s := back.Runs[1].Summary
	if s == nil || s.Lane[ViewOutside].P99 != 3*time.Millisecond || s.Missed[ViewOutside] != 1 || s.Normal.Max != 2*time.Millisecond ||
		s.LaneCPUShare != 0.5 || s.BackgroundPerFreeCPU != 1e6 || s.BackgroundVsBaseline != 1 || s.LaneP99VsBaseline[ViewTracer] != 0.1 {
		t.Errorf("summary %+v", s)
	}
}

// svgElements checks the plot is well-formed XML and counts its elements.
func svgElements(t *testing.T, svg []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	n := map[string]int{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("the plot is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			n[se.Name.Local]++
		}
	}
}

func TestTailPlots(t *testing.T) {
	rep := NewReport(testStart, testRuns(), nil, ScxSimple, nil)
	for _, view := range Views {
		var buf bytes.Buffer
		if err := rep.WriteTail(&buf, view); err != nil {
			t.Fatal(err)
		}
		if n := svgElements(t, buf.Bytes()); n["polyline"] != 2 {
			t.Errorf("%s: %d curves, want one per variant (2)", view, n["polyline"])
		}
		// The x axis is by percentile, with p99 marked.
		if !strings.Contains(buf.String(), ">p99<") {
			t.Errorf("%s: no p99 tick", view)
		}
	}
	var buf bytes.Buffer
	if err := rep.WriteClassTail(&buf, "normal"); err != nil {
		t.Fatal(err)
	}
	svgElements(t, buf.Bytes())
	if err := rep.WriteClassTail(&buf, "batch"); !errors.Is(err, ErrNoSamples) {
		t.Errorf("plotting a class without samples: %v", err)
	}
}

// The quantile curve's steps sit at the percentiles: with 1000 samples of
// 1ms and one of 100ms, the curve stays at 1ms up to p99.9 and then rises.
func TestQuantilePointsReachTheTail(t *testing.T) {
	var h verify.Histogram
	h.RecordN(uint64(time.Millisecond), 999)
	h.Record(uint64(100 * time.Millisecond))
	x := func(q float64) float64 { return 1000 * q }
	y := func(v float64) float64 { return v }
	pts := quantilePoints(&h, x, y)
	if len(pts) != 8 || pts[2] != 999 || pts[7] != 1e8 {
		t.Errorf("points %v, want (x, y) 4 times, the second at x 999 and the last at y 1e8", pts)
	}
}

func TestCostPlot(t *testing.T) {
	var buf bytes.Buffer
	rep := NewReport(testStart, testRuns(), nil, ScxSimple, nil)
	if err := rep.WriteCost(&buf); err != nil {
		t.Fatal(err)
	}
	// Two panels, one point per variant in each.
	if n := svgElements(t, buf.Bytes()); n["circle"] != 4 {
		t.Errorf("%d points, want 4", n["circle"])
	}
	if !strings.Contains(buf.String(), "cyclictest view") {
		t.Error("the cost plot does not use the outside view when there is one")
	}
	if err := NewReport(testStart, nil, nil, EEVDF, nil).WriteCost(&buf); !errors.Is(err, ErrNoSamples) {
		t.Errorf("empty cost plot: %v", err)
	}
}

// testStart is when the tests' benches began.
var testStart = time.Now().Add(-time.Minute)

// The text says how long each sched_ext scheduler took to enable, the
// fastest and slowest of its rounds, and names no scheduler that started
// none (EEVDF).
func TestReportSaysTimeToEnabled(t *testing.T) {
	runs := testRuns()
	for i := range runs {
		switch runs[i].Scheduler {
		case HotlaneName:
			runs[i].Enable = []time.Duration{1200 * time.Millisecond, 900 * time.Millisecond}
		case ScxSimple:
			runs[i].Enable = []time.Duration{300 * time.Millisecond}
		}
	}
	runs = append(runs, Run{Scheduler: EEVDF})
	var b strings.Builder
	if err := NewReport(testStart, runs, nil, ScxSimple, nil).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "start to sched_ext enabled: ") {
			line = l
		}
	}
	for _, want := range []string{HotlaneName + " 900ms-1.20s", ScxSimple + " 300ms"} {
		if !strings.Contains(line, want) {
			t.Errorf("enable line %q lacks %q:\n%s", line, want, b.String())
		}
	}
	if strings.Contains(line, EEVDF) {
		t.Errorf("enable line %q names EEVDF, which starts no scheduler", line)
	}
}

// The tick decides when a sched_ext slice ends: the report names it, and
// the kernel it was read on, before any figure.
func TestReportNamesTheTick(t *testing.T) {
	rep := NewReport(testStart, testRuns(), nil, ScxSimple, nil)
	if rep.Tick <= 0 {
		t.Fatalf("no tick read on this machine (%v)", rep.Tick)
	}
	rep.Kernel, rep.Tick = "7.3.4-hotlane", time.Millisecond
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(b.String(), "\n")
	if want := "kernel 7.3.4-hotlane, tick 1ms (1000 Hz): a sched_ext scheduler ends a slice only at a tick"; first != want {
		t.Errorf("first line %q, want %q", first, want)
	}
	var j strings.Builder
	if err := rep.WriteJSON(&j); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.String(), `"tick_ns": 1000000`) {
		t.Errorf("JSON lacks tick_ns: %s", j.String()[:min(len(j.String()), 400)])
	}
}
