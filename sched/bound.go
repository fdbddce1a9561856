package sched

import (
	"fmt"
	"math"
	"time"
)

// DefaultMinSlice is the shortest slice the fair class gives (min_slice_ns
// in sched_fair.bpf.h): slices shrink with the number of waiting tasks and
// with weight below nice 0, never below this.
const DefaultMinSlice = 500 * time.Microsecond

// Bound is the starvation guard's promise: the longest a normal (fair
// class) task waits for a CPU while high-priority (lane) tasks keep every
// CPU it may run on busy. It holds for any number of waiting tasks; the
// number sets how long (For).
//
// sched_ext ends a slice only at a tick, so every run below lasts up to a
// Tick past its slice.
//
// The guard is a reservation (sched_guard.bpf.h): a CPU that has given the
// lane Starvation of CPU time since it last served the fair side, while
// fair tasks it may run waited, serves the fair side for Starvation/2. It
// notices at its next dispatch, at the latest when the lane slice it runs
// ends; meanwhile the normal task the lane preempted may resume the rest
// of its slice, which counts for neither. So every Period = Starvation +
// lane slice + normal slice + Starvation/2, plus a tick for each of those
// three runs, the CPU gives the fair side at least Starvation/2.
//
// Within the fair side, tasks run in deadline order with slices that
// shrink as more wait, so that serving the n tasks waiting per CPU takes
// at most max(n × MinSlice, normal slice) + n × Tick of fair time, plus
// the run of the task running when it arrived. A task of weight below
// nice 0 also waits out the deadline of its lighter request, MinSlice ×
// 1024/weight of others' time (nice 19: 34 ms), and its debt: what it
// owes for running past its slice to the tick, held within the
// DebtBudget.
type Bound struct {
	Starvation, LaneSlice, NormalSlice, Tick, MinSlice time.Duration
	// Timeout is the watchdog's, which the debt budget stays well within.
	Timeout time.Duration
}

// Bound returns the guard's bound for this configuration on a kernel
// whose scheduler tick is tick (see Tick).
func (c Config) Bound(tick time.Duration) Bound {
	b := Bound{Starvation: c.Starvation, Tick: tick, MinSlice: DefaultMinSlice, Timeout: c.Timeout}
	if b.Starvation == 0 {
		b.Starvation = DefaultStarvation
	}
	if b.Timeout == 0 {
		b.Timeout = DefaultTimeout
	}
	if c.Table != nil {
		for _, cl := range c.Table.Classes {
			if cl.HighPriority != 0 {
				b.LaneSlice = max(b.LaneSlice, time.Duration(cl.SliceNs))
			} else {
				b.NormalSlice = max(b.NormalSlice, time.Duration(cl.SliceNs))
			}
		}
	}
	return b
}

// Period is the longest a CPU the lane saturates takes to give the fair
// side Starvation/2.
func (b Bound) Period() time.Duration {
	return b.Starvation + b.LaneSlice + b.NormalSlice + b.Starvation/2 + 3*b.Tick
}

// For is the bound for a nice-0 task with at most waiting normal tasks
// per CPU (itself included).
func (b Bound) For(waiting int) time.Duration {
	return b.ForWeight(waiting, 1024)
}

// ForWeight is For for a task of weight (nice 0: 1024, nice 19: 15).
func (b Bound) ForWeight(waiting int, weight float64) time.Duration {
	extra := time.Duration(0)
	if weight > 0 && weight < 1024 {
		request := time.Duration(float64(b.MinSlice) * 1024 / weight)
		debt := min(b.DebtBudget(), time.Duration(float64(b.Tick+b.MinSlice)*1024/weight))
		extra = request + debt
	}
	return b.turns(b.round(waiting) + extra)
}

// round is the fair time that serves waiting tasks and the one running
// when they arrived, each of whose runs may last a tick past its slice.
func (b Bound) round(waiting int) time.Duration {
	n := time.Duration(waiting)
	return max(n*b.MinSlice, b.NormalSlice) + n*b.Tick + b.NormalSlice + b.Tick
}

// DebtBudget is how much of others' CPU time a light fair task's debt may
// make it wait (debt_budget_ns in sched_fair.bpf.h): its queue's tasks
// share the budget, so that the wait is the same however many there are.
// It is what the lightest task (nice 19) owes for running to the tick
// past its shortest slice, so that while few tasks share its queue it
// pays its whole debt and gets its weight's share; but it is at most
// what a CPU the lane saturates gives the fair side in half the watchdog
// timeout, so that the watchdog does not eject the scheduler for it.
func (b Bound) DebtBudget() time.Duration {
	lightest := math.Round(NiceWeight(19))
	owed := time.Duration(float64(b.Tick+b.MinSlice) * 1024 / lightest)
	turns := int64(b.Timeout / 2 / b.Period())
	return min(owed, time.Duration(turns)*(b.Starvation/2))
}

// turns is how long a CPU the lane saturates takes to give the fair side
// work of fair time: whole turns of Starvation/2, each a Period.
func (b Bound) turns(work time.Duration) time.Duration {
	turn := b.Starvation / 2
	n := int64(math.Ceil(float64(work) / float64(turn)))
	return time.Duration(n) * b.Period()
}

// NiceWeight is the kernel's weight of a nice level, 1024 at nice 0 and
// 1.25 times less for each level up (nice 19: about 15).
func NiceWeight(nice int) float64 { return 1024 / math.Pow(1.25, float64(nice)) }

// String says the bound as the start-up line prints it.
func (b Bound) String() string {
	return fmt.Sprintf("a normal task waits at most %s behind the lane with up to 8 normal tasks waiting per CPU, %s with 64, and a nice-19 one %s with 8 (Starvation/2 = %s of fair time every %s)",
		b.For(8), b.For(64), b.ForWeight(8, NiceWeight(19)), b.Starvation/2, b.Period())
}
