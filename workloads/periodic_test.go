package workloads

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/probe/ioctl"
)

func TestPeriodClockLatenessAndMisses(t *testing.T) {
	const ms = time.Millisecond
	c := periodClock{next: 10 * ms, period: 10 * ms}
	steps := []struct {
		woke, done  time.Duration
		wantLate    time.Duration
		wantMissed  int
		wantNextDue time.Duration
	}{
		{woke: 12 * ms, done: 15 * ms, wantLate: 2 * ms, wantMissed: 0, wantNextDue: 20 * ms},
		// On time, but the work overran two period starts (30, 40).
		{woke: 20 * ms, done: 45 * ms, wantLate: 0, wantMissed: 2, wantNextDue: 50 * ms},
		// Work ending exactly at the next start misses nothing.
		{woke: 50 * ms, done: 60 * ms, wantLate: 0, wantMissed: 0, wantNextDue: 60 * ms},
		// A late wake-up is measured against the schedule, not the
		// previous wake-up: no drift.
		{woke: 67 * ms, done: 69 * ms, wantLate: 7 * ms, wantMissed: 0, wantNextDue: 70 * ms},
	}
	for i, s := range steps {
		if got := c.lateness(s.woke); got != s.wantLate {
			t.Errorf("step %d: lateness %v, want %v", i, got, s.wantLate)
		}
		if got := c.finish(s.done); got != s.wantMissed {
			t.Errorf("step %d: missed %d, want %d", i, got, s.wantMissed)
		}
		if c.next != s.wantNextDue {
			t.Errorf("step %d: next period at %v, want %v", i, c.next, s.wantNextDue)
		}
	}
	// A clock read before the period start (never with TIMER_ABSTIME,
	// but clocks are clocks) is not negative lateness.
	if got := c.lateness(69 * ms); got != 0 {
		t.Errorf("early wake-up lateness %v, want 0", got)
	}
}

func TestPeriodicRejectsComputeLongerThanPeriod(t *testing.T) {
	_, err := Periodic{Period: time.Millisecond, Compute: 2 * time.Millisecond}.Run(t.Context())
	if err == nil {
		t.Error("compute > period accepted")
	}
}

// The CPU time a periodic task reports covers the compute of every period
// it ran (each spins until its thread's CPU clock has advanced that much):
// the bench divides background work by the CPU the lane left, and a lane
// reported as using nothing made every variant look alike there.
func TestPeriodicReportsItsCPUTime(t *testing.T) {
	const compute = time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	res, err := Periodic{Comm: "cpu-test", Period: 5 * time.Millisecond, Compute: compute, Threads: 2}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	periods := res.Lateness.Count()
	if periods == 0 {
		t.Fatal("no period ran in 100ms")
	}
	if want := time.Duration(periods) * compute; res.CPU < want {
		t.Errorf("CPU time %v for %d periods of %v compute, want at least %v", res.CPU, periods, compute, want)
	}
}

// A periodic task with a device issues one ioctl on it per period, as the
// ioctl probe counts them (root: the probe loads BPF); a device that
// cannot be opened is an error that names it.
func TestPeriodicUsesItsDeviceEachPeriod(t *testing.T) {
	_, err := Periodic{Comm: "dev-step", Period: 10 * time.Millisecond, Device: "/nonexistent/accel0"}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), `periodic task "dev-step": open its device /nonexistent/accel0`) {
		t.Errorf("missing device: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("counting the ioctls loads the ioctl probe: needs root")
	}
	p, err := ioctl.Attach(context.Background(), ioctl.Config{PID: os.Getpid(), Dev: "/dev/full"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := Periodic{Comm: "dev-step", Period: 10 * time.Millisecond, Compute: time.Millisecond, Device: "/dev/full"}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	snap, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	row, _ := snap.Find("/dev/full", unix.TCGETS)
	if periods := res.Lateness.Count(); periods == 0 || row.Calls != periods {
		t.Errorf("%d ioctls on /dev/full for %d periods; want one each", row.Calls, periods)
	}
}
