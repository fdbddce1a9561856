package workloads_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/vm/vmtest"
	"github.com/hotlane/hotlane/workloads"
)

// TestVM runs the TestGuest* tests inside the sched_ext VM, with the
// upstream scx_simple.
func TestVM(t *testing.T) {
	vmtest.RunGuestTests(t, vmtest.Options{Run: "^TestGuest", ScxSimple: true, Timeout: 10 * time.Minute})
}

// A short bench through the CLI: every scheduler and class has samples,
// the JSON says what the text says, and the plot is there.
func TestGuestShortBench(t *testing.T) {
	vmtest.RequireGuest(t)
	out := t.TempDir()
	cmd := exec.Command(vmtest.HotlaneGuestPath, "bench", "--duration", "2s", "--warmup", "500ms", "--repeats", "1",
		"--bound", "inference:max<=10s", "--out", out)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hotlane bench: %v\n%s", err, stdout.String())
	}
	text := stdout.String()
	t.Logf("report:\n%s", text)

	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep workloads.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if !rep.Pass || !rep.Complete || len(rep.Runs) != 4 {
		t.Fatalf("report: pass %v complete %v, %d runs; want a passing run of 4 schedulers", rep.Pass, rep.Complete, len(rep.Runs))
	}
	for _, run := range rep.Runs {
		for _, c := range run.Classes {
			s := report.Summarize(c.Hist)
			if s.Samples == 0 {
				t.Errorf("%s: no %s samples", run.Scheduler, c.Class)
			}
			// The text table has the same figures as the JSON.
			want := strings.Join(append([]string{run.Scheduler}, s.Cells()...), " ")
			if !strings.Contains(squash(text), want) {
				t.Errorf("text report lacks %q", want)
			}
		}
		if run.Periodic[0].Lateness.Count() == 0 || run.HogWork == 0 {
			t.Errorf("%s: no application samples or hog work", run.Scheduler)
		}
	}
	if st, err := os.Stat(filepath.Join(out, "cdf-inference.svg")); err != nil || st.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
}

func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// A scheduler that cannot start makes the bench incomplete: reported and
// exit status 2, the others still measured.
func TestGuestBenchReportsAFailedScheduler(t *testing.T) {
	vmtest.RequireGuest(t)
	cmd := exec.Command(vmtest.HotlaneGuestPath, "bench", "--schedulers", "eevdf,scx_simple", "--scx-simple", "/nonexistent",
		"--duration", "1s", "--warmup", "0s", "--repeats", "1", "--bound", "", "--out", t.TempDir())
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
		t.Fatalf("bench with a missing scx_simple: %v, want exit status 2\n%s", err, out)
	}
	if !strings.Contains(string(out), "scx_simple FAILED: start /nonexistent") || !strings.Contains(string(out), "verdict: INCOMPLETE") {
		t.Errorf("report does not show the failure:\n%s", out)
	}
}
