package verify

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// procStat is where the kernel counts every context switch ("ctxt").
const procStat = "/proc/stat"

// switchAudit holds the tracer's sched_switch count against the kernel's
// own: every CPU's nr_switches, which __schedule() increments for each
// switch just before sched_switch fires, summed in /proc/stat's ctxt.
// A switch the kernel made that the hook did not see is an event lost
// that nothing else can show: a program the kernel did not run for a
// whole CPU, or for a stretch of time, leaves no gap in the per-CPU chain
// of switches the tracer checks (Counters.UnreportedSwitches). Switches
// on a CPU going offline or coming online count too: the kernel fires no
// tracepoint on a CPU it does not count as online.
//
// The figure is a lower bound. The tracer's count is read before the
// kernel's at the start and after it later, so switches between two
// readings count as seen; one switch per CPU may be between the kernel's
// increment and the hook's, and is allowed for; and since the true count
// only grows, the largest figure read so far stands.
type switchAudit struct {
	mu               sync.Mutex // Stop and a metrics scrape may meet
	ok               bool       // the kernel's count could be read
	madeAt0, seenAt0 uint64     // at the start
	madeAtStop       uint64     // the kernel's count when the tracer stopped
	stopped          bool
	unseenMax        uint64
}

// contextSwitches reads the ctxt line of a /proc/stat.
func contextSwitches(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseContextSwitches(data, path)
}

func parseContextSwitches(data []byte, path string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("ctxt ")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: ctxt %q: %w", path, v, err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return 0, fmt.Errorf("%s has no ctxt line", path)
}

// start takes the counts the audit is measured from: seen is the
// tracer's switch count, read before the kernel's.
func (a *switchAudit) start(path string, seen uint64) {
	made, err := contextSwitches(path)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ok, a.madeAt0, a.seenAt0, a.stopped, a.unseenMax = err == nil, made, seen, false, 0
}

// stop freezes the kernel's count, before the hooks are detached.
func (a *switchAudit) stop(path string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.ok || a.stopped {
		return
	}
	made, err := contextSwitches(path)
	if err != nil {
		a.ok = false
		return
	}
	a.madeAtStop, a.stopped = made, true
}

// made is the kernel's count of switches since the start, to be read
// before the tracer's count it is compared with.
func (a *switchAudit) made(path string) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.ok {
		return 0, false
	}
	now := a.madeAtStop
	if !a.stopped {
		var err error
		if now, err = contextSwitches(path); err != nil {
			return 0, false
		}
	}
	if now < a.madeAt0 {
		return 0, false
	}
	return now - a.madeAt0, true
}

// unseen is how many of made switches the tracer did not see, given its
// count now, with one switch per CPU of the ncpu allowed for as in
// flight; never below zero, and never below an earlier figure.
func (a *switchAudit) unseen(made, seenNow uint64, ncpu int) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := seenNow - a.seenAt0
	if seen < made && made-seen > uint64(ncpu) {
		a.unseenMax = max(a.unseenMax, made-seen-uint64(ncpu))
	}
	return a.unseenMax
}
