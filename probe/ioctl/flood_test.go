package ioctl

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A process issuing 20,000 made-up commands on /dev/null fills only that
// device's share of the kernel tables: its first KernelCommandsPerDevice
// commands get rows, the rest are counted under OtherCommand, nothing is
// lost, and a call on another device afterwards (TCGETS on /dev/zero) has
// its own row. The report keeps the device's Limits.Commands busiest.
func TestProbeCommandFlood(t *testing.T) {
	requireRoot(t)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	const flood = 20000
	r, _ := measure(t, Config{Hook: HookTpBTF, PID: os.Getpid()}, func() {
		// _IO('h', nr) with a size field: distinct, and unknown to
		// /dev/null (ENOTTY).
		for i := range uint32(flood) {
			unix.Syscall(unix.SYS_IOCTL, null.Fd(), uintptr(0x40006800|(i&0xff)|(i>>8)<<16), 0)
		}
		for range 10 {
			unix.IoctlGetTermios(int(zero.Fd()), unix.TCGETS)
		}
	})
	c := r.Counters
	if c.LostStats != 0 || c.LostHist != 0 || c.LostErrno != 0 {
		t.Errorf("tables filled: lost %d calls, %d histogram samples, %d errnos", c.LostStats, c.LostHist, c.LostErrno)
	}
	if want := uint64(flood - KernelCommandsPerDevice); c.FoldedCommands < want {
		t.Errorf("%d calls folded in the kernel, want at least %d", c.FoldedCommands, want)
	}
	var nullRows int
	var nullCalls uint64
	for _, s := range r.Commands {
		if s.Device.Path == os.DevNull {
			nullRows++
			nullCalls += s.Calls
		}
	}
	if nullRows != DefaultLimits().Commands+1 || nullCalls < flood {
		t.Errorf("/dev/null: %d rows with %d calls, want %d rows (the busiest and other) with all %d", nullRows, nullCalls, DefaultLimits().Commands+1, flood)
	}
	if s, ok := r.Find("/dev/zero", unix.TCGETS); !ok || s.Calls != 10 {
		t.Errorf("/dev/zero TCGETS after the flood: %+v (found %v), want its own row of 10 calls", s, ok)
	}
}
