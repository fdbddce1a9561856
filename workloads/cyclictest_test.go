package workloads

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/report"
)

// testdata/cyclictest-2threads.hist is what rt-tests 2.4's cyclictest
// wrote on a bookworm host: cyclictest -q -D 2 -i 10000 -t 2 -h 200
// --default-system --histfile=...
func TestParseCyclictestHistogram(t *testing.T) {
	f, err := os.Open("testdata/cyclictest-2threads.hist")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := ParseCyclictestHistogram(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Threads) != 2 {
		t.Fatalf("%d threads, want 2", len(h.Threads))
	}
	t0, t1 := h.Threads[0], h.Threads[1]
	if t0.Total != 197 || t0.Overflows != 3 || t0.Min != 40*time.Microsecond || t0.Avg != 143*time.Microsecond || t0.Max != 8344*time.Microsecond {
		t.Errorf("thread 0: %+v", t0)
	}
	if t1.Total != 199 || t1.Overflows != 1 || t1.Max != 4011*time.Microsecond {
		t.Errorf("thread 1: %+v", t1)
	}
	if t0.Counts[100] != 9 || t1.Counts[100] != 4 {
		t.Errorf("bin 100us: %d, %d; want 9, 4", t0.Counts[100], t1.Counts[100])
	}
	// All samples, overflows at each thread's maximum.
	s := report.Summarize(h.Lateness())
	if s.Samples != 197+3+199+1 || s.Max != 8344*time.Microsecond {
		t.Errorf("merged: %+v", s)
	}
	if s.P999 < 4*time.Millisecond {
		t.Errorf("p99.9 %s: the 4 overflows (1%% of the samples, at 4-8ms) must set it", s.P999)
	}
}

func TestParseCyclictestHistogramErrors(t *testing.T) {
	for text, want := range map[string]string{
		"":                                    "no '# Total:' line",
		"# Histogram\n000001 000002\n":        "no '# Total:' line",
		"000001 x\n# Total: 1\n":              "line 1",
		"000001 000002\n# Total: 000000001\n": "hold 2 samples but its total says 1",
		"000001 000002\n# Total: 000000002 00003\n": "has 1 counts for 2 threads",
		"# Total: 000000001 zz\n":                   "Total",
	} {
		_, err := ParseCyclictestHistogram(strings.NewReader(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCyclictestHistogram(%q) = %v, want an error containing %q", text, err, want)
		}
	}
}

func TestCyclictestArgs(t *testing.T) {
	c := Cyclictest{Interval: 10 * time.Millisecond, Threads: 1, Limit: DefaultCyclictestLimit}
	got := strings.Join(c.Args("/tmp/h"), " ")
	want := "--quiet --default-system --interval=10000 --threads=1 --histogram=200000 --histfile=/tmp/h"
	if got != want {
		t.Errorf("args %q, want %q", got, want)
	}
}

// Runs the host's cyclictest, stress-ng and hackbench for a second: both
// views come back with samples, the lane policy holds on cyclictest's
// thread, and hackbench runs to the end without an error.
func TestOutsideToolsOnHost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs cyclictest and stress-ng")
	}
	for _, p := range []string{"cyclictest", "stress-ng", "hackbench"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (scripts/deps.sh installs it)", p)
		}
	}
	lane := LanePolicy{}
	if os.Geteuid() == 0 {
		lane = LanePolicy{Kind: LaneFIFO, Priority: 10}
	}
	m := Mix{
		Cyclictest: []Cyclictest{{Interval: 10 * time.Millisecond, Threads: 1, Limit: 100 * time.Millisecond}},
		StressNg:   []StressNg{{CPU: 1}},
		Hackbench:  []Hackbench{{Groups: 1, Fds: 2}},
		Lane:       lane,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	res, err := m.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Cyclictest[0].Lateness.Count(); n < 20 || len(res.LaneTIDs()) != 1 {
		t.Errorf("cyclictest: %d samples, lane threads %v", n, res.LaneTIDs())
	}
	if res.StressOps[0] == 0 {
		t.Error("stress-ng did no work")
	}
}

// hackbench that fails is an error, not missing load nobody notices.
func TestHackbenchThatFailsIsAnError(t *testing.T) {
	if testing.Short() {
		t.Skip("runs /bin/false as hackbench")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := Hackbench{Path: "/bin/false", Groups: 1, Fds: 1}.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "hackbench failed during the run") {
		t.Errorf("hackbench as /bin/false: %v, want it to have failed during the run", err)
	}
}
