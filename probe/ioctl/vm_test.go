package ioctl

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/vm/vmtest"
)

// TestVM boots the VM kernel, where fentry works (it fails with EPERM on
// the build host), and runs the TestGuest* tests there.
func TestVM(t *testing.T) {
	vmtest.RunGuestTests(t, vmtest.Options{Run: "^TestGuest", Timeout: 10 * time.Minute})
}

// mountDevpts gives the guest /dev/pts, which its /init does not mount
// and /dev/ptmx needs.
func mountDevpts(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/pts/ptmx"); err == nil {
		return
	}
	if err := os.MkdirAll("/dev/pts", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", 0, "ptmxmode=0666"); err != nil {
		t.Fatalf("mount devpts: %v", err)
	}
}

// TestGuestFentry is TestProbeCountsExactly on the fentry/fexit hook, and
// checks that the automatic choice takes it where it works.
func TestGuestFentry(t *testing.T) {
	vmtest.RequireGuest(t)
	mountDevpts(t)
	g := newGenerator(t)
	for _, h := range []Hook{HookFentry, ""} {
		var want []row
		r, _ := measure(t, Config{Hook: h, PID: os.Getpid(), MeasureCost: true}, func() { want = g.run(t, 200) })
		if r.Hook != HookFentry {
			t.Errorf("hook %q chose %s (notes %q), want fentry", h, r.Hook, r.Notes)
		}
		if diff := cmp.Diff(sortRows(want), sortRows(rows(r))); diff != "" {
			t.Errorf("hook %q: rows (-want +got):\n%s", h, diff)
		}
		if lost := r.Losses.Total(); lost != 0 {
			t.Errorf("lost %d: %+v", lost, r.Losses)
		}
		t.Logf("hook %q: %s; notes %q; cost %+v", h, r.HookDetail, r.Notes, r.Cost)
	}
	// Every family that attaches in the VM counts the same.
	for _, h := range []Hook{HookTracepoint, HookTpBTF, HookRawTP} {
		var want []row
		r, _ := measure(t, Config{Hook: h, PID: os.Getpid()}, func() { want = g.run(t, 50) })
		if diff := cmp.Diff(sortRows(want), sortRows(rows(r))); diff != "" {
			t.Errorf("hook %s: rows (-want +got):\n%s", h, diff)
		}
	}
}
