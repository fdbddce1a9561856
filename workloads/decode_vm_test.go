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
// (issue 42): the decode loop under hogs at 2x the CPUs, in one bench,
// under EEVDF, hotlane with a device-matched class that does not mention
// preempt, and hotlane with the same class and "preempt": false (started
// as a --scheduler program with its own policy): the first hotlane gives
// more tokens per second than EEVDF and a lower inter-token p50, the
// second no fewer tokens per second (issue 38: the first also keeps a
// larger fraction of the unloaded tokens/s and a lower inter-token p99). Under each, the class found by
// device use holds the decode threads and not their helpers.
func TestGuestDecodeDeviceLane(t *testing.T) {
	vmtest.RequireGuest(t)
	dir := t.TempDir()
	files := map[string]string{
		"decode.json":     decodeUnderHogs,
		"preempt.json":    fmt.Sprintf(decodeDevicePolicy, ""),
		"no-preempt.json": fmt.Sprintf(decodeDevicePolicy, `, "preempt": false`),
	}
	for name, text := range files {
		if err := safefile.WriteFile(filepath.Join(dir, name), []byte(text), safefile.Readable); err != nil {
			t.Fatal(err)
		}
	}
	const noPreempt = "hotlane-no-preempt"
	out := filepath.Join(dir, "out")
	runBench(t, "--workload", filepath.Join(dir, "decode.json"), "--policy", filepath.Join(dir, "preempt.json"),
		"--schedulers", "eevdf,hotlane,"+noPreempt,
		"--scheduler", noPreempt+"="+vmtest.HotlaneGuestPath+" run -q --policy "+filepath.Join(dir, "no-preempt.json"),
		"--duration", "4s", "--warmup", "1s", "--repeats", "2", "--bound", "", "--out", out)
	rep := readReport(t, out)
	er, hl, np := findRun(rep, workloads.EEVDF), findRun(rep, workloads.HotlaneName), findRun(rep, noPreempt)
	if !rep.Complete || er == nil || hl == nil || np == nil {
		t.Fatalf("report complete %v with %d runs; want EEVDF, hotlane and %s run to the end", rep.Complete, len(rep.Runs), noPreempt)
	}
	for _, run := range []*workloads.Run{er, hl, np} {
		if len(run.Summary.Decode) != 1 || run.Summary.Decode[0].TokensPerSecond <= 0 || run.HogWork == 0 || len(run.Classes) != 2 {
			t.Fatalf("%s: decode figures %+v, hog work %d, %d classes", run.Scheduler, run.Summary.Decode, run.HogWork, len(run.Classes))
		}
		// The class found by device use holds the decode threads (the
		// lane, by thread id) and nothing else: their helpers wake as
		// often and never touch the device.
		lane, class := run.Summary.Lane[workloads.ViewTracer].Samples, run.Classes[0].Hist.Count()
		if class == 0 || class > lane {
			t.Errorf("%s: %d wake-ups in the device class, %d of the decode threads: want some, and none of other threads", run.Scheduler, class, lane)
		}
	}
	u := workloads.DecodeSummary{}
	if len(rep.Unloaded) == 1 {
		u = rep.Unloaded[0]
	}
	e, h, n := er.Summary.Decode[0], hl.Summary.Decode[0], np.Summary.Decode[0]
	t.Logf("tokens/s: unloaded %.1f, EEVDF %.1f, hotlane %.1f (%.3fx EEVDF's, %.3fx unloaded), preempt false %.1f (%.3fx, %.3fx)",
		u.TokensPerSecond, e.TokensPerSecond, h.TokensPerSecond, h.TokensVsBaseline, h.TokensVsUnloaded,
		n.TokensPerSecond, n.TokensVsBaseline, n.TokensVsUnloaded)
	for _, d := range []struct {
		name string
		s    workloads.DecodeSummary
	}{{"unloaded", u}, {"EEVDF", e}, {"hotlane", h}, {"preempt false", n}} {
		t.Logf("%s: ITL p50 %s p99 %s max %s; TTFT p50 %s p99 %s", d.name, report.Duration(d.s.ITL.P50), report.Duration(d.s.ITL.P99),
			report.Duration(d.s.ITL.Max), report.Duration(d.s.TTFT.P50), report.Duration(d.s.TTFT.P99))
	}
	if h.TokensPerSecond <= e.TokensPerSecond {
		t.Errorf("hotlane %.1f tokens/s, not above EEVDF's %.1f", h.TokensPerSecond, e.TokensPerSecond)
	}
	if h.ITL.P50 >= e.ITL.P50 {
		t.Errorf("hotlane's inter-token p50 %s, not below EEVDF's %s", report.Duration(h.ITL.P50), report.Duration(e.ITL.P50))
	}
	if h.ITL.P99 >= e.ITL.P99 {
		t.Errorf("hotlane's inter-token p99 %s, not below EEVDF's %s", report.Duration(h.ITL.P99), report.Duration(e.ITL.P99))
	}
	if h.TokensVsUnloaded <= e.TokensVsUnloaded {
		t.Errorf("hotlane kept %.3f of the unloaded tokens/s, EEVDF %.3f: want more", h.TokensVsUnloaded, e.TokensVsUnloaded)
	}
	if n.TokensPerSecond < e.TokensPerSecond {
		t.Errorf(`hotlane with "preempt": false %.1f tokens/s, below EEVDF's %.1f`, n.TokensPerSecond, e.TokensPerSecond)
	}
}
