package workloads

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDeadlineBudget(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		task            LaneTask
		runtime, period time.Duration
	}{
		{LaneTask{Period: 10 * ms, Compute: 2 * ms}, 3 * ms, 10 * ms},
		{LaneTask{Period: 10 * ms}, ms, 10 * ms},                          // cyclictest: the margin alone
		{LaneTask{Period: 10 * ms, Compute: 6 * ms}, 9 * ms, 10 * ms},     // capped at 90 %
		{LaneTask{Period: 100 * ms, Compute: 10 * ms}, 15 * ms, 100 * ms}, // half again
		{LaneTask{Period: ms}, 900 * time.Microsecond, ms},
	} {
		rt, dl, per := DeadlineBudget(tc.task)
		if rt != tc.runtime || dl != tc.period || per != tc.period {
			t.Errorf("DeadlineBudget(%+v) = %s/%s/%s, want %s/%s/%s", tc.task, rt, dl, per, tc.runtime, tc.period, tc.period)
		}
	}
}

func TestLaneAttr(t *testing.T) {
	a, err := LanePolicy{Kind: LaneFIFO, Priority: 50}.attr(LaneTask{})
	if err != nil || a.Policy != unix.SCHED_FIFO || a.Priority != 50 || a.Flags != unix.SCHED_FLAG_RESET_ON_FORK {
		t.Errorf("fifo: %+v %v", a, err)
	}
	a, err = LanePolicy{Kind: LaneDeadline}.attr(LaneTask{Period: 10 * time.Millisecond, Compute: 2 * time.Millisecond})
	if err != nil || a.Policy != unix.SCHED_DEADLINE || a.Runtime != uint64(3*time.Millisecond) || a.Period != uint64(10*time.Millisecond) {
		t.Errorf("deadline: %+v %v", a, err)
	}
	for _, bad := range []LanePolicy{{Kind: LaneFIFO}, {Kind: LaneFIFO, Priority: 100}, {Kind: LaneNice, Nice: -21}, {Kind: LaneDeadline}} {
		if _, err := bad.attr(LaneTask{}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if a, err := (LanePolicy{}).attr(LaneTask{}); a != nil || err != nil {
		t.Errorf("as is: %+v %v", a, err)
	}
}

func TestStatCPU(t *testing.T) {
	// The comm may hold spaces and parentheses.
	line := "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 100 0 0"
	if d, err := statCPU(line); err != nil || d != 3*time.Second {
		t.Errorf("statCPU = %s, %v; want 3s", d, err)
	}
	if _, err := statCPU("42 (x) S 1"); err == nil {
		t.Error("a short stat line was accepted")
	}
}

// Each lane policy applies to the calling thread and is read back; the
// thread is thrown away afterwards (locked, never unlocked).
func TestLaneApplyOnThisThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs CAP_SYS_NICE")
	}
	for _, l := range []LanePolicy{{Kind: LaneNice, Nice: -20}, {Kind: LaneFIFO, Priority: 10}, {Kind: LaneDeadline}} {
		errs := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // the thread exits with the goroutine
			if err := l.Apply(0, LaneTask{Period: 100 * time.Millisecond, Compute: time.Millisecond}); err != nil {
				errs <- err
				return
			}
			errs <- l.Check(0)
		}()
		if err := <-errs; err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errs <- LanePolicy{Kind: LaneFIFO, Priority: 10}.Check(0)
	}()
	if err := <-errs; err == nil {
		t.Error("Check passed a SCHED_OTHER thread as FIFO")
	}
}
