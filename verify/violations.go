package verify

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hotlane/hotlane/report"
)

// DefaultViolationLinesPerSecond is how many violations a second
// ViolationPrinter prints unless told otherwise: enough to read, few
// enough that a flood cannot bury the summary or slow the reader.
const DefaultViolationLinesPerSecond = 20

// ViolationPrinter writes streamed violations one line each, at most
// PerSecond in any second of the violations' own clock (their At, so a
// backlog read late is limited as it happened), then one line saying how
// many of that second's were not printed, per class. Flush writes the
// last such line. The counts always add up: printed + NotPrinted is every
// violation given to Print.
type ViolationPrinter struct {
	W         io.Writer
	PerSecond int

	limit      perSecond
	held       map[string]uint64 // not printed in this window, per class
	Printed    uint64
	NotPrinted uint64
}

// Print writes v, or counts it if its second already has PerSecond lines.
func (p *ViolationPrinter) Print(v Violation) {
	p.limit.max = p.PerSecond
	ok, newSecond := p.limit.admit(v.At)
	if newSecond {
		p.Flush()
	}
	if !ok {
		if p.held == nil {
			p.held = map[string]uint64{}
		}
		p.held[v.Class]++
		p.NotPrinted++
		return
	}
	p.Printed++
	if v.Why != nil {
		fmt.Fprintf(p.W, "violation: %s %s pid %d %s on cpu %d: %s\n",
			v.Class, v.Comm, v.PID, v.waited(), v.CPU, v.Why)
		return
	}
	fmt.Fprintf(p.W, "violation: %s %s pid %d %s on cpu %d while %s (pid %d) ran\n",
		v.Class, v.Comm, v.PID, v.waited(), v.CPU, v.PrevComm, v.PrevPID)
}

// perSecond admits at most max events (0: all) in any second of the
// violations' own clock (their At, so that a backlog read late is limited
// as it happened): the violation lines and the --on-violation commands.
type perSecond struct {
	max    int
	second time.Duration // the second being counted, At truncated
	in     int
}

// admit says whether an event at `at` is admitted, and whether it is the
// first of a new second.
func (l *perSecond) admit(at time.Duration) (ok, newSecond bool) {
	if s := at.Truncate(time.Second); s != l.second {
		l.second, l.in, newSecond = s, 0, true
	}
	if l.max > 0 && l.in >= l.max {
		return false, newSecond
	}
	l.in++
	return true, newSecond
}

// waited says how long v waited, and, if its timer woke it, how long it
// felt and how much of that came before the wake-up.
func (v Violation) waited() string {
	if !v.Caused {
		return "waited " + report.Duration(v.Latency)
	}
	felt := fmt.Sprintf("waited %s, %s from its timer's expiry (%s to the wake-up",
		report.Duration(v.Latency), report.Duration(v.Felt), report.Duration(v.TimerDelivery))
	if v.Resume > 0 {
		felt += fmt.Sprintf(", %s from the switch-in to the sleep call's return", report.Duration(v.Resume))
	}
	return felt + ")"
}

// Flush writes how many violations of the current second were not
// printed, if any.
func (p *ViolationPrinter) Flush() {
	if len(p.held) == 0 {
		return
	}
	var n uint64
	var parts []string
	for _, class := range slices.Sorted(maps.Keys(p.held)) {
		n += p.held[class]
		parts = append(parts, fmt.Sprintf("%s %d", class, p.held[class]))
	}
	fmt.Fprintf(p.W, "violation: %d more in that second not printed (over %d a second: %s)\n", n, p.PerSecond, strings.Join(parts, ", "))
	p.held = nil
}
