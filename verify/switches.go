package verify

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// procStat is where the kernel counts every context switch ("ctxt").
const procStat = "/proc/stat"

// switchAudit holds the tracer's sched_switch count against the kernel's
// own: every CPU's nr_switches, which __schedule() increments for each
// switch just before sched_switch fires, summed in /proc/stat's ctxt.
// A switch the kernel made that the hook did not see is an event lost
// that nothing else can show: a program the kernel did not run for a
// whole CPU, or for a stretch of time, leaves no gap in the per-CPU chain
// of switches the tracer checks (Counters.UnreportedSwitches).
//
// The readings are ordered so that the figure can only fall short of the
// truth: the tracer's count is read before the kernel's at the start and
// after it at the end, so switches between two readings count as seen.
type switchAudit struct {
	ok               bool   // the kernel's count could be read
	madeAt0, seenAt0 uint64 // at the start
	madeAtStop       uint64 // the kernel's count when the tracer stopped
	stopped          bool
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
	*a = switchAudit{ok: err == nil, madeAt0: made, seenAt0: seen}
}

// stop freezes the kernel's count, before the hooks are detached.
func (a *switchAudit) stop(path string) {
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

// made is the kernel's count of switches since the start, read before the
// tracer's count it is compared with.
func (a *switchAudit) made(path string) (uint64, bool) {
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
	return now - a.madeAt0, true
}

// unseen is how many of made switches the tracer did not see, given its
// count now: never below zero (the readings err on the side of seen).
func (a *switchAudit) unseen(made, seenNow uint64) uint64 {
	seen := seenNow - a.seenAt0
	if seen >= made {
		return 0
	}
	return made - seen
}
