package workloads_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/vm/vmtest"
	"github.com/hotlane/hotlane/workloads"
)

// judgesTopology is the guest of TestVMJudges: eight CPUs in two sockets,
// each socket its own LLC, so the judges' tasks are spread and stolen
// across LLCs.
var judgesTopology = vm.Topology{Sockets: 2, Cores: 4, Threads: 1, Nodes: 1}

// TestVMJudges boots an 8-CPU guest in two sockets with the outside judges
// and runs a short bench of the judges workload under EEVDF and hotlane
// in that boot (TestGuestJudges).
func TestVMJudges(t *testing.T) {
	vmtest.RunGuestTests(t, vmtest.Options{
		Run:    "^TestGuestJudges$",
		Judges: true, Topology: &judgesTopology, MultiThreadedTCG: true,
		Timeout: 10 * time.Minute,
	})
}

// Every judge runs under both schedulers and says so in the JSON with a
// figure of its own above zero: perf bench sched messaging and pipe,
// sysbench threads and cpu, rt-app's periodic tasks and chain, stress-ng's
// switch, futex and pipe stressors, and the request server; and the rest
// of the machine has, under hotlane, each of those figures beside
// EEVDF's. Which scheduler did better is asserted for the lane alone
// (below), by an ordering with a wide margin, not a timing.
func TestGuestJudges(t *testing.T) {
	vmtest.RequireBoot(t, "Judges", "TestVMJudges")
	out := t.TempDir()
	// 30 s: perf messaging finished 2 runs in 10 s under EEVDF in this
	// guest and 0 under hotlane in one of four tries (2026-11-27); in
	// 20 s hotlane finished 1 and 2.
	text := runBench(t, "--workload", workloads.WorkloadJudges, "--schedulers", "eevdf,hotlane",
		"--duration", "30s", "--warmup", "2s", "--repeats", "1", "--bound", "", "--out", out)
	rep := readReport(t, out)
	if !rep.Complete || len(rep.Runs) != 2 {
		t.Fatalf("report: complete %v, %d runs; want EEVDF and hotlane run to the end", rep.Complete, len(rep.Runs))
	}
	judges := []string{"perf-messaging", "perf-pipe", "sysbench-threads", "sysbench-cpu", "rt-app-periodic", "rt-app-chain",
		"stress-ng-switch", "stress-ng-futex", "stress-ng-pipe"}
	// rt-app 1.0 can hang at exit with a log unwritten (its own lost
	// wake-up, every thread asleep): that judge then has no figure, and
	// says why in a note.
	lost := map[string]bool{}
	for _, run := range rep.Runs {
		if len(run.Judgements) != len(judges) {
			t.Fatalf("%s: %d judgements, want %d", run.Scheduler, len(run.Judgements), len(judges))
		}
		for i, j := range run.Judgements {
			f, ok := j.Figure()
			if j.Judge == judges[i] && !ok && strings.HasPrefix(j.Judge, "rt-app") && slices.ContainsFunc(j.Notes, func(n string) bool {
				return strings.Contains(n, "no figure this round")
			}) {
				t.Logf("%s: %s has no figure: %s", run.Scheduler, j.Judge, j.Notes)
				lost[j.Judge] = true
				continue
			}
			if j.Judge != judges[i] || j.Runs == 0 || !ok || f.Value <= 0 {
				t.Errorf("%s: judgement %d is %s with %d runs and figure %+v; want %s with a figure above 0", run.Scheduler, i, j.Judge, j.Runs, f, judges[i])
			}
		}
		if len(run.RequestServers) != 1 || run.RequestServers[0].Served == 0 || run.RequestServers[0].Request.Count() == 0 {
			t.Errorf("%s: request server %+v served nothing", run.Scheduler, run.RequestServers)
		}
		if run.Fair == nil || run.Fair.Count() == 0 {
			t.Errorf("%s: no fair-class wake-ups from the tracer", run.Scheduler)
		}
	}
	// Under hotlane, every figure of the rest of the machine has EEVDF's
	// beside it, and the text says the same.
	hot := findRun(rep, workloads.HotlaneName)
	want := append(append([]string{"fair wake-up p99"}, judges...), "request-server", "request-server request p99", "lane wake-up p99")
	for _, name := range want {
		if lost[name] {
			continue
		}
		found := false
		for _, f := range hot.Summary.Rest {
			if f.Name == name || strings.HasPrefix(f.Name, name+" ") {
				found = f.Value > 0 && f.Baseline > 0 && f.VsBaseline > 0
			}
		}
		if !found {
			t.Errorf("hotlane's rest of the machine has no %s beside EEVDF's: %+v", name, hot.Summary.Rest)
		}
	}
	if !strings.Contains(text, "rest of the machine under hotlane") {
		t.Errorf("the text report has no rest-of-the-machine table for hotlane")
	}
	// The one ordering asserted: beside every judge at once, the lane
	// still waits less than under EEVDF at p99 (the tracer's wake-up
	// latency of the lane's threads). It was 0.22-0.46x EEVDF's in every
	// boot of this guest recorded in docs/results.md; the fair class's
	// orderings of issue 36 do not hold yet and are not asserted.
	for _, f := range hot.Summary.Rest {
		if f.Name == "lane wake-up p99" && f.VsBaseline >= 1 {
			t.Errorf("the lane's wake-up p99 beside the judges was %v under hotlane, %.2fx EEVDF's %v: want below EEVDF's",
				time.Duration(f.Value), f.VsBaseline, time.Duration(f.Baseline))
		}
	}
}

