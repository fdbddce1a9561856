package report

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A window its parent ends before its duration is interrupted; one that
// runs its course, or stops by itself, or has no duration, is not, and
// what happens to the parent afterwards does not change that.
func TestWindowInterrupted(t *testing.T) {
	t.Run("signal before the duration", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		w := StartWindow(parent, time.Hour)
		cancel()
		<-w.Done()
		w.Stop()
		if !w.Interrupted() {
			t.Error("a window whose parent ended first is not interrupted")
		}
	})
	t.Run("duration over, then a signal", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		w := StartWindow(parent, time.Millisecond)
		<-w.Done()
		cancel()
		w.Stop()
		if w.Interrupted() {
			t.Error("a window that ran its course reads as interrupted after a later signal")
		}
	})
	t.Run("stopped by the run", func(t *testing.T) {
		w := StartWindow(context.Background(), time.Hour)
		w.Stop()
		if w.Interrupted() {
			t.Error("a window its run stopped reads as interrupted")
		}
	})
	t.Run("no duration", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		w := StartWindow(parent, 0)
		cancel()
		<-w.Done()
		if w.Interrupted() {
			t.Error("a window without a duration, ended by a signal, reads as interrupted")
		}
	})
}

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		interrupted, pass bool
		want              Verdict
	}{
		{false, true, VerdictPass},
		{false, false, VerdictFail},
		{true, true, VerdictInterrupted},
		{true, false, VerdictInterrupted},
	} {
		if got := Judge(c.interrupted, c.pass); got != c.want {
			t.Errorf("Judge(interrupted %v, pass %v) = %s, want %s", c.interrupted, c.pass, got, c.want)
		}
	}
}

// An interrupted run's cases are errors for CI, passed or failed as they
// were; a run without cases still gets one; an uninterrupted run's cases
// are left alone.
func TestInterruptedCases(t *testing.T) {
	h := Header{Interrupted: true, Elapsed: 1500 * time.Millisecond, Planned: time.Minute}
	cases := []Case{
		{Suite: "s", Class: "normal", Name: "p99<=1s", Output: "p99 2ms"},
		{Suite: "s", Class: "normal", Name: "max<=1ms", Failure: "max 2ms"},
	}
	got := InterruptedCases(h, "s", cases, time.Second)
	for _, c := range got {
		if c.Failure != "" || !strings.Contains(c.Error, "INTERRUPTED after 1.5s of the 1m0s") {
			t.Errorf("case %s: failure %q, error %q: want an interruption error", c.Name, c.Failure, c.Error)
		}
	}
	if got[0].Output != "p99 2ms" {
		t.Errorf("the measured value was lost: %q", got[0].Output)
	}
	if none := InterruptedCases(h, "s", nil, time.Second); len(none) != 1 || none[0].Error == "" {
		t.Errorf("a run with no cases: %+v, want one error", none)
	}
	h.Interrupted = false
	if same := InterruptedCases(h, "s", cases, time.Second); same[1].Failure != "max 2ms" || same[0].Error != "" {
		t.Errorf("an uninterrupted run's cases changed: %+v", same)
	}
	if h.InterruptedNote() != "" {
		t.Errorf("an uninterrupted run has the note %q", h.InterruptedNote())
	}
}
