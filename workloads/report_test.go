package workloads

import (
	"strings"
	"testing"
	"time"
)

func lateness(samples ...time.Duration) PeriodicResult {
	var r PeriodicResult
	for _, s := range samples {
		r.Lateness.Record(uint64(s))
	}
	return r
}

func TestWriteReportRowsAndRatios(t *testing.T) {
	const ms = time.Millisecond
	runs := []Run{
		{Scheduler: ScxSimple, Periodic: []PeriodicResult{lateness(10*ms, 20*ms, 40*ms)}, HogWork: 2e6, Measured: time.Second},
		{Scheduler: HotlaneName, Periodic: []PeriodicResult{lateness(ms, 2*ms, 4*ms)}, HogWork: 1e6, Measured: time.Second},
		{Scheduler: EEVDF, Failure: "did not start"},
	}
	var b strings.Builder
	if err := WriteReport(&b, runs, ScxSimple); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	row := func(name string) string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == name {
				return l
			}
		}
		t.Fatalf("no row for %s in:\n%s", name, out)
		return ""
	}
	// hotlane's p99 (4ms, bucket upper edge) over scx_simple's (40ms).
	if f := strings.Fields(row(HotlaneName)); f[len(f)-2] != "0.100" || f[len(f)-1] != "0.500" {
		t.Errorf("hotlane ratios %v, want p99 0.100 and hog 0.500:\n%s", f, out)
	}
	if f := strings.Fields(row(ScxSimple)); f[1] != "3" || f[len(f)-2] != "1.000" || f[7] != "0" {
		t.Errorf("baseline row %v:\n%s", f, out)
	}
	if !strings.Contains(out, "eevdf FAILED: did not start") {
		t.Errorf("failed scheduler not reported:\n%s", out)
	}
}
