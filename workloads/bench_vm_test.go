package workloads_test

import (
	"context"
	_ "embed"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/vm/vmtest"
	"github.com/hotlane/hotlane/workloads"
)

// TestVM runs the TestGuest* tests inside the sched_ext VM, with the
// kernel's scx_simple and scx_qmap, cyclictest and hackbench (rt-tests),
// stress-ng and sysbench.
// Multi-threaded TCG: the bench compares latencies.
func TestVM(t *testing.T) {
	vmtest.RunGuestTests(t, vmtest.Options{
		Run: "^TestGuest",
		Scx: []string{"scx_simple", "scx_qmap"},
		Executables: map[string]string{
			"/usr/bin/cyclictest": "cyclictest",
			"/usr/bin/stress-ng":  "stress-ng",
			"/usr/bin/hackbench":  "hackbench",
			"/usr/bin/sysbench":   "sysbench",
			"/usr/bin/sleep":      "sleep",
		},
		MultiThreadedTCG: true,
		Timeout:          10 * time.Minute,
	})
}

// A short bench through the CLI over every kind of variant: EEVDF with the
// lane at FIFO and DEADLINE, scx_qmap, scx_simple given as an outside
// scheduler with --scheduler, and hotlane. Every variant has lane samples
// in all four views (tracer, felt, our task, cyclictest), the views order the
// variants alike, the JSON says what the text says, and the plots are there.
func TestGuestShortBench(t *testing.T) {
	vmtest.RequireGuest(t)
	out := t.TempDir()
	text := runBench(t, "--schedulers", "eevdf,eevdf+fifo,eevdf+deadline,scx_qmap,ext,hotlane", "--scheduler", "ext="+vm.ScxSimpleGuestPath,
		"--duration", "3s", "--warmup", "500ms", "--repeats", "1", "--bound", "inference:max<=10s", "--out", out)

	rep := readReport(t, out)
	if !rep.Pass || !rep.Complete || len(rep.Runs) != 6 {
		t.Fatalf("report: pass %v complete %v, %d runs; want a passing run of 6 variants", rep.Pass, rep.Complete, len(rep.Runs))
	}
	for _, run := range rep.Runs {
		for _, view := range workloads.Views {
			s := run.Summary.Lane[view]
			if s.Samples == 0 {
				t.Errorf("%s: no lane samples in the %s view", run.Scheduler, view)
				continue
			}
			// The text table has the same figures as the JSON.
			want := strings.Join(append([]string{run.Scheduler, view}, s.Cells()...), " ")
			if !strings.Contains(squash(text), want) {
				t.Errorf("text report lacks %q", want)
			}
		}
		if run.Summary.Normal.Samples == 0 || run.HogWork == 0 || run.LaneCPU == 0 {
			t.Errorf("%s: no normal-task samples, hog work or lane CPU time: %+v", run.Scheduler, run.Summary)
		}
	}
	if ext := rep.Runs[4]; ext.Scheduler != "ext" || ext.Ops != "simple" {
		t.Errorf("the --scheduler variant ran %q as %q, want scx_simple (ops simple)", ext.Scheduler, ext.Ops)
	}
	if len(rep.Disagreements) > 0 {
		t.Errorf("the lane views disagree: %v", rep.Disagreements)
	}
	for _, f := range []string{"tail-tracer.svg", "tail-felt.svg", "tail-app.svg", "tail-cyclictest.svg", "tail-normal.svg", "cost.svg"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
}

func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// The outside-tool scenario, as the scheduler's own tests call it:
// cyclictest in the lane under stress-ng --cpu 2N, per variant the lane
// latency cyclictest itself measured.
func TestGuestCyclictestScenario(t *testing.T) {
	vmtest.RequireGuest(t)
	lanes, rep, err := workloads.RunCyclictestScenario(context.Background(), workloads.ScenarioConfig{
		Variants: []string{workloads.EEVDF, workloads.EEVDFFIFO, workloads.EEVDFNice, workloads.HotlaneName},
		// Two rounds of 8 s: about 1600 wake-ups a variant, so p99 is not
		// the 5th-worst of 500 (one 5 s round failed the ordering once on a
		// cold run while the tracer saw hotlane's p99 at a ninth of EEVDF's).
		Warmup: 500 * time.Millisecond, Duration: 8 * time.Second, Repeats: 2,
		Progress: os.Stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	rep.WriteText(&text)
	t.Logf("report:\n%s", text.String())
	// Everything below compares with the kernel's default: without it,
	// say so once rather than in every comparison.
	er := findRun(rep, workloads.EEVDF)
	if er == nil {
		t.Fatal("no EEVDF run in the report")
	}
	if er.Failure != "" {
		t.Fatalf("the EEVDF baseline failed, so nothing can be compared with it: %s", er.Failure)
	}
	for _, v := range []string{workloads.EEVDF, workloads.EEVDFFIFO, workloads.EEVDFNice, workloads.HotlaneName} {
		l, ok := lanes[v]
		if !ok || l.Samples == 0 || l.P50 == 0 || l.P99 < l.P50 {
			t.Errorf("%s: cyclictest lane %+v", v, l)
		}
		if run := findRun(rep, v); run == nil || run.StressOps == 0 || run.Summary.Lane[workloads.ViewTracer].Samples == 0 {
			t.Errorf("%s: no stress-ng work or no tracer view of cyclictest's thread", v)
		}
	}
	for _, run := range rep.Runs {
		for _, c := range run.Classes {
			if d := report.Summarize(c.TimerDelivery); d.Samples > 0 {
				t.Logf("%s: class %s: timer expiry to wake-up p50 %s p99 %s max %s over %d timer wake-ups", run.Scheduler, c.Class,
					report.Duration(d.P50), report.Duration(d.P99), report.Duration(d.Max), d.Samples)
			}
		}
	}
	// The tracer's felt view of cyclictest's measuring thread runs from
	// its timer's expiry to its sleep call's return (fexit, which the
	// VM's kernel allows); cyclictest reads its clock later, back in user
	// space. So the felt view never exceeds cyclictest's (but for one
	// bucket's width, 3.2 %) and always includes the wait from the
	// wake-up. At p50 they must agree within 20 % or 100 us, whichever is
	// larger, and the width of the bucket the tool's percentile falls in:
	// both percentiles are bucket edges of the same histogram type, so
	// their difference says the true one only to within a bucket. On
	// 2026-11-23 the gap was 57-98 us at p50 (the way back to user space
	// under TCG) and 65-131 us at p99 in three boots; on 2026-11-27 it
	// was 131 us at EEVDF's p50 of 655 us (20 %), in a boot where a later
	// test saw its timer fire 15.6 s late, so 10 % failed a tracer that
	// agreed with cyclictest as well as ever. At p99 (the 16th
	// worst of some 1600 samples) the two views' tails are not always
	// the same samples: in a cold run of 2026-11-24 hotlane's felt p99
	// was 3.15 ms against cyclictest's 2.29 ms while their p99.9 and max
	// agreed within 3 %. So p99 must lie within half of cyclictest's (or
	// 1 ms) and above the wait; the gap is logged.
	for _, v := range []string{workloads.EEVDF, workloads.HotlaneName} {
		run := findRun(rep, v)
		if run == nil {
			continue
		}
		wait, felt, ct := run.Summary.Lane[workloads.ViewTracer], run.Summary.Lane[workloads.ViewFelt], lanes[v]
		for _, q := range []struct {
			name             string
			wait, felt, tool time.Duration
			p99              bool
		}{{"p50", wait.P50, felt.P50, ct.P50, false}, {"p99", wait.P99, felt.P99, ct.P99, true}} {
			diff, tol := (q.felt - q.tool).Abs(), max(q.tool/5, 100*time.Microsecond)+q.tool/31
			if q.p99 {
				tol = max(q.tool/2, time.Millisecond)
			}
			t.Logf("%s: %s wait %s, felt %s, cyclictest %s: felt within %s of cyclictest (allowed %s)",
				v, q.name, report.Duration(q.wait), report.Duration(q.felt), report.Duration(q.tool), report.Duration(diff), report.Duration(tol))
			if q.felt < q.wait || (!q.p99 && q.felt > q.tool+q.tool/31) {
				t.Errorf("%s: the tracer's felt %s %s is not between its wait %s and cyclictest's own %s",
					v, q.name, report.Duration(q.felt), report.Duration(q.wait), report.Duration(q.tool))
			}
			if diff > tol {
				t.Errorf("%s: the tracer's felt %s %s is %s from cyclictest's own %s: want within %s",
					v, q.name, report.Duration(q.felt), report.Duration(diff), report.Duration(q.tool), report.Duration(tol))
			}
		}
	}
	// hotlane's lane must beat the kernel's default as seen by a tool
	// nobody here wrote, at p99, and so must SCHED_FIFO (which waits for
	// nobody). What cyclictest sees is the timer interrupt's delivery
	// (expiry to wake-up), the scheduler's part (wake-up to run) and the
	// way back to user space. Under TCG the delivery's tail is the host's
	// doing (a vCPU thread waiting for a host CPU): 1.7-3.7 ms at p99 in
	// quiet rounds, 13.6 ms in one SCHED_FIFO round of a cold CI-like run
	// on 2026-11-23, whatever the guest ran. So the scheduler's part is
	// ordered strictly, and cyclictest's own p99 whenever the host
	// delivered that variant's timers no later than EEVDF's (p99 within
	// 1.25x); otherwise the test says so. p90 is ordered in both views:
	// a lane that did not preempt would wait out part of a hog's slice
	// one time in two, as the issue saw (its p50 3-4 ms). On 2026-11-24
	// cyclictest's p90 was 459 us against EEVDF's 1.44 ms here. The
	// median is logged, not asserted: EEVDF
	// already preempts at once there, at SCHED_FIFO's floor (this test on
	// 2026-11-24: wake-up to run p50 65.5 against FIFO's 59.4 us), so no
	// class orders below it but by noise, and hotlane's median carries
	// sched_ext's callbacks under TCG (0.95-1.22x EEVDF's in five boots of
	// 2026-11-23; docs/results.md gives the command).
	e := lanes[workloads.EEVDF]
	for _, v := range []string{workloads.HotlaneName, workloads.EEVDFFIFO} {
		run, l := findRun(rep, v), lanes[v]
		if run == nil {
			t.Errorf("no %s run in the report", v)
			continue
		}
		w, ew := run.Summary.Lane[workloads.ViewTracer], er.Summary.Lane[workloads.ViewTracer]
		t.Logf("cyclictest in the lane, %s vs EEVDF: p50 %s vs %s, p90 %s vs %s, p99 %s vs %s (wake-up to run p50 %s vs %s)",
			v, report.Duration(l.P50), report.Duration(e.P50), report.Duration(l.P90), report.Duration(e.P90),
			report.Duration(l.P99), report.Duration(e.P99), report.Duration(w.P50), report.Duration(ew.P50))
		if w.P90 >= ew.P90 {
			t.Errorf("%s: cyclictest's wake-up to run p90 %s, not below EEVDF's %s", v, report.Duration(w.P90), report.Duration(ew.P90))
		}
		if l.P90 >= e.P90 {
			t.Errorf("%s: cyclictest p90 %s, not below EEVDF's %s", v, report.Duration(l.P90), report.Duration(e.P90))
		}
		if w.P99 >= ew.P99 {
			t.Errorf("%s: cyclictest's wake-up to run p99 %s, not below EEVDF's %s", v, report.Duration(w.P99), report.Duration(ew.P99))
		}
		d, ed := laneDelivery(run).P99, laneDelivery(er).P99
		if d > ed+ed/4 {
			t.Logf("%s: cyclictest's own p99 not compared: the host delivered its timers later than EEVDF's (p99 %s against %s)",
				v, report.Duration(d), report.Duration(ed))
			continue
		}
		if l.P99 >= e.P99 {
			t.Errorf("%s: cyclictest p99 %s, not below EEVDF's %s (timer delivery p99 %s against %s)",
				v, report.Duration(l.P99), report.Duration(e.P99), report.Duration(d), report.Duration(ed))
		}
	}
}

// hackbenchExample is the example workload TestGuestHackbenchScenario
// runs, embedded: the guest has no copy of the repository.
//
//go:embed examples/cyclictest-hackbench.json
var hackbenchExample []byte

// cyclictest over stress-ng and rt-tests' hackbench (2 groups of 8
// sender/receiver pairs, 32 tasks waking thousands of times a second), the
// example workload, through the CLI: the outside-tool scenario where the
// kernel's default does not already preempt at once. EEVDF gives each woken hackbench task
// its lag credit, so cyclictest often waits behind them (and behind
// stress-ng); the lane never does. hackbench runs to the end under both
// schedulers, and hotlane's lane is ordered below EEVDF's at p50 and p99
// in the tracer's wait, and at p50 in cyclictest's own histogram, the view
// of a tool nobody here wrote. cyclictest's own p99 is logged, not
// asserted: under TCG its tail is the host's delivery of the timer
// interrupt (see TestGuestCyclictestScenario). On 2026-11-24
// (HOTLANE_GUEST_RUN='^TestGuestHackbenchScenario$' go test ./workloads
// -run '^TestVM$' -v) seven runs with this workload written out in the
// test, and three with the example file itself, all passed: wait p50
// 51-117 us against EEVDF's 90-836 us, p99 168-492 us against 6.29-10.5
// ms; cyclictest's own p50 0.30-0.85x EEVDF's (229 against 270 us the
// closest). With a
// 500 ms warm-up stress-ng's workers had not run once by the end of a
// round under hackbench's start-up storm, so the warm-up is the bench's
// default 2 s.
func TestGuestHackbenchScenario(t *testing.T) {
	vmtest.RequireGuest(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "cyclictest-hackbench.json")
	if err := os.WriteFile(file, hackbenchExample, 0o644); err != nil {
		t.Fatal(err)
	}
	runBench(t, "--workload", file, "--schedulers", "eevdf,hotlane",
		"--duration", "4s", "--warmup", "2s", "--repeats", "1", "--bound", "", "--out", dir)
	rep := readReport(t, dir)
	er, hl := findRun(rep, workloads.EEVDF), findRun(rep, workloads.HotlaneName)
	if !rep.Complete || er == nil || hl == nil {
		t.Fatalf("report: complete %v, runs %d; want EEVDF and hotlane to have run to the end", rep.Complete, len(rep.Runs))
	}
	for _, run := range []*workloads.Run{er, hl} {
		if run.StressOps == 0 || run.Summary.Lane[workloads.ViewTracer].Samples == 0 || run.Summary.Lane[workloads.ViewOutside].Samples == 0 {
			t.Errorf("%s: no stress-ng work or no lane samples: %+v", run.Scheduler, run.Summary)
		}
	}
	w, ew := hl.Summary.Lane[workloads.ViewTracer], er.Summary.Lane[workloads.ViewTracer]
	c, ec := hl.Summary.Lane[workloads.ViewOutside], er.Summary.Lane[workloads.ViewOutside]
	t.Logf("hotlane vs EEVDF: wait p50 %s vs %s, p99 %s vs %s; cyclictest p50 %s vs %s, p99 %s vs %s",
		report.Duration(w.P50), report.Duration(ew.P50), report.Duration(w.P99), report.Duration(ew.P99),
		report.Duration(c.P50), report.Duration(ec.P50), report.Duration(c.P99), report.Duration(ec.P99))
	for _, q := range []struct {
		what      string
		hl, eevdf time.Duration
	}{
		{"cyclictest's wake-up to run p50", w.P50, ew.P50},
		{"cyclictest's wake-up to run p99", w.P99, ew.P99},
		{"cyclictest's own p50", c.P50, ec.P50},
	} {
		if q.hl >= q.eevdf {
			t.Errorf("%s under hotlane %s, not below EEVDF's %s", q.what, report.Duration(q.hl), report.Duration(q.eevdf))
		}
	}
}

// runBench runs hotlane bench with args, which must pass, and returns
// (and logs) its text report.
func runBench(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(vmtest.HotlaneGuestPath, append([]string{"bench"}, args...)...)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hotlane bench: %v\n%s", err, stdout.String())
	}
	t.Logf("report:\n%s", stdout.String())
	return stdout.String()
}

// readReport reads the report.json a bench wrote in dir.
func readReport(t *testing.T, dir string) *workloads.Report {
	t.Helper()
	rep, err := loadReport(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// laneDelivery is the run's timer expiry to wake-up time of the lane
// class (the policy's first).
func laneDelivery(run *workloads.Run) report.Latency {
	if len(run.Classes) == 0 {
		return report.Latency{}
	}
	return report.Summarize(run.Classes[0].TimerDelivery)
}

func findRun(rep *workloads.Report, name string) *workloads.Run {
	for i := range rep.Runs {
		if rep.Runs[i].Scheduler == name {
			return &rep.Runs[i]
		}
	}
	return nil
}

// A --scheduler command that never enables sched_ext is stopped after
// --enable-timeout and a missing scx_simple is skipped: the report says
// both, the verdict is INCOMPLETE, exit status 2, EEVDF is still measured,
// and nothing is left running.
func TestGuestBenchReportsFailedSchedulers(t *testing.T) {
	vmtest.RequireGuest(t)
	cmd := exec.Command(vmtest.HotlaneGuestPath, "bench", "--schedulers", "eevdf,scx_simple", "--scx-simple", "/nonexistent",
		"--scheduler", "never=/usr/bin/sleep 4242", "--enable-timeout", "2s", "--cyclictest", "none",
		"--duration", "1s", "--warmup", "0s", "--repeats", "1", "--bound", "", "--out", t.TempDir())
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
		t.Fatalf("bench with a scheduler that never enables: %v, want exit status 2\n%s", err, out)
	}
	for _, want := range []string{
		"never FAILED: sched_ext was not enabled within 2s of starting /usr/bin/sleep 4242",
		"scx_simple SKIPPED: /nonexistent not found",
		"verdict: INCOMPLETE",
		"eevdf app",
	} {
		if !strings.Contains(squash(string(out)), want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "4242") {
			t.Errorf("%s is still running: %q", filepath.Dir(p), b)
		}
	}
	if s, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs); s.State != "disabled" {
		t.Errorf("sched_ext is %s after the bench", s.State)
	}
}
