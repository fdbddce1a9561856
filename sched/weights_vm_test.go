package sched_test

import (
	"testing"
	"time"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// The fair class splits a CPU by weight when no lane task runs, as EEVDF
// does in the same boot: nice 19 beside nice 0 on CPU 0, a cgroup of
// cpu.weight 100 beside one of 300 on CPU 1, each pair spinning, pinned.
// Under both the lighter of each pair gets less; how far each split is
// from the weights is logged beside EEVDF's (issue 36 aims at within 20%;
// EEVDF itself on this emulated guest gives nice 19 about 3x its share).
func TestGuestFairWeights(t *testing.T) {
	vmtest.RequireGuest(t)
	const run = 6 * time.Second
	nice0 := startSpinner(t, spinnerSpec{threads: 1, cpu: 0})
	nice19 := startSpinner(t, spinnerSpec{threads: 1, cpu: 0, nice: 19})
	w100 := startSpinner(t, spinnerSpec{threads: 1, cpu: 1})
	w300 := startSpinner(t, spinnerSpec{threads: 1, cpu: 1})
	weightCgroup(t, "hotlane-fair-w100", 100, w100.Process.Pid)
	weightCgroup(t, "hotlane-fair-w300", 300, w300.Process.Pid)
	shares := []*share{
		{what: "nice 19 beside nice 0", light: nice19.Process.Pid, heavy: nice0.Process.Pid, wLight: sched.NiceWeight(19), wHeavy: sched.NiceWeight(0)},
		{what: "cpu.weight 100 beside 300", light: w100.Process.Pid, heavy: w300.Process.Pid, wLight: 100, wHeavy: 300},
	}
	split := func(scheduler string) {
		time.Sleep(time.Second) // the spinners settled under this scheduler
		for _, sh := range shares {
			sh.start(t)
		}
		time.Sleep(run)
		for _, sh := range shares {
			got, want := sh.ratio(t)
			t.Logf("%s: %s: CPU time ratio %.4f, weights promise %.4f (%.2fx)", scheduler, sh.what, got, want, got/want)
			if got <= 0 || got >= 1 {
				t.Errorf("%s: %s: the lighter task got %.4f of the heavier one's CPU time: the weights were not honoured", scheduler, sh.what, got)
			}
		}
	}
	split("EEVDF")
	load(t, policy.Default("infer"), sched.Config{Timeout: sched.DefaultTimeout})
	split("hotlane")
}
