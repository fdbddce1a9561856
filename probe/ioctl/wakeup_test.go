package ioctl

import (
	"context"
	"encoding/binary"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// userfaultfd(2) ioctls and sizes, from include/uapi/linux/userfaultfd.h.
const (
	uffdAPI             = 0xAA
	uffdioAPI           = 0xC018AA3F // _IOWR(0xAA, 0x3F, struct uffdio_api)
	uffdioRegister      = 0xC020AA00 // _IOWR(0xAA, 0x00, struct uffdio_register)
	uffdioCopy          = 0xC028AA03 // _IOWR(0xAA, 0x03, struct uffdio_copy)
	uffdRegisterMissing = 1
	uffdMsgSize         = 32
)

// blockingIoctl issues TCGETS on the pty master fd with its result buffer
// in a page that userfaultfd holds back: the kernel's copy to user space
// faults and the call sleeps until another thread supplies the page, at
// least delay after the fault was reported: a completion that wakes the
// caller, as a device's interrupt would. It skips the test where
// userfaultfd is not allowed.
func blockingIoctl(t *testing.T, master int, delay time.Duration) {
	t.Helper()
	uffd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)
	if e != 0 {
		t.Skipf("userfaultfd: %v", e)
	}
	defer unix.Close(int(uffd))
	api := [3]uint64{uffdAPI, 0, 0}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uffd, uffdioAPI, uintptr(unsafe.Pointer(&api[0]))); e != 0 {
		t.Fatalf("UFFDIO_API: %v", e)
	}
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	addr := uint64(uintptr(unsafe.Pointer(&mem[0])))
	reg := [4]uint64{addr, uint64(page), uffdRegisterMissing, 0}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uffd, uffdioRegister, uintptr(unsafe.Pointer(&reg[0]))); e != 0 {
		t.Fatalf("UFFDIO_REGISTER: %v", e)
	}

	resolved := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		msg := make([]byte, uffdMsgSize)
		if _, err := unix.Read(int(uffd), msg); err != nil {
			resolved <- err
			return
		}
		fault := binary.LittleEndian.Uint64(msg[16:]) // uffd_msg.arg.pagefault.address
		time.Sleep(delay)
		src := make([]byte, page)
		cp := [5]uint64{fault &^ uint64(page-1), uint64(uintptr(unsafe.Pointer(&src[0]))), uint64(page), 0, 0}
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uffd, uffdioCopy, uintptr(unsafe.Pointer(&cp[0])))
		runtime.KeepAlive(src)
		if e != 0 {
			resolved <- e
			return
		}
		resolved <- nil
	}()
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TCGETS, uintptr(addr)); e != 0 {
		t.Fatalf("TCGETS into a userfaultfd page: %v", e)
	}
	if err := <-resolved; err != nil {
		t.Fatalf("resolve the fault: %v", err)
	}
}

// With Wakeups, a call that sleeps is split into its time asleep until
// the wake-up and the wait to run after it; calls that never sleep show
// no sleeps. The parts fit inside the call.
func TestProbeFollowsSleepsInsideCalls(t *testing.T) {
	requireRoot(t)
	g := newGenerator(t)
	p, err := Attach(context.Background(), Config{PID: os.Getpid(), Dev: "/dev/ptmx", Wakeups: true, StreamSlow: true, Slow: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Close()
		requireNothingLoaded(t)
	}()
	const quick, blocking = 200, 3
	const delay = 20 * time.Millisecond
	for range quick {
		unix.IoctlGetTermios(g.master, unix.TCGETS)
	}
	for range blocking {
		blockingIoctl(t, g.master, delay)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	res, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var slept []SlowCall
	p.Flush()
	if err := p.ReadSlow(func(s SlowCall) {
		if s.Wakeups > 0 {
			slept = append(slept, s)
		}
	}); err != nil {
		t.Fatal(err)
	}
	row, ok := res.Find("/dev/ptmx", unix.TCGETS)
	if !ok || row.Sleeps == nil {
		t.Fatalf("no TCGETS row with sleeps on /dev/ptmx: %+v", res.Commands)
	}
	sl := row.Sleeps
	t.Logf("%d calls, %d slept: %d wake-ups, asleep %v, run wait %v (max %v per call)", row.Calls, sl.Calls, sl.Wakeups, sl.Asleep, sl.RunWait, sl.MaxRunWait)
	if row.Calls != quick+blocking || sl.Calls < blocking || sl.Wakeups < sl.Calls {
		t.Errorf("%d calls, %d slept with %d wake-ups; want %d calls, at least %d slept, a wake-up each", row.Calls, sl.Calls, sl.Wakeups, quick+blocking, blocking)
	}
	if sl.Asleep+sl.RunWait > row.Total || sl.MaxRunWait > sl.RunWait {
		t.Errorf("asleep %v + run wait %v (max %v) do not fit in the calls' %v", sl.Asleep, sl.RunWait, sl.MaxRunWait, row.Total)
	}
	if len(slept) < blocking {
		t.Fatalf("%d streamed calls slept; want at least %d", len(slept), blocking)
	}
	for _, s := range slept {
		t.Logf("slow: %s", s)
		if s.Asleep <= 0 || s.Asleep+s.RunWait > s.Latency {
			t.Errorf("call of %v: asleep %v, run wait %v", s.Latency, s.Asleep, s.RunWait)
		}
	}
	if res.Counters.Losses().Total() != 0 {
		t.Errorf("losses: %+v", res.Counters.Losses())
	}
}
