package sched

import (
	"testing"
	"time"

	"github.com/hotlane/hotlane/policy"
)

// The bound is GuardBatch turns, each at most the starvation bound plus
// the longest high-priority slice, the longest normal slice (the rest of
// a preempted normal task's) and a tick.
func TestGuardedWaitBound(t *testing.T) {
	p := policy.Default("infer")
	p.Classes[0].Slice = 3 * time.Millisecond
	p.Classes[1].Slice = 50 * time.Millisecond
	// Not the largest: the bound takes the longest normal slice.
	batch := policy.Class{Name: "batch", Slice: 7 * time.Millisecond, Weight: policy.DefaultWeight,
		Match: []policy.Matcher{{CommPrefix: "batch"}}}
	p.Classes = []policy.Class{p.Classes[0], batch, p.Classes[1]}
	table, err := p.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		starvation, tick, want time.Duration
	}{
		// 8 x (10ms + 3ms + 50ms + 4ms)
		{10 * time.Millisecond, 4 * time.Millisecond, 536 * time.Millisecond},
		// 8 x (10ms + 3ms + 50ms + 100µs)
		{10 * time.Millisecond, 100 * time.Microsecond, 504800 * time.Microsecond},
		// 0 is the default bound (10ms): 8 x (10ms + 3ms + 50ms + 1ms)
		{0, time.Millisecond, 512 * time.Millisecond},
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
