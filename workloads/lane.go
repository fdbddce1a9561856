package workloads

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The ways a variant can treat the lane: the latency-critical threads the
// bench measures (periodic tasks and cyclictest's measuring threads).
// Everything else stays SCHED_OTHER at nice 0.
const (
	LaneAsIs     = ""         // leave the lane as it is
	LaneNice     = "nice"     // SCHED_OTHER at a (negative) nice level
	LaneFIFO     = "fifo"     // SCHED_FIFO at a priority
	LaneDeadline = "deadline" // SCHED_DEADLINE, budget derived from the task
)

// LanePolicy says what a variant does to each lane thread.
type LanePolicy struct {
	Kind     string `json:"kind,omitempty"`
	Nice     int    `json:"nice,omitempty"`     // LaneNice: -20..19
	Priority int    `json:"priority,omitempty"` // LaneFIFO: 1..99
}

// String is the policy as a person would write it: "SCHED_FIFO 50".
func (l LanePolicy) String() string {
	switch l.Kind {
	case LaneNice:
		return fmt.Sprintf("nice %d", l.Nice)
	case LaneFIFO:
		return fmt.Sprintf("SCHED_FIFO %d", l.Priority)
	case LaneDeadline:
		return "SCHED_DEADLINE"
	}
	return "as is"
}

// LaneTask is what the lane policy needs to know of one lane task: how
// often it wakes and how much it computes each time (the largest frame).
type LaneTask struct {
	Period  time.Duration
	Compute time.Duration
}

// DeadlineBudget derives SCHED_DEADLINE parameters from a periodic task:
// the period and relative deadline are the task's period, the runtime its
// largest compute per period plus a margin (half of it, at least 1 ms, for
// the wake-up path and a slow machine), capped at 90 % of the period. A
// task that overruns its runtime is throttled until its next period, so
// the margin errs on the generous side.
func DeadlineBudget(t LaneTask) (runtime, deadline, period time.Duration) {
	runtime = t.Compute + max(t.Compute/2, time.Millisecond)
	runtime = min(runtime, t.Period*9/10)
	return runtime, t.Period, t.Period
}

// attr builds the sched_attr for a lane thread. Every lane attribute sets
// SCHED_FLAG_RESET_ON_FORK: threads the lane thread happens to create (the
// Go runtime may start one from any thread) start at SCHED_OTHER, nice 0,
// and a SCHED_DEADLINE thread may create them at all.
func (l LanePolicy) attr(t LaneTask) (*unix.SchedAttr, error) {
	a := &unix.SchedAttr{Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	switch l.Kind {
	case LaneNice:
		if l.Nice < -20 || l.Nice > 19 {
			return nil, fmt.Errorf("nice %d is out of range -20..19", l.Nice)
		}
		a.Policy, a.Nice = unix.SCHED_NORMAL, int32(l.Nice)
	case LaneFIFO:
		if l.Priority < 1 || l.Priority > 99 {
			return nil, fmt.Errorf("SCHED_FIFO priority %d is out of range 1..99", l.Priority)
		}
		a.Policy, a.Priority = unix.SCHED_FIFO, uint32(l.Priority)
	case LaneDeadline:
		if t.Period <= 0 {
			return nil, errors.New("SCHED_DEADLINE needs the task's period")
		}
		rt, dl, per := DeadlineBudget(t)
		a.Policy = unix.SCHED_DEADLINE
		a.Runtime, a.Deadline, a.Period = uint64(rt), uint64(dl), uint64(per)
	default:
		return nil, nil
	}
	return a, nil
}

// Apply gives thread tid (0: the calling thread) the lane policy; t is the
// task it belongs to. LaneAsIs does nothing.
func (l LanePolicy) Apply(tid int, t LaneTask) error {
	a, err := l.attr(t)
	if err != nil || a == nil {
		return err
	}
	if err := unix.SchedSetAttr(tid, a, 0); err != nil {
		what := l.String()
		if l.Kind == LaneDeadline {
			rt, _, per := DeadlineBudget(t)
			what = fmt.Sprintf("SCHED_DEADLINE runtime %s period %s", rt, per)
		}
		hint := ""
		switch {
		case errors.Is(err, unix.EPERM):
			hint = ": needs CAP_SYS_NICE (run as root)"
		case errors.Is(err, unix.EBUSY) && l.Kind == LaneDeadline:
			hint = ": the kernel's deadline admission control refused the bandwidth"
		}
		return fmt.Errorf("give thread %d %s: %w%s", tid, what, err, hint)
	}
	return nil
}

// Check returns an error unless thread tid (0: the calling thread) still
// has the lane policy's scheduling class (and nice level or priority).
func (l LanePolicy) Check(tid int) error {
	if l.Kind == LaneAsIs {
		return nil
	}
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return fmt.Errorf("read thread %d's scheduling: %w", tid, err)
	}
	want, _ := l.attr(LaneTask{Period: time.Second})
	if a.Policy != want.Policy || (l.Kind == LaneNice && a.Nice != want.Nice) || (l.Kind == LaneFIFO && a.Priority != want.Priority) {
		return fmt.Errorf("thread %d has policy %d nice %d priority %d, not %s", tid, a.Policy, a.Nice, a.Priority, l)
	}
	return nil
}

// threadsOf lists the thread ids of process pid.
func threadsOf(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	sort.Ints(tids)
	return tids, nil
}

// threadCPU is how long thread tid has run on a CPU: the first field of
// /proc/TID/schedstat (ns), or utime+stime from /proc/TID/stat (clock
// ticks) where the kernel lacks schedstat.
func threadCPU(tid int) (time.Duration, error) {
	dir := filepath.Join("/proc", strconv.Itoa(tid))
	if b, err := os.ReadFile(filepath.Join(dir, "schedstat")); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if ns, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				return time.Duration(ns), nil
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0, err
	}
	return statCPU(string(b))
}

// statCPU reads utime+stime from a /proc/PID/stat line; the comm field in
// parentheses may itself hold spaces and parentheses.
func statCPU(stat string) (time.Duration, error) {
	_, f, ok := parseStat(stat)
	// After the comm: state(0) ppid ... utime(11) stime(12).
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("malformed stat line %q", stat)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed stat line %q", stat)
	}
	// USER_HZ is 100 on every Linux architecture we run on.
	return time.Duration(ut+st) * (time.Second / 100), nil
}
