package sched

import (
	"testing"
	"time"

	"github.com/hotlane/hotlane/policy"
)

// The bound counts each part of the guard's worst case: a coarse tick
// makes the shared turn cost a tick per task, a fine one leaves it at half
// the starvation bound; the longest high-priority slice counts, not the
// normal class's.
func TestGuardedWaitBound(t *testing.T) {
	p := policy.Default("infer")
	p.Classes[0].Slice = 3 * time.Millisecond
	p.Classes[1].Slice = 50 * time.Millisecond
	table, err := p.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		starvation, tick, want time.Duration
	}{
		// 2x10ms + max(5ms, 8x4ms) + 3ms + 4ms
		{10 * time.Millisecond, 4 * time.Millisecond, 59 * time.Millisecond},
		// 2x10ms + max(5ms, 8x100µs) + 3ms + 100µs
		{10 * time.Millisecond, 100 * time.Microsecond, 28100 * time.Microsecond},
		// 0 is the default bound (10ms): 2x10ms + max(5ms, 8x1ms) + 3ms + 1ms
		{0, time.Millisecond, 32 * time.Millisecond},
	} {
		got := Config{Table: table, Starvation: tc.starvation}.GuardedWaitBound(tc.tick)
		if got != tc.want {
			t.Errorf("starvation %v, tick %v: bound %v, want %v", tc.starvation, tc.tick, got, tc.want)
		}
	}
}

func TestTickIsAKernelTick(t *testing.T) {
	tick, err := Tick()
	if err != nil {
		t.Fatal(err)
	}
	// HZ is 100 to 1000 on every architecture Linux builds for.
	if tick < time.Millisecond || tick > 10*time.Millisecond {
		t.Errorf("tick %v is not 1/HZ for any HZ from 100 to 1000", tick)
	}
}
