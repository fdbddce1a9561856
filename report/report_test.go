package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

func TestSummarizeIsConservative(t *testing.T) {
	var h verify.Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(uint64(i) * uint64(time.Microsecond))
	}
	s := report.Summarize(&h)
	if s.Samples != 1000 || s.Max != time.Millisecond {
		t.Errorf("samples/max = %d/%v", s.Samples, s.Max)
	}
	// The true p99 is 990µs: the reported one is not below it and at
	// most one bucket (3.2 %) above it.
	if s.P99 < 990*time.Microsecond || s.P99 > 1022*time.Microsecond {
		t.Errorf("p99 = %v, want within [990µs, 1.022ms]", s.P99)
	}
	if diff := cmp.Diff(report.Latency{}, report.Summarize(&verify.Histogram{})); diff != "" {
		t.Errorf("empty histogram (-want +got):\n%s", diff)
	}
}

func TestDurationFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		812:                     "812ns",
		41200:                   "41.2µs",
		3070 * time.Microsecond: "3.07ms",
		1200 * time.Millisecond: "1.20s",
		250 * time.Millisecond:  "250ms",
	} {
		if got := report.Duration(d); got != want {
			t.Errorf("Duration(%d) = %q, want %q", d, got, want)
		}
	}
}

func TestLossesSayNoneOrShout(t *testing.T) {
	var b strings.Builder
	report.Losses{{What: "ring buffer full"}, {What: "map full"}}.WriteText(&b)
	if got := b.String(); got != "lost events: none (ring buffer full 0, map full 0)\n" {
		t.Errorf("no losses: %q", got)
	}
	b.Reset()
	report.Losses{{What: "ring buffer full", Count: 3}, {What: "map full", Count: 4}}.WriteText(&b)
	if !strings.Contains(b.String(), "7 EVENTS LOST") {
		t.Errorf("losses: %q", b.String())
	}
}

// Data left out of one optional view is said, once, without shouting, and
// is not counted as events lost.
func TestPartialLossesAreNotEventsLost(t *testing.T) {
	l := report.Losses{{What: "ring buffer full"}, {What: "samples not in the per-task table", Count: 5, Partial: true}}
	if l.Total() != 0 {
		t.Errorf("Total = %d, want 0: a partial view loses no events", l.Total())
	}
	var b strings.Builder
	l.WriteText(&b)
	want := "lost events: none (ring buffer full 0)\nleft out: samples not in the per-task table: 5\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	report.Losses{{What: "ring buffer full"}, {What: "per-task", Partial: true}}.WriteText(&b)
	if strings.Contains(b.String(), "left out") {
		t.Errorf("a partial loss of 0 is printed: %q", b.String())
	}
}

func TestTableAligns(t *testing.T) {
	tb := report.Table{Header: []string{"class", "p99"}}
	tb.Add("inference", "1.02ms")
	tb.Add("normal", "12.0ms")
	var b strings.Builder
	tb.WriteText(&b)
	// Right-aligned to the widest cell of each column, two spaces apart.
	want := "      class     p99\n" +
		"  inference  1.02ms\n" +
		"     normal  12.0ms\n"
	if b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
}
