package sched

import (
	"testing"
	"time"

	"github.com/hotlane/hotlane/policy"
)

// The bound counts each part of the guard's worst case: a coarse tick
// makes the turn cost a tick per task and delays the next turn until it
// ends, a fine one leaves it at half the starvation bound; the longest
// high-priority slice counts, not the normal class's.
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
		// B = max(5ms, 8x4ms) = 32ms: 10ms + max(10ms, B) + B + 3ms + 4ms
		{10 * time.Millisecond, 4 * time.Millisecond, 81 * time.Millisecond},
		// B = max(5ms, 8x100µs) = 5ms: 10ms + 10ms + B + 3ms + 100µs
		{10 * time.Millisecond, 100 * time.Microsecond, 28100 * time.Microsecond},
		// 0 is the default bound (10ms); B = 8ms: 10ms + 10ms + B + 3ms + 1ms
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
