package sched

import (
	"testing"
	"time"

	"github.com/hotlane/hotlane/policy"
)

// The period is what a CPU the lane saturates takes to give the fair side
// half the starvation bound; the bound is the whole turns it takes to
// serve the waiting tasks' fair time.
func TestBound(t *testing.T) {
	p := policy.Default("infer")
	p.Classes[0].Slice = 2 * time.Millisecond
	p.Classes[1].Slice = 5 * time.Millisecond
	// Not the largest: the bound takes the longest normal slice.
	batch := policy.Class{Name: "batch", Slice: 3 * time.Millisecond, Weight: policy.DefaultWeight,
		Match: []policy.Matcher{{CommPrefix: "batch"}}}
	p.Classes = []policy.Class{p.Classes[0], batch, p.Classes[1]}
	table, err := p.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	b := Config{Table: table}.Bound(4 * ms)
	// 10 + 2 + 5 + 5, and a tick past the lane slice, the resumed
	// normal slice and the turn
	if got := b.Period(); got != 34*ms {
		t.Errorf("period %v, want 34ms", got)
	}
	for _, tc := range []struct {
		waiting int
		want    time.Duration
	}{
		{1, 4 * 34 * ms},   // 5 + 4 (one run to the tick) + 5 + 4 (the one running): four 5ms turns
		{10, 11 * 34 * ms}, // 10 x 0.5ms = the normal slice, + 10 x 4 + 9
		{64, 60 * 34 * ms}, // 32 + 64 x 4 + 9 = 297ms: sixty turns
	} {
		if got := b.For(tc.waiting); got != tc.want {
			t.Errorf("For(%d) = %v, want %v", tc.waiting, got, tc.want)
		}
	}
	// nice 19 adds its request, 0.5ms x 1024/14.55 = 35.2ms of others'
	// time, and its debt for a run to the tick, 4.5ms x 1024/14.55 =
	// 316.7ms, under the budget of 4.5ms x 1024/15 = 307.2ms: 46 + 35.2 +
	// 307.2 = 388.4ms, 78 turns.
	if got, want := b.DebtBudget(), 307200*time.Microsecond; got != want {
		t.Errorf("DebtBudget() = %v, want %v", got, want)
	}
	if got, want := b.ForWeight(8, NiceWeight(19)), 78*34*ms; got != want {
		t.Errorf("ForWeight(8, nice 19) = %v, want %v", got, want)
	}
	// nice 10 (weight 110): 46 + 4.7 (request) + 41.9 (debt, under the
	// budget) = 92.6ms, 19 turns.
	if got, want := b.ForWeight(8, NiceWeight(10)), 19*34*ms; got != want {
		t.Errorf("ForWeight(8, nice 10) = %v, want %v", got, want)
	}
	if got := b.ForWeight(8, NiceWeight(0)); got != b.For(8) {
		t.Errorf("nice 0 by weight %v, by For %v", got, b.For(8))
	}
	if d := (Config{Table: table, Starvation: 20 * ms}).Bound(ms); d.Starvation != 20*ms || d.Tick != ms {
		t.Errorf("Bound kept %+v", d)
	}
	// A short watchdog timeout caps the budget: a saturated CPU gives
	// the fair side 5ms a period, one 34ms period in 60ms, half the timeout.
	if got, want := (Config{Table: table, Timeout: 120 * ms}).Bound(4*ms).DebtBudget(), 5*ms; got != want {
		t.Errorf("DebtBudget() with a 120ms timeout = %v, want %v", got, want)
	}
}

func TestNiceWeight(t *testing.T) {
	// The kernel's table: nice -20 88761, 0 1024, 19 15.
	for nice, want := range map[int]float64{-20: 88761, 0: 1024, 19: 15} {
		if got := NiceWeight(nice); got < want*0.98 || got > want*1.02 {
			t.Errorf("NiceWeight(%d) = %.1f, want about %.0f", nice, got, want)
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
