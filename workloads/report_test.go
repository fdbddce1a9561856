package workloads

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

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
	return []Run{
		{Scheduler: ScxSimple, Periodic: []PeriodicResult{lateness(10*ms, 20*ms, 40*ms)}, Classes: classes(10*ms, 40*ms), HogWork: 2e6, Measured: time.Second},
		{Scheduler: HotlaneName, Periodic: []PeriodicResult{lateness(ms, 2*ms, 4*ms)}, Classes: classes(ms, 4*ms), HogWork: 1e6, Measured: time.Second},
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
	rep := NewReport(testRuns(), ScxSimple, bounds)
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Tracer view: hotlane's inference p99 (4ms) over scx_simple's (40ms).
	if f := row(t, out, "class inference", HotlaneName); f[len(f)-1] != "0.100" {
		t.Errorf("tracer p99 ratio %v, want 0.100:\n%s", f, out)
	}
	// Application view: same ratio, hogs at half the baseline's rate.
	if f := row(t, out, "application view", HotlaneName); f[len(f)-3] != "0.100" || f[len(f)-1] != "0.500" {
		t.Errorf("application row %v, want p99 ratio 0.100 and hog ratio 0.500:\n%s", f, out)
	}
	if !rep.Pass || !strings.Contains(out, "verdict: PASS") {
		t.Errorf("4ms p99 against a 5ms bound did not pass:\n%s", out)
	}

	failing, _ := verify.ParseBounds("inference:p99<=1ms", "inference")
	if rep := NewReport(testRuns(), ScxSimple, failing); rep.Pass {
		t.Error("4ms p99 passed a 1ms bound")
	}
	runs := append(testRuns(), Run{Scheduler: EEVDF, Failure: "did not start"})
	rep = NewReport(runs, ScxSimple, bounds)
	b.Reset()
	rep.WriteText(&b)
	if rep.Complete || !strings.Contains(b.String(), "eevdf FAILED: did not start") || !strings.Contains(b.String(), "verdict: INCOMPLETE") {
		t.Errorf("a failed scheduler is not reported:\n%s", b.String())
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	rep := NewReport(testRuns(), ScxSimple, nil)
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != 2 || back.Runs[1].Classes[0].Hist.Max() != uint64(4*time.Millisecond) ||
		back.Runs[0].Periodic[0].Lateness.Count() != 3 {
		t.Errorf("JSON round trip lost data: %+v", back.Runs)
	}
}

func TestCDFIsWellFormedSVG(t *testing.T) {
	var buf bytes.Buffer
	if err := NewReport(testRuns(), ScxSimple, nil).WriteCDF(&buf, "inference"); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	lines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the plot is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 2 {
		t.Errorf("%d curves, want one per scheduler (2)", lines)
	}
	if err := NewReport(testRuns(), ScxSimple, nil).WriteCDF(&buf, "batch"); err == nil {
		t.Error("plotting a class without samples succeeded")
	}
}
