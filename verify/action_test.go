package verify

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// envOf reads the HOTLANE_VIOLATION_ settings env(1) printed, one run's.
func envOf(out string) []map[string]string {
	var runs []map[string]string
	for _, line := range strings.Split(out, "\n") {
		name, value, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(name, ViolationEnvPrefix) {
			continue
		}
		name = strings.TrimPrefix(name, ViolationEnvPrefix)
		if name == "PID" {
			runs = append(runs, map[string]string{})
		}
		if len(runs) > 0 {
			runs[len(runs)-1][name] = value
		}
	}
	return runs
}

// The command gets the violation's figures, at most the rate a second of
// the violations' clock and one at a time, and everything it was not
// started for is counted.
func TestActionsRunWithTheViolationsFigures(t *testing.T) {
	var out bytes.Buffer
	a := newActions(context.Background(), []string{"env"}, 1, &out)
	v := testViolations()[0]
	for range 5 {
		a.run(v) // one second of the violations' clock: one run
	}
	c := a.wait()
	if c.Started != 1 || c.NotStarted != 4 || c.Failed != 0 {
		t.Errorf("counts %+v, want 1 started and 4 not in one second at 1 a second", c)
	}
	next := v
	next.At += time.Second
	a.run(next)
	if c = a.wait(); c.Started != 2 {
		t.Errorf("counts %+v: the next second did not start it again", c)
	}
	runs := envOf(out.String())
	if len(runs) != 2 {
		t.Fatalf("%d runs in the output, want 2:\n%s", len(runs), out.String())
	}
	want := map[string]string{
		"PID": "7", "TGID": "5", "COMM": "infer-victim", "CLASS": "inference", "CPU": "1",
		"LATENCY_NS": "20329877", "VIEW": "felt", "BOUND_NS": "5000000", "WAIT_NS": "19999877", "FELT_NS": "20329877",
		"TIMER_DELIVERY_NS": "300000", "CAUSE": "rt_dl", "PARTS": "rt_dl=19000000 fair=700000 irq=200000 uncovered=100000",
		"RAN":   "hl-rthog[42] rt_dl/normal 19000000, kworker/1:0[43] fair/normal 500000",
		"AT_NS": "1000020030000",
	}
	for name, value := range want {
		if runs[0][name] != value {
			t.Errorf("%s=%q, want %q", name, runs[0][name], value)
		}
	}
	if !strings.Contains(runs[0]["EXPLANATION"], "hl-rthog[42]") || runs[0]["FROM_CPU"] != "" {
		t.Errorf("EXPLANATION %q, FROM_CPU %q", runs[0]["EXPLANATION"], runs[0]["FROM_CPU"])
	}
	// Without an explanation, its figures are left out, not empty.
	bare := ViolationEnv(testViolations()[3])
	for _, kv := range bare {
		if strings.HasPrefix(kv, ViolationEnvPrefix+"CAUSE=") || strings.HasPrefix(kv, ViolationEnvPrefix+"BOUND_NS=") {
			t.Errorf("%s set for a violation without an explanation or bound", kv)
		}
	}
}

// The argument vector is passed as it is: no shell expands it.
func TestActionsUseNoShell(t *testing.T) {
	var out bytes.Buffer
	a := newActions(context.Background(), []string{"echo", "$HOTLANE_VIOLATION_PID;", "`id`", "a b"}, 1, &out)
	a.run(testViolations()[0])
	if c := a.wait(); c.Started != 1 || c.Failed != 0 {
		t.Fatalf("counts %+v", c)
	}
	if got := strings.TrimSpace(out.String()); got != "$HOTLANE_VIOLATION_PID; `id` a b" {
		t.Errorf("echo printed %q: its arguments were interpreted", got)
	}
}

// A command that fails, or cannot start, is counted, with why.
func TestActionsCountFailures(t *testing.T) {
	v := testViolations()[0]
	a := newActions(context.Background(), []string{"sh", "-c", "exit 3"}, 10, io.Discard)
	a.run(v)
	if c := a.wait(); c.Started != 1 || c.Failed != 1 || !strings.Contains(c.FirstError, "exit status 3") {
		t.Errorf("counts %+v, want one failed with exit status 3", c)
	}
	missing := newActions(context.Background(), []string{"/nonexistent/hotlane-action"}, 10, io.Discard)
	missing.run(v)
	if c := missing.wait(); c.Failed != 1 || !strings.Contains(c.FirstError, "no such file") {
		t.Errorf("counts %+v, want one failed: no such file", c)
	}
	// One at a time: a violation while it still runs is not started.
	slow := newActions(context.Background(), []string{"sleep", "0.3"}, 100, io.Discard)
	slow.run(v)
	slow.run(v)
	if c := slow.wait(); c.Started != 1 || c.NotStarted != 1 {
		t.Errorf("counts %+v, want the second held back while the first ran", c)
	}
}

// Acting on violations without a bound is a mistake: there are none.
func TestActingNeedsABound(t *testing.T) {
	for _, opts := range []Options{{OnViolation: []string{"true"}}, {StopOnViolation: true}} {
		if _, err := Run(context.Background(), opts); !errors.Is(err, ErrBadBound) {
			t.Errorf("%+v: %v, want ErrBadBound", opts, err)
		}
	}
}
