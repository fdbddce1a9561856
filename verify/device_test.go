package verify

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// taskClass is the class of thread pid's latest sample, "" if it has none.
func taskClass(s *Snapshot, pid int) string {
	for _, tk := range s.Tasks {
		if int(tk.PID) == pid {
			return tk.Class
		}
	}
	return ""
}

// A thread that issues an ioctl on a device of a device matcher joins its
// class in the tracer's figures; a sibling that never does stays out; the
// thread leaves once the device has been idle for the matcher's idle time,
// not before.
//
// In the VM: fentry, which device matchers need, is refused on the host.
func TestGuestTracerFollowsDeviceMatchers(t *testing.T) {
	vmtest.RequireGuest(t)
	const idle = 2 * time.Second
	// Opened before the tracer exists: only the ioctl can be seen.
	dev, err := os.Open("/dev/full")
	if err != nil {
		t.Skipf("no /dev/full to use as the device: %v", err)
	}
	defer dev.Close()
	p, err := policy.Parse("device-policy", []byte(`{"classes": [
		{"name": "accel", "high_priority": true, "match": [{"device": "/dev/full", "idle": "2s"}]},
		{"name": "normal"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	table, err := p.Compile("")
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var useDevice atomic.Bool
	var lastUse atomic.Int64 // taken before each ioctl, so never after the kernel's stamp
	ts := unix.NsecToTimespec(int64(time.Millisecond))
	sleepLoop := func(use bool) func() {
		return func() {
			for ctx.Err() == nil {
				if use && useDevice.Load() {
					lastUse.Store(time.Now().UnixNano())
					// TCGETS on a memory device: ENOTTY, after the LSM hook.
					if _, _, e := unix.Syscall(unix.SYS_IOCTL, dev.Fd(), unix.TCGETS, 0); e != unix.ENOTTY {
						t.Errorf("ioctl(TCGETS) on /dev/full: %v, want ENOTTY", e)
					}
				}
				unix.Nanosleep(&ts, nil)
			}
		}
	}
	worker, _ := onThread(t, "dev-worker", -1, 0, sleepLoop(true))
	sibling, _ := onThread(t, "dev-sibling", -1, 0, sleepLoop(false))
	tr := attachForTest(t, TracerConfig{Table: table, PerTask: true, FilterTIDs: []uint32{uint32(worker), uint32(sibling)}})

	// waitClasses polls until both threads' latest samples are of the
	// given classes, and returns when that was seen.
	waitClasses := func(what, wantWorker, wantSibling string) time.Time {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s, err := tr.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			w, sib := taskClass(s, worker), taskClass(s, sibling)
			if w == wantWorker && sib == wantSibling {
				return time.Now()
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: worker %q, sibling %q; want %q, %q (device uses lost: %d)", what, w, sib, wantWorker, wantSibling, s.Counters.DeviceUsesLost)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitClasses("before any ioctl", "normal", "normal")
	useDevice.Store(true)
	waitClasses("while the worker issues ioctls", "accel", "normal")
	useDevice.Store(false)
	left := waitClasses("once the device is idle", "normal", "normal")
	if since := left.Sub(time.Unix(0, lastUse.Load())); since < idle {
		t.Errorf("the worker left the class %s after its last ioctl; the idle time is %s", since, idle)
	}

	// raw_tp cannot look into task storage: a device policy needs tp_btf.
	if _, err := Attach(TracerConfig{Table: table, Hook: HookRawTP}); !errors.Is(err, ErrBadTracerConfig) {
		t.Errorf("raw_tp with a device policy: %v, want ErrBadTracerConfig", err)
	}
}

// Where the kernel refuses fentry (as this project's build host does), a
// policy with device matchers is refused with loader.ErrDeviceHooks, the
// same error the scheduler gives, and nothing stays attached.
func TestTracerRefusesDeviceMatchersWithoutFentry(t *testing.T) {
	requireRoot(t)
	p, err := policy.Parse("device-policy", []byte(`{"classes": [
		{"name": "accel", "match": [{"device": "1:7"}]}, {"name": "normal"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	table, err := p.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Attach(TracerConfig{Table: table})
	if err == nil {
		tr.Close()
		t.Skip("this kernel loads fentry programs: the refusal cannot be seen here (the VM tests cover the hooks)")
	}
	if !errors.Is(err, loader.ErrDeviceHooks) {
		t.Errorf("Attach: %v; want loader.ErrDeviceHooks", err)
	}
	t.Logf("refused: %v", err)
}
