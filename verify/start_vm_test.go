package verify

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// waitSchedExt waits until sched_ext runs the BPF scheduler called ops
// ("" for none, the kernel's default scheduler).
func waitSchedExt(t *testing.T, ops string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
		if err == nil && s.Ops == ops && (ops == "" || s.State == "enabled") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sched_ext runs %q (%s, %v), want %q", s.Ops, s.State, err, ops)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startScxSimple runs the upstream scx_simple until the test ends.
func startScxSimple(t *testing.T) {
	t.Helper()
	cmd := exec.Command(vm.ScxSimpleGuestPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		waitSchedExt(t, "")
	})
	waitSchedExt(t, "simple")
}

// The tracer must give the same account of the same wake-ups whichever
// scheduler runs: here the kernel's default (EEVDF) and the upstream
// scx_simple (sched_ext), in one boot, with both hook families.
//   - A waker on one CPU wakes a sleeper on the other through a pipe
//     (checkWakeStart): every measured wait starts inside the waker's
//     write(2). Under EEVDF a wake-up of an idle CPU is queued to it and
//     sched_wakeup fires there after an IPI; sched_ext does the wake-up on
//     the waker's CPU. sched_waking, where the tracer starts, is in the
//     waker's call under both.
//   - A thread sleeping 200 times (countSleeps): every switch-in the
//     kernel counts for it is a sample, under both (nothing in this VM
//     hides a switch from the tracer). How many switch-ins each scheduler
//     gives is its own business, not compared: EEVDF once preempted the
//     sleeper 48 more times than scx_simple did.
//
// The medians are logged side by side, not compared: under TCG how they
// compare is a benchmark's question.
func TestGuestWaitsAlikeUnderEachScheduler(t *testing.T) {
	vmtest.RequireGuest(t)
	type result struct {
		sleeps sleepCount
		wakes  *Histogram
	}
	results := map[string]result{}
	schedulers := []string{"eevdf", "scx_simple"}
	hooks := []string{HookTpBTF, HookRawTP}
	for _, name := range schedulers {
		t.Run(name, func(t *testing.T) {
			if name == "scx_simple" {
				startScxSimple(t)
			}
			for _, hook := range hooks {
				t.Run(hook, func(t *testing.T) {
					r := result{sleeps: countSleeps(t, hook, 0), wakes: checkWakeStart(t, hook)}
					d := r.sleeps.delta
					if d.UnmeasuredWaits+d.UnstampedWaits != 0 {
						t.Errorf("%d waits unmeasured, %d unstamped: in this VM the kernel reports every switch and wake-up", d.UnmeasuredWaits, d.UnstampedWaits)
					}
					if r.wakes.Count() == 0 || r.sleeps.sleeper.Hist.Count() == 0 {
						t.Errorf("%d cross-CPU wake-ups and %d sleeps measured, want both", r.wakes.Count(), r.sleeps.sleeper.Hist.Count())
					}
					results[name+"/"+hook] = r
				})
			}
		})
	}
	for _, hook := range hooks {
		a, b := results["eevdf/"+hook], results["scx_simple/"+hook]
		if a.wakes == nil || b.wakes == nil {
			continue
		}
		for _, name := range schedulers {
			r := results[name+"/"+hook]
			t.Logf("%s, %s: sleeper %d samples of %d switch-ins, p50 %v; cross-CPU wake-ups %d, p50 %v, max %v", hook, name,
				r.sleeps.delta.Samples, r.sleeps.switchIns, time.Duration(r.sleeps.sleeper.Hist.QuantileUpper(0.5)),
				r.wakes.Count(), time.Duration(r.wakes.QuantileUpper(0.5)), time.Duration(r.wakes.Max()))
		}
	}
}
