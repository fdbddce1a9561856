package sched_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// deviceChildEnv makes the test binary a process with two threads that
// sleep in 1 ms steps: the main one, and a worker that prints its thread
// id and, between a "go" and a "stop" line on stdin, opens the device
// named by the variable and issues an ioctl on it at every step.
const deviceChildEnv = "HOTLANE_TEST_DEVICE_CHILD"

func deviceChild(dev string) {
	// The main goroutine is locked to the main thread (tid = pid) by init.
	go func() {
		runtime.LockOSThread()
		fmt.Println(unix.Gettid())
		var using atomic.Bool
		go func() {
			in := bufio.NewScanner(os.Stdin)
			for in.Scan() {
				using.Store(in.Text() == "go")
			}
		}()
		for {
			if using.Load() {
				useDevice(dev)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for {
		time.Sleep(time.Millisecond)
	}
}

// threadState is a thread's state letter and comm from /proc (R, S, ...),
// or why it cannot be read (the thread has exited): a thread neither the
// scheduler nor the tracer has seen may simply not have run.
func threadState(tid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", tid))
	if err != nil {
		return "gone: " + err.Error()
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+3 > len(s) {
		return "unreadable stat"
	}
	return s[end+2:end+3] + " " + s[open+1:end]
}

// useDevice opens path and issues an ioctl on it (TCGETS, which a memory
// device refuses after the kernel's hooks have seen it).
func useDevice(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TCGETS, 0); e != unix.ENOTTY {
		return fmt.Errorf("ioctl(TCGETS) on %s: %v, want ENOTTY", path, e)
	}
	return nil
}

// classesAgree polls until the scheduler and the tracer both put each
// thread in its class of want (the tracer by its latest sample of it).
func classesAgree(t *testing.T, what string, s *sched.Scheduler, tr *verify.Tracer, want map[int]string) {
	t.Helper()
	deadline := time.Now().Add(hangDeadline)
	for {
		snap, err := tr.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		traced := map[int]string{}
		for _, tk := range snap.Tasks {
			traced[int(tk.PID)] = tk.Class
		}
		var wrong []string
		for tid, class := range want {
			got, err := s.TaskClass(tid)
			if err != nil || got != class || traced[tid] != class {
				wrong = append(wrong, fmt.Sprintf("thread %d (%s): scheduler %q (%v), tracer %q; want %q", tid, threadState(tid), got, err, traced[tid], class))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			st, _ := s.Stats()
			t.Fatalf("%s: %s (device uses lost: scheduler %d, tracer %d)", what, strings.Join(wrong, "; "), st.DeviceUsesLost, snap.Counters.DeviceUsesLost)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A thread that opens a device of a "device" matcher joins the lane, its
// sibling does not, and it leaves once the device has been idle; with
// "device_process" every thread of the process joins when one of them
// uses the device. The tracer, loaded beside the scheduler with the same
// policy, classifies every thread as the scheduler does at every step.
// The matchers stay for 5 s after a use: a poll of both (the tracer's
// per-task table read whole) took over a second in a TCG guest, and with
// 1 s the class came and went between two polls.
func TestGuestDeviceMatchersJoinTheLane(t *testing.T) {
	vmtest.RequireGuest(t)
	p, err := policy.Parse("device-policy", []byte(`{"classes": [
		{"name": "accel", "high_priority": true, "preempt": true, "match": [{"device": "/dev/full", "idle": "5s"}]},
		{"name": "accelproc", "high_priority": true, "match": [{"device_process": "1:5", "idle": "5s"}]},
		{"name": "normal"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The device is used at every step until the class is seen, so that
	// no poll, however slow, falls between a use and its idle time.
	var using atomic.Bool
	worker := namedThread(t, ctx, "dev-worker", func() {
		if using.Load() {
			if err := useDevice("/dev/full"); err != nil {
				t.Error(err)
			}
		}
		time.Sleep(time.Millisecond)
	})
	sibling := namedThread(t, ctx, "dev-sibling", func() { time.Sleep(time.Millisecond) })

	proc := startChild(t, deviceChildEnv+"=/dev/zero") // 1:5
	if !proc.out.Scan() {
		t.Fatalf("read the child's worker thread id: %v", proc.out.Err())
	}
	childWorker, err := strconv.Atoi(strings.TrimSpace(proc.out.Text()))
	if err != nil {
		t.Fatalf("child's worker thread id %q: %v", proc.out.Text(), err)
	}
	childMain := proc.cmd.Process.Pid

	s := load(t, p, sched.Config{})
	table, err := p.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := verify.Attach(verify.TracerConfig{Table: table, PerTask: true,
		FilterTIDs: []uint32{uint32(worker), uint32(sibling), uint32(childMain), uint32(childWorker)}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	normal := map[int]string{worker: "normal", sibling: "normal", childMain: "normal", childWorker: "normal"}
	classesAgree(t, "before any device use", s, tr, normal)

	using.Store(true)
	classesAgree(t, "the worker uses /dev/full", s, tr, map[int]string{worker: "accel", sibling: "normal", childMain: "normal", childWorker: "normal"})
	using.Store(false)
	classesAgree(t, "/dev/full idle", s, tr, normal)

	if _, err := io.WriteString(proc.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	classesAgree(t, "the child's worker uses /dev/zero", s, tr, map[int]string{worker: "normal", sibling: "normal", childMain: "accelproc", childWorker: "accelproc"})
	if _, err := io.WriteString(proc.stdin, "stop\n"); err != nil {
		t.Fatal(err)
	}
	classesAgree(t, "/dev/zero idle", s, tr, normal)

	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.DeviceUsesLost != 0 {
		t.Errorf("%d device uses lost", st.DeviceUsesLost)
	}
	if _, exited, _ := s.Exited(); exited {
		t.Error("the scheduler exited")
	}
}