// Environment of make scale (TestVMScaleJudges).
const (
	scaleEnv         = "HOTLANE_SCALE"          // CPU counts, e.g. "16 32"
	scaleOutEnv      = "HOTLANE_SCALE_OUT"      // the summary's file
	scaleDurationEnv = "HOTLANE_SCALE_DURATION" // --duration of each round
	scaleRepeatsEnv  = "HOTLANE_SCALE_REPEATS"  // --repeats
)

// TestVMScaleJudges is make scale: for each CPU count of $HOTLANE_SCALE,
// one guest of two sockets (and two NUMA nodes) with that many CPUs runs
// the judges workload under EEVDF, scx_simple and hotlane
// (TestGuestScaleJudges), and the rest-of-the-machine figures of every
// boot go into one table, logged and written to $HOTLANE_SCALE_OUT. It
// goes on after a boot fails.
func TestVMScaleJudges(t *testing.T) {
	counts := strings.Fields(os.Getenv(scaleEnv))
	if len(counts) == 0 {
		t.Skipf("set %s to the CPU counts to run (make scale does: 16 32)", scaleEnv)
	}
	duration, repeats := orEnv(scaleDurationEnv, "20s"), orEnv(scaleRepeatsEnv, "2")
	var reports []workloads.LabeledReport
	var failed []string
	for _, c := range counts {
		n, err := strconv.Atoi(c)
		if err != nil || n < 2 || n%2 != 0 {
			t.Fatalf("%s: %q is not an even CPU count", scaleEnv, c)
		}
		topo := vm.Topology{Sockets: 2, Cores: n / 2, Threads: 1, Nodes: 2}
		label := fmt.Sprintf("%d CPUs (%s)", n, topo)
		t.Run(c, func(t *testing.T) {
			run, err := vmtest.RunGuest(t, vmtest.Options{
				Run:    "^TestGuestScaleJudges$",
				Judges: true, Scx: []string{"scx_simple"},
				Topology: &topo, Memory: "4G", MultiThreadedTCG: true,
				Env:     []string{scaleDurationEnv + "=" + duration, scaleRepeatsEnv + "=" + repeats},
				Timeout: 60 * time.Minute,
			})
			if run != nil {
				t.Logf("guest console (boot %.1fs, total %.1fs):\n%s", run.Boot.Seconds(), run.Total.Seconds(), run.Console)
			}
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %s", label, firstLine(err.Error())))
				t.Error(err)
			}
			if run == nil {
				return
			}
			rep, err := loadReport(filepath.Join(run.Results, "report.json"))
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", label, err))
				t.Error(err)
				return
			}
			reports = append(reports, workloads.LabeledReport{Label: label, Report: rep})
		})
	}
	var table strings.Builder
	fmt.Fprintf(&table, "# make scale\n\nThe judges workload (hotlane bench --workload judges --schedulers eevdf,scx_simple,hotlane --duration %s --repeats %s)\n", duration, repeats)
	fmt.Fprintf(&table, "in one guest per size, two sockets and two NUMA nodes, under TCG: each figure with its ratio to EEVDF's.\n\n")
	if err := workloads.WriteRestMarkdown(&table, reports); err != nil {
		t.Fatal(err)
	}
	for _, f := range failed {
		fmt.Fprintf(&table, "\nFAILED %s\n", f)
	}
	t.Logf("make scale:\n%s", table.String())
	if out := os.Getenv(scaleOutEnv); out != "" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := safefile.WriteFile(out, []byte(table.String()), safefile.Readable); err != nil {
			t.Fatal(err)
		}
	}
}

// The bench of make scale, in the guest: its report.json goes to the
// results the host reads. A variant that fails or is skipped is in the
// report, not a failure here: the table says so.
func TestGuestScaleJudges(t *testing.T) {
	vmtest.RequireBoot(t, "ScaleJudges", "TestVMScaleJudges")
	out := os.Getenv("HOTLANE_RESULTS")
	if out == "" {
		t.Fatal("HOTLANE_RESULTS is not set in the guest")
	}
	cmd := exec.Command(vmtest.HotlaneGuestPath, "bench", "--workload", workloads.WorkloadJudges,
		"--schedulers", "eevdf,scx_simple,hotlane", "--duration", orEnv(scaleDurationEnv, "20s"), "--repeats", orEnv(scaleRepeatsEnv, "2"),
		"--bound", "", "--out", out)
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	err := cmd.Run()
	t.Logf("report:\n%s", stdout.String())
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 2) {
		t.Fatalf("hotlane bench: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "report.json")); err != nil {
		t.Fatal(err)
	}
}

func orEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// loadReport reads a bench's report.json.
func loadReport(path string) (*workloads.Report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep workloads.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}
