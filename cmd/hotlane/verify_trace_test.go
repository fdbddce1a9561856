package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startGroup starts a command in its own process group, which the test's
// end kills.
func startGroup(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
}

// A sleeper (a copy of sleep(1) named hl-sleeper, so that verify selects
// it alone) under a bound every wait breaks: verify --stop-on-violation
// ends at the first violation with exit status 1, having run the
// --on-violation command once with that violation in its environment, and
// writes the trace and the plot (mode 0600), which the report names.
// (verify's TestTraceOfAnRTHog puts a realtime hog behind the violation;
// none here, where the other packages' tests run at the same time and
// their own hogs must not be held up.)
func TestVerifyStopsOnViolation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	bin := hotlaneBinary(t)
	dir := t.TempDir()
	sleeper := filepath.Join(dir, "hl-sleeper")
	sleep, _ := exec.LookPath("sleep")
	if data, err := os.ReadFile(sleep); err != nil || os.WriteFile(sleeper, data, 0o755) != nil {
		t.Fatalf("copy %s: %v", sleep, err)
	}
	startGroup(t, "sh", "-c", `while :; do "$0" 0.001; done`, sleeper)

	trace, plot, report := filepath.Join(dir, "trace.json"), filepath.Join(dir, "worst.svg"), filepath.Join(dir, "verify.json")
	stdout, stderr, code := runCLI(t, bin, "verify", "--inference-comm", "hl-sleeper", "--comm", "hl-sleeper",
		"--bound", "inference:max<=1ns", "--duration", "60s", "--stop-on-violation", "--trace", trace, "--plot", plot,
		"--json", report, "--top", "0", "--no-histograms", "-q", "--on-violation", "--", "env")
	if code != exitFail {
		t.Fatalf("exit %d, want %d (stopped at a violation)\nstdout:\n%s\nstderr:\n%s", code, exitFail, stdout, stderr)
	}
	var res struct {
		Elapsed   time.Duration `json:"elapsed_ns"`
		Planned   time.Duration `json:"planned_ns"`
		Verdict   string        `json:"verdict"`
		StoppedBy *struct {
			PID  uint32 `json:"pid"`
			Comm string `json:"comm"`
			CPU  uint32 `json:"cpu"`
		} `json:"stopped_by"`
		Actions struct {
			Started uint64 `json:"started"`
		} `json:"on_violation"`
		Trace struct {
			Path string `json:"path"`
		} `json:"trace"`
	}
	data, err := os.ReadFile(report)
	if err != nil || json.Unmarshal(data, &res) != nil {
		t.Fatalf("read the JSON report: %v\n%s", err, data)
	}
	if res.StoppedBy == nil || res.StoppedBy.Comm != "hl-sleeper" || res.Verdict != "fail" || res.Elapsed >= res.Planned {
		t.Fatalf("stopped by %+v, verdict %q, after %s of %s: want the sleeper's first violation to end the run, a FAIL",
			res.StoppedBy, res.Verdict, res.Elapsed, res.Planned)
	}
	var pids []string
	for _, line := range strings.Split(stderr, "\n") {
		if pid, ok := strings.CutPrefix(line, "HOTLANE_VIOLATION_PID="); ok {
			pids = append(pids, pid)
		}
	}
	if res.Actions.Started != 1 || len(pids) != 1 || pids[0] != strconv.Itoa(int(res.StoppedBy.PID)) {
		t.Errorf("command started %d times, printed pids %v: want once, for pid %d\n%s", res.Actions.Started, pids, res.StoppedBy.PID, stderr)
	}
	for _, f := range []string{trace, plot} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want it written, 0600", f, err, fi.Mode())
		}
	}
	if data, err := os.ReadFile(trace); err != nil || !json.Valid(data) || !strings.Contains(string(data), `"traceEvents"`) || res.Trace.Path != trace {
		t.Errorf("trace %s: %v, not a trace file, or not in the JSON (%q)", trace, err, res.Trace.Path)
	}
	for _, want := range []string{trace + "; open it in https://ui.perfetto.dev", "ui.perfetto.dev", "timeline of the worst violation: " + plot, "stopped at the first violation"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}
}

// The flags about violations are checked before anything is attached,
// each with one line.
func TestVerifyViolationFlagsGiveOneClearLine(t *testing.T) {
	bin := hotlaneBinary(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--trace", "t.json"}, "--trace needs --bound"},
		{[]string{"verify", "--plot", "p.svg"}, "--plot needs --bound"},
		{[]string{"verify", "--stop-on-violation"}, "--stop-on-violation needs --bound"},
		{[]string{"verify", "--bound", "max<=1ms", "--on-violation"}, "--on-violation needs the command after --"},
		{[]string{"verify", "--bound", "max<=1ms", "--on-violation", "--", "/nonexistent/x"}, "--on-violation: exec"},
		{[]string{"verify", "--bound", "max<=1ms", "--", "env"}, `unexpected argument "env" (a command to run on each violation goes after --on-violation --)`},
		{[]string{"verify", "--bound", "inference:max<=1ms", "--trace", "-"}, "--trace needs a file name"},
		{[]string{"verify", "--bound", "inference:max<=1ms", "--plot", "/nonexistent/dir/p.svg"}, "no such file"},
		{[]string{"verify", "--bound", "max<=1ms", "--trace-max", "101"}, "out of range"},
	} {
		wantOneErrorLine(t, bin, tt.args, tt.want)
	}
}
