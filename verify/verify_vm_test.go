package verify_test

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/vm/vmtest"
	"github.com/hotlane/hotlane/workloads"
)

// TestVM runs the TestGuest* tests inside the sched_ext VM.
func TestVM(t *testing.T) {
	vmtest.RunGuestTests(t, vmtest.Options{Run: "^TestGuest", ScxSimple: true, Timeout: 10 * time.Minute})
}

func waitOps(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
		if err == nil && s.Ops == want && (want == "" || s.State == "enabled") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sched_ext runs %q (%s), want %q", s.Ops, s.State, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The tracer judges every scheduler, so it must work under each: the
// kernel default, the upstream scx_simple and hotlane.
func TestGuestTracerUnderEachScheduler(t *testing.T) {
	vmtest.RequireGuest(t)
	p := policy.Default("infer")
	table, err := p.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"eevdf", "scx_simple", "hotlane"} {
		t.Run(name, func(t *testing.T) {
			switch name {
			case "scx_simple":
				cmd := exec.Command(vm.ScxSimpleGuestPath)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() {
					cmd.Process.Signal(syscall.SIGINT)
					cmd.Wait()
					waitOps(t, "")
				}()
				waitOps(t, "simple")
			case "hotlane":
				s, err := sched.Load(sched.Config{Table: table})
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					s.Close()
					waitOps(t, "")
				}()
			}
			tr, err := verify.Attach(verify.TracerConfig{Table: table, PerTask: true})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := (workloads.Mix{
				Periodic: []workloads.Periodic{{Comm: "infer", Period: 10 * time.Millisecond, Compute: time.Millisecond}},
				Hogs:     []workloads.Hogs{{Comm: "hog", Threads: 2}},
			}).Run(ctx); err != nil {
				t.Fatal(err)
			}
			tr.Stop()
			snap, err := tr.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range snap.Classes {
				t.Logf("%s: %s %d samples, p99 %v, max %v", name, c.Class, c.Hist.Count(),
					time.Duration(c.Hist.QuantileUpper(0.99)), time.Duration(c.Hist.Max()))
				if c.Hist.Count() == 0 {
					t.Errorf("no samples for class %s under %s", c.Class, name)
				}
			}
			if snap.Hook != verify.HookTpBTF {
				t.Errorf("hook %s, want tp_btf on the VM kernel", snap.Hook)
			}
			c := snap.Counters
			t.Logf("%s: %d wakeups, %d switches, %d samples; %d waits unmeasured, %d unstamped, %d switches unreported; stamp failures %d, uncached %d",
				name, c.Wakeups, c.Switches, c.Samples, c.UnmeasuredWaits, c.UnstampedWaits, c.UnreportedSwitches, c.StampFailures, c.ClassifyUncached)
			// Nothing in this VM hides a switch or a wake-up from the
			// tracer: every wait is measured, under every scheduler.
			if c.UnmeasuredWaits+c.UnstampedWaits != 0 {
				t.Errorf("%s: %d waits unmeasured, %d unstamped, want none", name, c.UnmeasuredWaits, c.UnstampedWaits)
			}
		})
	}
}
