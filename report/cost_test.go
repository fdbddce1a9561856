package report

import (
	"strings"
	"testing"
	"time"
)

func TestWriteCosts(t *testing.T) {
	var b strings.Builder
	err := WriteCosts(&b, "cost", []ProgramCost{
		{Program: "a", Runs: 1000, Total: 2 * time.Millisecond},
		{Program: "idle", Runs: 0},
		{Program: "b", Runs: 3000, Total: 6 * time.Millisecond},
	}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := b.String()
	t.Log("\n" + got)
	for _, want := range []string{"cost (over 1.00s):", "a ", "1000 runs", "2.00µs/run", "0.200% of one CPU", "all", "4000 runs", "0.800% of one CPU"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "idle") {
		t.Errorf("a program that never ran is listed:\n%s", got)
	}
}
