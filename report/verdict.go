package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Verdict is how a measuring run ended, one word for every command that
// measures (verify, bench, the probes), so that people, JSON readers, CI
// reports and exit codes read the same outcome.
type Verdict string

const (
	// VerdictPass: the run measured for as long as asked, and every
	// check it had held (a probe, which checks nothing, passes).
	VerdictPass Verdict = "pass"
	// VerdictFail: the run measured for as long as asked, and a check
	// did not hold.
	VerdictFail Verdict = "fail"
	// VerdictInterrupted: a signal ended the run before its duration.
	// What it measured is reported, but it is no verdict: a cancelled
	// CI job must not look like a check that passed (or failed).
	VerdictInterrupted Verdict = "interrupted"
)

// Judge is the verdict of a run that was interrupted or not and whose
// checks passed or not. An interrupted run is judged on nothing else.
func Judge(interrupted, pass bool) Verdict {
	switch {
	case interrupted:
		return VerdictInterrupted
	case !pass:
		return VerdictFail
	}
	return VerdictPass
}

// ErrInterrupted is wrapped by a run that a signal ended before its
// duration, where it returns what it measured with an error rather than
// a result (the bench's rounds).
var ErrInterrupted = errors.New("interrupted by a signal before the run's duration")

// errDurationOver and errStopped are the causes a Window ends with when
// its duration runs out or its run stops by itself; any other cause came
// from the parent context: a signal.
var (
	errDurationOver = errors.New("the measurement's duration is over")
	errStopped      = errors.New("the measurement stopped")
)

// Window is the span of one measurement: Planned long, or with Planned 0
// until its parent context ends, which is then the normal end (a service
// stopped by SIGTERM). It tells a run cut short by its parent (Ctrl-C,
// SIGTERM) from one that ran its course, whatever happens after.
type Window struct {
	Planned time.Duration
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	once    sync.Once
}

// StartWindow starts a measurement window of planned (0: until ctx ends)
// under ctx. Call Stop when the measurement is over, before Interrupted.
func StartWindow(ctx context.Context, planned time.Duration) *Window {
	w := &Window{Planned: max(planned, 0)}
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	if w.Planned > 0 {
		w.timer = time.AfterFunc(w.Planned, func() { w.cancel(errDurationOver) })
	}
	return w
}

// Context ends when the window does.
func (w *Window) Context() context.Context { return w.ctx }

// Done is closed when the window ends.
func (w *Window) Done() <-chan struct{} { return w.ctx.Done() }

// Stop ends the window, if it has not ended yet, as a run that stopped by
// itself: an error, say, is not an interruption. It may be called more
// than once (defer it).
func (w *Window) Stop() {
	w.once.Do(func() {
		if w.timer != nil {
			w.timer.Stop()
		}
		w.cancel(errStopped)
	})
}

// Interrupted reports whether the window's parent ended it before its
// planned duration was over. A window without a duration is never
// interrupted: stopping it is how it ends.
func (w *Window) Interrupted() bool {
	if w.Planned <= 0 {
		return false
	}
	cause := context.Cause(w.ctx)
	return cause != nil && !errors.Is(cause, errDurationOver) && !errors.Is(cause, errStopped)
}

// Ended records in the header whether the window was interrupted and what
// it was planned to last.
func (h *Header) Ended(w *Window) {
	h.Planned = w.Planned
	h.Interrupted = w.Interrupted()
}

// InterruptedNote is one sentence for a text report saying that the run
// was cut short, and how far it got; "" when it was not.
func (h Header) InterruptedNote() string {
	if !h.Interrupted {
		return ""
	}
	of := ""
	if h.Planned > 0 {
		of = fmt.Sprintf(" of the %s asked for", h.Planned)
	}
	return fmt.Sprintf("INTERRUPTED after %s%s: a signal ended the run early; the figures cover only that part and are no verdict",
		h.Elapsed.Round(time.Millisecond), of)
}

// WriteInterrupted writes InterruptedNote as a line, or nothing.
func (h Header) WriteInterrupted(w io.Writer) error {
	if note := h.InterruptedNote(); note != "" {
		_, err := fmt.Fprintf(w, "%s\n", note)
		return err
	}
	return nil
}

// InterruptedCases turns the cases of an interrupted run into errors for
// a CI system, keeping what each measured as its output; a run with no
// cases gets one, so that the interruption is seen at all. Cases of a run
// that was not interrupted are returned as they are.
func InterruptedCases(h Header, suite string, cases []Case, took time.Duration) []Case {
	if !h.Interrupted {
		return cases
	}
	if len(cases) == 0 {
		cases = []Case{{Suite: suite, Class: "run", Name: "duration", Time: took}}
	}
	out := make([]Case, len(cases))
	for i, c := range cases {
		c.Failure = ""
		c.Error = h.InterruptedNote()
		out[i] = c
	}
	return out
}
