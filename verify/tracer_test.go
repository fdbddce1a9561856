package verify

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/policy"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loads BPF programs into the running kernel: needs root")
	}
}

// onThread runs fn on a locked OS thread named comm, pinned to cpu (-1:
// anywhere) with the given SCHED_FIFO priority (0: SCHED_OTHER), and
// returns its thread id once it is set up.
func onThread(t *testing.T, comm string, cpu, fifoPrio int, fn func()) (tid int, done <-chan struct{}) {
	t.Helper()
	tids := make(chan int, 1)
	errs := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		name, _ := unix.ByteSliceFromString(comm)
		unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
		if cpu >= 0 {
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errs <- err
				return
			}
		}
		if fifoPrio > 0 {
			param := [1]int32{int32(fifoPrio)}
			if _, _, e := unix.Syscall(unix.SYS_SCHED_SETSCHEDULER, 0, 1 /* SCHED_FIFO */, uintptr(unsafe.Pointer(&param[0]))); e != 0 {
				errs <- e
				return
			}
		}
		tids <- unix.Gettid()
		fn()
	}()
	select {
	case tid := <-tids:
		return tid, finished
	case err := <-errs:
		t.Fatalf("set up thread %s: %v", comm, err)
	}
	return 0, nil
}

func attachForTest(t *testing.T, cfg TracerConfig) *Tracer {
	t.Helper()
	if cfg.Table == nil {
		table, err := policy.Default("infer").Compile("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Table = table
	}
	cfg.FilterTGID = uint32(os.Getpid())
	tr, err := Attach(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func taskByPID(t *testing.T, s *Snapshot, pid int) TaskLatency {
	t.Helper()
	for _, tk := range s.Tasks {
		if int(tk.PID) == pid {
			return tk
		}
	}
	t.Fatalf("task %d not in the snapshot", pid)
	return TaskLatency{}
}

// switchIns is the calling thread's count of trips to a CPU, as the
// kernel keeps it (sched_info.pcount: the third field of schedstat).
func switchIns(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		t.Error(err)
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		t.Errorf("schedstat %q: want three fields", b)
		return 0
	}
	n, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		t.Error(err)
	}
	return n
}

// ownCounts reads, on the calling thread, its switch-ins and the tracer's
// counters at one moment: if the thread lost the CPU between the reads it
// reads again.
func ownCounts(t *testing.T, tr *Tracer) (uint64, Counters) {
	for {
		runs := switchIns(t)
		c, _, err := tr.counters()
		if err != nil {
			t.Error(err)
		}
		if switchIns(t) == runs || t.Failed() {
			return runs, c
		}
	}
}

// The tracer accounts for every wait of a thread that sleeps N times.
// Every time the kernel gives the thread a CPU (its own count, schedstat's
// third field) ends a wait, and the tracer must show each one as a sample
// or count it as unmeasured: some kernels do not report every switch to
// sched_switch probes (this one does not report switches away from some
// tasks), and a wait that ended at such a switch cannot be measured, only
// counted. That is exact, however busy the machine. The number of
// switch-ins is not N: a sleep whose timer fires before the thread has
// left the CPU never switches, and a preemption adds one. The thread runs
// at SCHED_FIFO 1, so almost every sleep is one switch-in, and it sleeps
// with nanosleep(2) itself: Go's time.Sleep parks the thread on a futex
// that the runtime also wakes for its own reasons. The comm filter keeps
// the counters to this one thread.
func TestTracerCountsEverySleep(t *testing.T) {
	requireRoot(t)
	for _, hook := range []string{HookTpBTF, HookRawTP} {
		t.Run(hook, func(t *testing.T) {
			tr := attachForTest(t, TracerConfig{PerTask: true, Hook: hook, FilterComm: "infer-sleeper"})
			const n = 200
			var (
				runs0, runs1 uint64
				c0, c1       Counters
			)
			tid, done := onThread(t, "infer-sleeper", -1, 1, func() {
				ts := unix.NsecToTimespec(int64(500 * time.Microsecond))
				runs0, c0 = ownCounts(t, tr)
				for range n {
					for unix.Nanosleep(&ts, nil) == unix.EINTR {
					}
				}
				runs1, c1 = ownCounts(t, tr)
			})
			<-done
			tr.Stop()
			s, err := tr.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			runs := runs1 - runs0
			samples := c1.Samples - c0.Samples
			unmeasured := c1.UnmeasuredWaits - c0.UnmeasuredWaits
			unstamped := c1.UnstampedWaits - c0.UnstampedWaits
			t.Logf("%d sleeps: the kernel switched the thread in %d times; %d samples, %d unmeasured, %d unstamped; %d switches unreported (any task)",
				n, runs, samples, unmeasured, unstamped, c1.UnreportedSwitches-c0.UnreportedSwitches)
			if samples+unmeasured+unstamped != runs {
				t.Errorf("%d samples + %d unmeasured + %d unstamped waits, want the kernel's %d switch-ins", samples, unmeasured, unstamped, runs)
			}
			// Loose sanity checks of the premise, not of timing: most
			// sleeps give up the CPU, and the kernel reports most switches.
			if runs < n/2 {
				t.Errorf("%d switch-ins for %d sleeps: most sleeps should give up the CPU", runs, n)
			}
			if samples < runs/2 {
				t.Errorf("%d of %d waits measured, want most", samples, runs)
			}
			tk := taskByPID(t, s, tid)
			if tk.Hist.Count() != s.Counters.Samples {
				t.Errorf("the sleeper's histogram holds %d samples, the counters say %d", tk.Hist.Count(), s.Counters.Samples)
			}
			if tk.Class != "inference" || tk.Comm != "infer-sleeper" {
				t.Errorf("task class %q comm %q, want inference, infer-sleeper", tk.Class, tk.Comm)
			}
			if s.Hook != hook {
				t.Errorf("hook %q, want %q", s.Hook, hook)
			}
		})
	}
}

// The known answer: a SCHED_FIFO hog and a sleeper share one CPU. While
// the hog spins (20 ms bursts) the sleeper cannot run, so its longest
// wait is close to a burst, while most of its wake-ups (during the hog's
// pauses) are served at once.
func TestTracerMeasuresAKnownWait(t *testing.T) {
	requireRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs a second CPU for the test's own threads")
	}
	tr := attachForTest(t, TracerConfig{PerTask: true})
	const burst = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	cpu := runtime.NumCPU() - 1
	var wg sync.WaitGroup
	wg.Add(1)
	_, hogDone := onThread(t, "fifo-hog", cpu, 10, func() {
		defer wg.Done()
		for ctx.Err() == nil {
			end := time.Now().Add(burst)
			for time.Now().Before(end) {
			}
			time.Sleep(burst)
		}
	})
	sleeper, sleeperDone := onThread(t, "infer-victim", cpu, 0, func() {
		for ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	})
	<-hogDone
	<-sleeperDone
	tr.Stop()
	s, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h := taskByPID(t, s, sleeper).Hist
	t.Logf("sleeper: %d samples, p50 %v, max %v", h.Count(), time.Duration(h.QuantileUpper(0.5)), time.Duration(h.Max()))
	if max := time.Duration(h.Max()); max < burst/2 || max > 3*burst {
		t.Errorf("longest wait %v, want about one %v burst", max, burst)
	}
	if p50 := time.Duration(h.QuantileUpper(0.5)); p50 > burst/2 {
		t.Errorf("median wait %v: most wake-ups come while the hog sleeps and should be served at once", p50)
	}
	// The thread may have run under Go's name before it was renamed: a
	// few of its samples belong to the normal class.
	inference := s.class("inference")
	if inference.Count() < h.Count()*9/10 || time.Duration(inference.Max()) < time.Duration(h.Max()) {
		t.Errorf("inference class (%d samples, max %v) does not contain the sleeper's samples", inference.Count(), time.Duration(inference.Max()))
	}
}

