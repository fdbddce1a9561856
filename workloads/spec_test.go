package workloads

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExamplesParse(t *testing.T) {
	files, _ := filepath.Glob("examples/*.json")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		if _, err := LoadWorkload(f, 2); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	m, err := LoadWorkload("examples/default.json", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DefaultMix(2), m); diff != "" {
		t.Errorf("examples/default.json is not the default workload (-want +got):\n%s", diff)
	}
}

func TestParseWorkloadErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"{\n  \"periodic\": [{\"rate_hz\": 100,}]\n}", "w.json:2:"},
		{`{"periodic": [{"rate": 100}]}`, `unknown field "rate"`},
		{`{"periodic": [{"rate_hz": 100, "compute": "2"}]}`, `compute "2" is not a duration`},
		{`{"periodic": [{"rate_hz": 100, "compute": "20ms"}]}`, "must be less than the period"},
		{`{"periodic": [{"rate_hz": -1, "compute": "1ms"}]}`, "rate_hz -1"},
		{`{"hogs": [{"threads": "0x"}]}`, `threads "0x"`},
		{`{"hogs": [{"threads": 5000}]}`, "at most 1024 threads"},
		{`{"messaging": [{"pairs": 0}]}`, "pairs must be"},
		{`{}`, "no generators"},
		{``, "empty file"},
		{`{"periodic": "x"}`, "w.json:1:"},
	} {
		_, err := ParseWorkload("w.json", []byte(tc.text), 2)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseWorkload(%q) = %v, want an error containing %q", tc.text, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
	}
}

func TestThreadCountsPerCPU(t *testing.T) {
	m, err := ParseWorkload("w", []byte(`{"hogs": [{"threads": "3x"}, {"threads": 5}]}`), 4)
	if err != nil {
		t.Fatal(err)
	}
	if m.Hogs[0].Threads != 12 || m.Hogs[1].Threads != 5 {
		t.Errorf("threads %d, %d; want 12, 5", m.Hogs[0].Threads, m.Hogs[1].Threads)
	}
}

func TestBurstEveryKthPeriod(t *testing.T) {
	p := Periodic{Period: 10 * time.Millisecond, Compute: time.Millisecond, BurstEvery: 3, BurstCompute: 5 * time.Millisecond}
	var got []time.Duration
	for k := 1; k <= 6; k++ {
		got = append(got, p.computeFor(k))
	}
	want := []time.Duration{time.Millisecond, time.Millisecond, 5 * time.Millisecond, time.Millisecond, time.Millisecond, 5 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("compute per period (-want +got):\n%s", diff)
	}
}

func FuzzParseWorkload(f *testing.F) {
	for _, file := range []string{"examples/default.json", "examples/bursty.json", "examples/outside-tools.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"hogs": [{"threads": "1x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseWorkload("fuzz.json", data, 2)
		if err != nil {
			return
		}
		// Whatever is accepted is runnable as described.
		for _, p := range m.Periodic {
			if err := p.validate(); err != nil || p.Threads > MaxThreads {
				t.Fatalf("accepted an invalid periodic task: %+v (%v)", p, err)
			}
		}
		for _, h := range m.Hogs {
			if h.Threads <= 0 || h.Threads > MaxThreads {
				t.Fatalf("accepted %d hog threads", h.Threads)
			}
		}
		for _, c := range m.Cyclictest {
			if err := c.validate(); err != nil {
				t.Fatalf("accepted an invalid cyclictest: %+v (%v)", c, err)
			}
		}
		for _, g := range m.StressNg {
			if g.CPU <= 0 || g.CPU > MaxThreads {
				t.Fatalf("accepted %d stress-ng workers", g.CPU)
			}
		}
	})
}

func TestOutsideToolsInWorkloadFiles(t *testing.T) {
	m, err := LoadWorkload("examples/outside-tools.json", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(CyclictestScenario(2), m); diff != "" {
		t.Errorf("examples/outside-tools.json is not the cyclictest scenario (-want +got):\n%s", diff)
	}
	if b, ok := BuiltinWorkload(WorkloadCyclictest, 2); !ok || b.StressNg[0].CPU != 4 || b.Cyclictest[0].Interval != 10*time.Millisecond {
		t.Errorf("built-in cyclictest workload %+v", b)
	}
	if m, err := LoadWorkload("cyclictest", 3); err != nil || m.StressNg[0].CPU != 6 {
		t.Errorf("LoadWorkload(cyclictest) = %+v, %v", m, err)
	}
	if _, err := LoadWorkload("nosuch", 2); err == nil || !strings.Contains(err.Error(), "neither a built-in (default, cyclictest) nor a file") {
		t.Errorf("unknown name: %v", err)
	}
	if got := (Mix{Periodic: []Periodic{{Comm: "infer"}}, Cyclictest: []Cyclictest{{}}}).LaneComms(); strings.Join(got, ",") != "infer,cyclictest" {
		t.Errorf("lane comms %v", got)
	}
	for text, want := range map[string]string{
		`{"cyclictest": [{"rate_hz": 0}]}`:                               "rate_hz 0",
		`{"cyclictest": [{"rate_hz": 100, "histogram_limit": "1s5"}]}`:   `histogram_limit "1s5"`,
		`{"cyclictest": [{"rate_hz": 100, "histogram_limit": "100us"}]}`: "limit 100µs must be 1ms..10s",
		`{"cyclictest": [{"rate_hz": 100, "threads": -1}]}`:              "threads must be positive",
		`{"stress_ng": [{"cpu": "0"}]}`:                                  `cpu: threads "0"`,
		`{"stress_ng": [{"cpu": 5000}]}`:                                 "at most 1024 cpu workers",
		`{"hackbench": [{"groups": 64, "fds": 20}]}`:                     "2 x groups x fds at most 1024 processes",
		`{"hackbench": [{"fds": -1}]}`:                                   "groups and fds must be positive",
	} {
		_, err := ParseWorkload("w.json", []byte(text), 2)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseWorkload(%s) = %v, want one line containing %q", text, err, want)
		}
	}
}
