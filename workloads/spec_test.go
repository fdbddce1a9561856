package workloads

import (
	"os"
	"path/filepath"
	"slices"
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
	for file, want := range map[string]Mix{
		"examples/default.json":        DefaultMix(2),
		"examples/judges.json":         JudgesMix(2),
		"examples/request-server.json": RequestServerMix(2),
		"examples/decode.json":         DecodeMix(2),
	} {
		m, err := LoadWorkload(file, 2)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, m); diff != "" {
			t.Errorf("%s is not the built-in workload (-want +got):\n%s", file, diff)
		}
	}
	for _, name := range BuiltinWorkloads {
		m, err := LoadWorkload(name, 4)
		if err != nil || !m.HasLane() {
			t.Errorf("built-in workload %s: %v, or it has no lane", name, err)
		}
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
		{`{"stress_ng": [{"method": "int64"}]}`, "stress-ng has no workers"},
		{`{"stress_ng": [{"switch": "2y"}]}`, `switch: threads "2y"`},
		{`{"perf_bench": [{"bench": "sched"}]}`, `perf bench "sched"`},
		{`{"perf_bench": [{"bench": "messaging", "groups": 100}]}`, "groups 100"},
		{`{"sysbench": [{"test": "memory"}]}`, `sysbench test "memory"`},
		{`{"sysbench": [{"test": "cpu", "run_time": "500ms"}]}`, "whole seconds"},
		{`{"rt_app": [{"periodic": 1, "compute": "1ms"}]}`, "rate_hz 0"},
		{`{"rt_app": [{"chain": 2, "chain_rate_hz": 100, "chain_compute": "6ms"}]}`, "together below it"},
		{`{"rt_app": [{"periodic": 1, "rate_hz": 100}]}`, `compute "" is not a duration`},
		{`{"request_server": [{"sleep": "forever"}]}`, `sleep "forever" is not a duration`},
		{`{"request_server": [{"workers": 0}]}`, "workers: threads \"0\""},
		{`{"decode": [{"prefill": "5"}]}`, `decode 1: prefill "5" is not a duration`},
		{`{"decode": [{"host": "-1ms"}]}`, `host "-1ms" is not a duration`},
		{`{"decode": [{"device_time": "0s"}]}`, "device_time 0s must be 100µs..1s"},
		{`{"decode": [{"tokens": -3}]}`, "tokens -3 must be positive"},
		{`{"decode": [{"streams": "0x"}]}`, `streams: threads "0x"`},
		{`{"decode": [{"comm": "a-comm-of-16-byt"}]}`, `decode comm "a-comm-of-16-byt" must be 1..15 bytes`},
		{`{"decode": [{"helper_comm": "a-comm-of-16-byt"}]}`, "helper_comm"},
		{`{"decode": [{"steps": 3}]}`, `unknown field "steps"`},
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

// A decode server's fields all have defaults; "none" and "0s" leave out
// the ioctl and the helpers.
func TestParseDecode(t *testing.T) {
	m, err := ParseWorkload("w", []byte(`{"decode": [{}, {"streams": "2x", "tokens": 8, "device": "none", "helper": "0s",
		"prefill": "1ms", "host": "200us", "device_time": "5ms", "comm": "gpu-step"}]}`), 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []Decode{DefaultDecode(), {Comm: "gpu-step", HelperComm: DefaultDecodeHelperComm, Streams: 4, Tokens: 8,
		Prefill: time.Millisecond, Host: 200 * time.Microsecond, DeviceTime: 5 * time.Millisecond}}
	if diff := cmp.Diff(want, m.Decode); diff != "" {
		t.Errorf("decode servers (-want +got):\n%s", diff)
	}
	if !m.HasLane() || m.ownThreads() != 2+4 || !slices.Contains(m.LaneComms(), "gpu-step") {
		t.Errorf("decode servers: lane %v, %d threads, lane comms %v", m.HasLane(), m.ownThreads(), m.LaneComms())
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
	for _, file := range []string{"examples/default.json", "examples/bursty.json", "examples/outside-tools.json", "examples/judges.json"} {
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
			if err := g.validate(); err != nil {
				t.Fatalf("accepted an invalid stress-ng: %+v (%v)", g, err)
			}
		}
		for _, p := range m.PerfBench {
			if err := p.validate(); err != nil {
				t.Fatalf("accepted an invalid perf bench: %+v (%v)", p, err)
			}
		}
		for _, s := range m.Sysbench {
			if err := s.validate(); err != nil {
				t.Fatalf("accepted an invalid sysbench: %+v (%v)", s, err)
			}
		}
		for _, r := range m.RtApp {
			if err := r.validate(); err != nil {
				t.Fatalf("accepted an invalid rt-app: %+v (%v)", r, err)
			}
		}
		for _, r := range m.RequestServers {
			if err := r.validate(); err != nil {
				t.Fatalf("accepted an invalid request server: %+v (%v)", r, err)
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
	if _, err := LoadWorkload("nosuch", 2); err == nil || !strings.Contains(err.Error(), "neither a built-in (default, cyclictest, judges, request-server, decode) nor a file") {
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
		`{"stress_ng": [{"cpu": 5000}]}`:                                 "must be 0..1024 per stressor",
		`{"hackbench": [{"groups": 64, "fds": 20}]}`:                     "2 x groups x fds at most 1024 processes",
		`{"hackbench": [{"fds": -1}]}`:                                   "groups and fds must be positive",
	} {
		_, err := ParseWorkload("w.json", []byte(text), 2)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseWorkload(%s) = %v, want one line containing %q", text, err, want)
		}
	}
}