// A ring buffer too small for the violations, never drained, loses
// records: the loss is counted, and the histograms still have every
// sample.
func TestTracerCountsRingBufferLoss(t *testing.T) {
	requireRoot(t)
	tr := attachForTest(t, TracerConfig{
		RingBufferBytes: os.Getpagesize(),
		Thresholds:      map[string]time.Duration{"normal": time.Nanosecond, "inference": time.Nanosecond},
	})
	_, done := onThread(t, "waker", -1, 0, func() {
		for range 500 {
			time.Sleep(100 * time.Microsecond)
		}
	})
	<-done
	tr.Stop()
	s, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if s.Counters.RingbufDrops == 0 {
		t.Errorf("no ring buffer drops counted for %d samples into a %d-byte ring", s.Counters.Samples, os.Getpagesize())
	}
	if got := s.class("normal").Count() + s.class("inference").Count(); got != s.Counters.Samples {
		t.Errorf("histograms hold %d samples, counters say %d", got, s.Counters.Samples)
	}
}

// A per-task table too small for the threads that run counts the samples
// it could not keep per task; the class histograms still have them all.
func TestTracerCountsTaskTableOverflow(t *testing.T) {
	requireRoot(t)
	tr := attachForTest(t, TracerConfig{PerTask: true, MaxTasks: 2})
	var dones []<-chan struct{}
	for range 4 {
		_, done := onThread(t, "sleeper", -1, 0, func() {
			ts := unix.NsecToTimespec(int64(100 * time.Microsecond))
			for range 50 {
				unix.Nanosleep(&ts, nil)
			}
		})
		dones = append(dones, done)
	}
	for _, d := range dones {
		<-d
	}
	tr.Stop()
	s, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tasks) > 2 || s.Counters.TaskTableFull == 0 {
		t.Errorf("%d tasks kept, %d per-task samples dropped: want at most 2 and some dropped", len(s.Tasks), s.Counters.TaskTableFull)
	}
	var perTask uint64
	for _, tk := range s.Tasks {
		perTask += tk.Hist.Count()
	}
	if perTask+s.Counters.TaskTableFull != s.Counters.Samples {
		t.Errorf("per-task %d + dropped %d != samples %d", perTask, s.Counters.TaskTableFull, s.Counters.Samples)
	}
}

func TestAttachRejectsBadConfig(t *testing.T) {
	table, err := policy.Default("infer").Compile("")
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]TracerConfig{
		"unknown class":  {Table: table, Thresholds: map[string]time.Duration{"batch": time.Millisecond}},
		"ring not pow2":  {Table: table, RingBufferBytes: 5000},
		"long comm":      {Table: table, FilterComm: "a-very-long-comm-name"},
		"unknown hook":   {Table: table, Hook: "kprobe"},
		"missing policy": {},
	} {
		if _, err := Attach(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
