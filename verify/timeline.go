package verify

import (
	"fmt"
	"time"
)

// A timeline is where one violation's moments and the explanation's
// parts fall in time (CLOCK_MONOTONIC), for the pictures of it: the trace
// (trace.go) and the SVG (plot.go) draw the same layout.
type timeline struct {
	v Violation
	// The task's moments: its timer's expiry (Caused only; else the
	// wake-up), the wake-up or preemption, the switch-in, and the felt
	// wait's end (the sleep call's return, or the switch-in).
	cause, wake, switchIn, end time.Duration
	// The span the bound measured (View), and where it ran out: start +
	// Bound (0 without a bound).
	viewStart, viewEnd, crossed time.Duration
	// parts are the explanation's parts on the CPU that ended the wait,
	// laid end to end up to the switch-in (none without an explanation).
	parts []laidPart
}

// A laidPart is some of the CPU's time in a violation's window: a named
// task's run, the rest of a kind's, or interrupts.
type laidPart struct {
	start, dur time.Duration
	kind       string
	// task is the named task it is the run of; nil for a kind's rest.
	task *BlamedTask
}

// Name is how the part is labelled: the task (comm[pid]) or what the
// time was.
func (p laidPart) Name() string {
	if p.task != nil {
		return fmt.Sprintf("%s[%d]", p.task.Comm, p.task.PID)
	}
	switch p.kind {
	case KindIdle:
		return "idle"
	case KindIRQ:
		return "hardirq"
	case KindSoftirq:
		return "softirq"
	case KindUncovered:
		return "uncovered (older than the CPU's kept history)"
	}
	return "other " + p.kind + " tasks"
}

// PartOrder says how the parts are laid out, for every picture of them:
// the tracer adds up the CPU's time per kind and for the three longest
// tasks, and does not record in what order they ran.
const PartOrder = "the tracer records how long each part was, not when: " +
	"the parts are laid end to end up to the switch-in, the uncovered part (the oldest) first, then the largest first"

// newTimeline lays out v.
func newTimeline(v Violation) timeline {
	tl := timeline{v: v, end: v.At}
	tl.switchIn = v.At - v.Resume
	tl.wake = tl.switchIn - v.Latency
	tl.cause = tl.wake
	if v.Caused {
		tl.cause = tl.wake - v.TimerDelivery
	}
	tl.viewStart, tl.viewEnd = v.At-v.Felt, v.At
	if v.View == ViewWait {
		tl.viewStart, tl.viewEnd = tl.wake, tl.switchIn
	}
	if v.Bound > 0 {
		tl.crossed = tl.viewStart + v.Bound
	}
	if v.Why != nil {
		tl.parts = layParts(v.Why, tl.switchIn)
	}
	return tl
}

// first is the timeline's earliest moment, on any of its tracks.
func (tl timeline) first() time.Duration {
	first := min(tl.cause, tl.wake, tl.viewStart)
	if len(tl.parts) > 0 {
		first = min(first, tl.parts[0].start)
	}
	return first
}

// layParts lays e's parts end to end, ending at end, in PartOrder: each
// kind of task time split into its named tasks (longest first) and the
// rest of the kind. A named task is never laid longer than what is left
// of its kind, so each kind adds up to its part exactly.
func layParts(e *Explanation, end time.Duration) []laidPart {
	var order []Part
	if u := e.Parts.Of(KindUncovered); u > 0 {
		order = append(order, Part{Kind: KindUncovered, Time: u})
	}
	for _, p := range e.Parts {
		if p.Kind != KindUncovered {
			order = append(order, p)
		}
	}
	var laid []laidPart
	for _, p := range order {
		left := p.Time
		for i := range e.Tasks {
			t := &e.Tasks[i]
			if t.Kind != p.Kind || left == 0 {
				continue
			}
			d := min(t.Time, left)
			laid = append(laid, laidPart{dur: d, kind: p.Kind, task: t})
			left -= d
		}
		if left > 0 {
			laid = append(laid, laidPart{dur: left, kind: p.Kind})
		}
	}
	var total time.Duration
	for _, p := range laid {
		total += p.dur
	}
	at := end - total
	for i := range laid {
		laid[i].start = at
		at += laid[i].dur
	}
	return laid
}
