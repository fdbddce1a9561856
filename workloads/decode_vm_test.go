package workloads_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/vm/vmtest"
	"github.com/hotlane/hotlane/workloads"
)

// decodeUnderHogs is the decode loop of issue 42 under CPU hogs at 2x the
// CPUs: per token 300 us of CPU work, an ioctl on /dev/full and a 2 ms
// wait on a timerfd, with a detokenizer thread that never touches the
// device.
const decodeUnderHogs = `{
  "decode": [{"tokens": 64, "prefill": "5ms", "host": "300us", "device_time": "2ms", "device": "/dev/full", "helper": "50us"}],
  "hogs": [{"threads": "2x"}]
}`

// A high-priority class found by device use (/dev/full is 1:7), no comm
// names; %s is what the class says of preempt.
const decodeDevicePolicy = `{"classes": [
  {"name": "inference", "high_priority": true%s, "match": [{"device": "1:7"}]},
  {"name": "normal"}
]}`

// A high-priority class must never serve its tasks later than EEVDF would
// (issue 42): the decode loop under hogs at 2x the CPUs, EEVDF against
// hotlane with a device-matched class that does not mention preempt, in
// one bench: hotlane gives more tokens per second and a lower inter-token
// p50. Then the same with "preempt": false, in a bench of its own (EEVDF
// again beside it, so each comparison is of neighbouring rounds): its
// tokens per second are not below EEVDF's. In both, the class holds the
// decode threads and not their helpers (the device matcher found them).
func TestGuestDecodeDeviceLane(t *testing.T) {
	vmtest.RequireGuest(t)
	dir := t.TempDir()
	workload := filepath.Join(dir, "decode.json")
	if err := safefile.WriteFile(workload, []byte(decodeUnderHogs), safefile.Readable); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, preempt string
		strict        bool // the ITL p50 is ordered too
	}{
		{"preempt-default", "", true},
		{"preempt-false", `, "preempt": false`, false},
	} {
		pol := filepath.Join(dir, tc.name+".json")
		if err := safefile.WriteFile(pol, fmt.Appendf(nil, decodeDevicePolicy, tc.preempt), safefile.Readable); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, tc.name)
		runBench(t, "--workload", workload, "--policy", pol, "--schedulers", "eevdf,hotlane",
			"--duration", "4s", "--warmup", "1s", "--repeats", "2", "--bound", "", "--out", out)
		rep := readReport(t, out)
		er, hl := findRun(rep, workloads.EEVDF), findRun(rep, workloads.HotlaneName)
		if !rep.Complete || er == nil || hl == nil {
			t.Fatalf("%s: report complete %v with %d runs; want EEVDF and hotlane run to the end", tc.name, rep.Complete, len(rep.Runs))
		}
		for _, run := range []*workloads.Run{er, hl} {
			if len(run.Summary.Decode) != 1 || run.Summary.Decode[0].TokensPerSecond <= 0 || run.HogWork == 0 || len(run.Classes) != 2 {
				t.Fatalf("%s: %s: decode figures %+v, hog work %d, %d classes", tc.name, run.Scheduler, run.Summary.Decode, run.HogWork, len(run.Classes))
			}
			// The class found by device use holds the decode threads
			// (the lane, by thread id) and nothing else: their helpers
			// wake as often and never touch the device.
			lane, class := run.Summary.Lane[workloads.ViewTracer].Samples, run.Classes[0].Hist.Count()
			if class == 0 || class > lane {
				t.Errorf("%s: %s: %d wake-ups in the device class, %d of the decode threads: want some, and none of other threads",
					tc.name, run.Scheduler, class, lane)
			}
		}
		e, h := er.Summary.Decode[0], hl.Summary.Decode[0]
		u := workloads.DecodeSummary{}
		if len(rep.Unloaded) == 1 {
			u = rep.Unloaded[0]
		}
		t.Logf("%s: tokens/s unloaded %.1f, EEVDF %.1f, hotlane %.1f (%.3fx EEVDF's, %.3fx unloaded); ITL p50/p99 unloaded %s/%s, EEVDF %s/%s, hotlane %s/%s; TTFT p99 EEVDF %s, hotlane %s",
			tc.name, u.TokensPerSecond, e.TokensPerSecond, h.TokensPerSecond, h.TokensVsBaseline, h.TokensVsUnloaded,
			report.Duration(u.ITL.P50), report.Duration(u.ITL.P99), report.Duration(e.ITL.P50), report.Duration(e.ITL.P99),
			report.Duration(h.ITL.P50), report.Duration(h.ITL.P99), report.Duration(e.TTFT.P99), report.Duration(h.TTFT.P99))
		if tc.strict {
			if h.TokensPerSecond <= e.TokensPerSecond {
				t.Errorf("%s: hotlane %.1f tokens/s, not above EEVDF's %.1f", tc.name, h.TokensPerSecond, e.TokensPerSecond)
			}
			if h.ITL.P50 >= e.ITL.P50 {
				t.Errorf("%s: hotlane's inter-token p50 %s, not below EEVDF's %s", tc.name, report.Duration(h.ITL.P50), report.Duration(e.ITL.P50))
			}
		} else if h.TokensPerSecond < e.TokensPerSecond {
			t.Errorf("%s: hotlane %.1f tokens/s, below EEVDF's %.1f", tc.name, h.TokensPerSecond, e.TokensPerSecond)
		}
	}
}
