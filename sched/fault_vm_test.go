package sched_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// TestVMFault boots the sched_ext kernel once and runs the fault tests
// (TestGuestFault*) inside it: kill -9 under load, an adversarial
// inference flood, task churn between cgroups and names, restarts after
// error exits, and CPU hotplug.
func TestVMFault(t *testing.T) {
	vmtest.RunGuestTests(t, vmtest.Options{Run: "^TestGuestFault", Timeout: 10 * time.Minute, MultiThreadedTCG: true})
}

// requireFaultBoot skips a fault test outside the VM, and inside a boot
// that was not started for the fault tests: TestVM's "^TestGuest" pattern
// matches them too, and they should not cost CI their time twice.
func requireFaultBoot(t *testing.T) {
	t.Helper()
	vmtest.RequireBoot(t, "Fault", "TestVMFault")
}

// churnEnv makes the process move itself between cgroups and rename
// itself on command (see churnChild).
const churnEnv = "HOTLANE_TEST_CHURN"

// init runs before TestMain, so a re-executed test binary does its part
// and never reaches the tests.
func init() {
	if os.Getenv(churnEnv) == "1" {
		churnChild()
	}
}

// setComm names the calling thread.
func setComm(comm string) error {
	name, err := unix.ByteSliceFromString(comm)
	if err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_NAME, uintptr(unsafePointer(name)), 0, 0, 0)
}

// hogSet runs CPU hogs, each on its own named OS thread with its own work
// counter, so every thread's progress can be checked on its own.
type hogSet struct {
	comms []string
	work  []atomic.Uint64
	// jumps are the times a hog's CPU time grew by more than
	// minCPUTimeJump between two reads of its loop. A preemption does
	// not grow it; a vCPU the host stopped while the guest ran the hog
	// does (the guest charges the hog for the time its clock moved on).
	jumpsMu sync.Mutex
	jumps   []cpuTimeJump
	started time.Duration // CLOCK_MONOTONIC
	// renamed is the name every hog takes, while it runs, at its next
	// round (rename).
	renamed atomic.Pointer[string]
	stop    func()
}

// rename makes every hog take comm as its name at its next round, while
// it runs: a running task that changes class.
func (h *hogSet) rename(comm string) { h.renamed.Store(&comm) }

// startHogs starts one hog thread per comm at the given nice value; they
// stop with stop() or when the test ends.
func startHogs(t *testing.T, nice int, comms ...string) *hogSet {
	t.Helper()
	h := &hogSet{comms: comms, work: make([]atomic.Uint64, len(comms)), started: monotonic()}
	restore := moreProcs(len(comms))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, comm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := lockThread(comm, nice); err != nil {
				t.Error(err)
				return
			}
			var named *string
			for last := threadCPUTime(); ctx.Err() == nil; {
				h.work[i].Add(1)
				if to := h.renamed.Load(); to != named {
					named = to
					if err := setComm(*to); err != nil {
						t.Error(err)
						return
					}
				}
				now := threadCPUTime()
				if now-last > minCPUTimeJump {
					h.jumped(now - last)
				}
				last = now
			}
		}()
	}
	h.stop = sync.OnceFunc(func() {
		cancel()
		wg.Wait()
		restore()
	})
	t.Cleanup(h.stop)
	return h
}

// minCPUTimeJump is the least growth of a hog's CPU time between two
// reads of its loop that hogSet keeps: a round takes microseconds.
const minCPUTimeJump = 10 * time.Millisecond

// cpuTimeJump is a stretch of CLOCK_MONOTONIC, ending at end, over which
// a hog was charged length of CPU time between two reads of its loop.
type cpuTimeJump struct{ end, length time.Duration }

// monotonic is CLOCK_MONOTONIC, the clock the tracer stamps waits with.
func monotonic() time.Duration {
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		panic(err) // CLOCK_MONOTONIC exists on every Linux
	}
	return time.Duration(now.Nano())
}

func (h *hogSet) jumped(length time.Duration) {
	end := monotonic()
	h.jumpsMu.Lock()
	defer h.jumpsMu.Unlock()
	h.jumps = append(h.jumps, cpuTimeJump{end: end, length: length})
}

// longestJump describes the most CPU time a hog was charged between two
// reads of its loop over the whole run, and when.
func (h *hogSet) longestJump() string {
	h.jumpsMu.Lock()
	defer h.jumpsMu.Unlock()
	var longest cpuTimeJump
	for _, j := range h.jumps {
		if j.length > longest.length {
			longest = j
		}
	}
	if longest.length == 0 {
		return fmt.Sprintf("no hog's CPU time grew by over %v between two reads", minCPUTimeJump)
	}
	return fmt.Sprintf("%d times a hog's CPU time grew by over %v between two reads, at most %v, ending %v after the hogs started",
		len(h.jumps), minCPUTimeJump, longest.length, (longest.end - h.started).Round(time.Millisecond))
}

// jumpDuring is the most CPU time a hog was charged between two reads of
// its loop in a stretch that overlaps [from, to] (CLOCK_MONOTONIC).
func (h *hogSet) jumpDuring(from, to time.Duration) time.Duration {
	h.jumpsMu.Lock()
	defer h.jumpsMu.Unlock()
	var longest time.Duration
	for _, j := range h.jumps {
		if j.end >= from && j.end-j.length <= to {
			longest = max(longest, j.length)
		}
	}
	return longest
}

// moreProcs gives the Go runtime n more processors (GOMAXPROCS) and
// returns the function that takes them back. Every locked, busy thread
// holds one while it runs Go code; without enough, a thread returning
// from a system call would wait for the Go scheduler, not the kernel's.
func moreProcs(n int) (restore func()) {
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + n)
	return func() { runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) - n) }
}

// lockThread locks the calling goroutine to its OS thread for good (the
// thread exits with the goroutine, so its name and nice value never leak
// to other goroutines), names it and sets its nice value.
func lockThread(comm string, nice int) error {
	runtime.LockOSThread()
	if err := setComm(comm); err != nil {
		return fmt.Errorf("%s: name the thread: %w", comm, err)
	}
	// PRIO_PROCESS with who 0 is the calling thread on Linux.
	if err := unix.Setpriority(unix.PRIO_PROCESS, 0, nice); err != nil {
		return fmt.Errorf("%s: setpriority %d: %w", comm, nice, err)
	}
	return nil
}

// hogWork is every hog's work counter at one moment.
type hogWork struct {
	at   time.Time
	work []uint64
}

func (h *hogSet) snapshot() hogWork {
	s := hogWork{at: time.Now(), work: make([]uint64, len(h.work))}
	for i := range h.work {
		s.work[i] = h.work[i].Load()
	}
	return s
}

// progress returns every hog's work in the next d, to be logged, and
// checks that every hog makes progress: one that did not move in d is
// waited for up to hangDeadline (a slow or busy machine can hold a thread
// back for a while), and the test fails only if it never moves.
func (h *hogSet) progress(t *testing.T, when string, d time.Duration) []uint64 {
	t.Helper()
	before := h.snapshot()
	time.Sleep(d)
	after := h.snapshot().work
	delta := make([]uint64, len(after))
	for i := range after {
		delta[i] = after[i] - before.work[i]
	}
	for i := range delta {
		if delta[i] != 0 {
			continue
		}
		for h.work[i].Load() == after[i] && time.Since(before.at) < hangDeadline {
			time.Sleep(10 * time.Millisecond)
		}
		if h.work[i].Load() == after[i] {
			t.Errorf("%s: hog %d (%s) made no progress in %s", when, i, h.comms[i], hangDeadline)
		} else {
			t.Logf("%s: hog %d (%s) first moved %s after the start of the %s window", when, i, h.comms[i], time.Since(before.at).Round(time.Millisecond), d)
		}
	}
	return delta
}

// kill -9 of `hotlane run` while hogs keep both CPUs busy. The
// kernel owns the struct_ops link through the process's descriptors, so
// it must go back to its default scheduler by itself (how long that takes
// is logged: under TCG it is the emulator's time), and no task may be left
// behind: every hog keeps counting after the kill.
func TestGuestFaultKill9UnderLoad(t *testing.T) {
	requireFaultBoot(t)
	comms := []string{"infer-hog"}
	for range 2 * runtime.NumCPU() {
		comms = append(comms, "hog")
	}
	// The hogs start once the scheduler runs: loading it is slow under TCG
	// when it has to share the CPUs.
	cmd, stderr := startRun(t)
	hogs := startHogs(t, 0, comms...)
	t.Logf("work per hog in 1s under hotlane: %v", hogs.progress(t, "under hotlane", time.Second))

	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if took, ok := waitDisabledAfter(t, killed, "kill -9 under load"); !ok {
		t.Fatalf("sched_ext state %q %s after kill -9, want disabled\n%s", readSysfs(t, "state"), took, stderr)
	}
	err := cmd.Wait()
	t.Logf("hotlane run: %v", err)
	if ops := readSysfs(t, "root/ops"); ops != "" {
		t.Errorf("root/ops = %q after the kill, want no BPF scheduler", ops)
	}
	t.Logf("work per hog in 1s after the kill: %v", hogs.progress(t, "after kill -9", time.Second))
}

// An adversarial inference class. Inference tasks spin on every
// CPU while short-lived inference tasks are created as fast as four forker
// threads can: each fork execs a tiny program called infer-burst that
// clones floodThreads threads, which exit at once, and exits itself (see
// floodProgram), for 60 s. The behaviour asserted: the scheduler never
// exits (the sched_ext watchdog, which ejects it when a runnable task
// waits longer than its timeout, is the judge of starvation), the normal
// tasks and per-CPU kthreads keep making progress, the starvation guard
// dispatches, and the tracer's stream of long waits is complete. How
// many tasks the flood made, the normal tasks' longest gaps and the
// waits over the starvation guard's bound are measured and logged: on a
// slow or busy machine they are the machine's figures as much as the
// scheduler's (the run-queue tracer names every wait over the bound).
func TestGuestFaultInferenceFlood(t *testing.T) {
	requireFaultBoot(t)
	const run = 60 * time.Second
	cfg := sched.Config{Timeout: sched.DefaultTimeout}
	s := load(t, policy.Default("infer"), cfg)
	start, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	// The tracer measures every task's run-queue waits, classified as the
	// scheduler does: the longest is how close the watchdog came.
	table, err := policy.Default("infer").Compile("")
	if err != nil {
		t.Fatal(err)
	}
	// Normal tasks' waits over the bound are streamed with what ran
	// meanwhile.
	tick, err := sched.Tick()
	if err != nil {
		t.Fatal(err)
	}
	bound := sched.Config{Table: table, Starvation: cfg.Starvation}.Bound(tick).ForWeight(8, sched.NiceWeight(19))
	tr, err := verify.Attach(verify.TracerConfig{Table: table, PerTask: true, Thresholds: map[string]time.Duration{"normal": bound}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var longWaits []verify.Violation
	readCtx, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	readDone := make(chan error, 1)
	go func() {
		readDone <- tr.ReadViolations(readCtx, func(v verify.Violation) { longWaits = append(longWaits, v) })
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	errs := make(chan error, 16)

	// Normal threads doing periodic work: one at the default nice value
	// computing 1 ms a round, and a background one at nice 19 computing a
	// full fair slice (5 ms) a round, like the kernel's own khugepaged
	// (nice 19), which is what the watchdog caught first. Their longest
	// gaps between rounds are how long normal work was held up. They
	// start first, so the tracer's per-task table has them before the
	// flood fills it.
	workers := []*roundWorker{
		startRoundWorker(t, ctx, &wg, "normal-work", 0, time.Millisecond),
		startRoundWorker(t, ctx, &wg, "normal-nice19", 19, 5*time.Millisecond),
	}

	// Inference tasks spinning on every CPU.
	var spinComms []string
	for range runtime.NumCPU() {
		spinComms = append(spinComms, "infer-spin")
	}
	spinners := startHogs(t, 0, spinComms...)
	defer spinners.stop()

	// Short-lived inference processes and threads.
	burst := filepath.Join(t.TempDir(), "infer-burst")
	if err := os.WriteFile(burst, floodProgram(floodThreads), 0o755); err != nil {
		t.Fatal(err)
	}
	const forkers = 4
	defer moreProcs(forkers + 2 /* round workers */)()
	var execs atomic.Int64
	for range forkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The forks come from inference threads.
			if err := lockThread("infer-forker", 0); err != nil {
				errs <- err
				return
			}
			for ctx.Err() == nil {
				if err := runFloodProgram(burst); err != nil {
					errs <- err
					return
				}
				execs.Add(1)
			}
		}()
	}

	// Work queued on every CPU's kworker: writing vm/stat_refresh runs
	// schedule_on_each_cpu() and waits for all of them; sync waits for
	// the flusher threads.
	var kworkRuns int
	var kworkMax time.Duration
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
		took, err := withDeadline(hangDeadline, func() error {
			if err := os.WriteFile("/proc/sys/vm/stat_refresh", []byte("1"), 0o600); err != nil {
				return err
			}
			unix.Sync()
			return nil
		})
		if err != nil {
			t.Fatalf("per-CPU kworkers during the flood: %v", err)
		}
		kworkRuns++
		kworkMax = max(kworkMax, took)
	}
	wg.Wait()
	spinners.stop()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tr.Stop()
	stopReading()
	if err := <-readDone; err != nil {
		t.Errorf("read long waits: %v", err)
	}
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}

	end, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	d := end.Sub(start)
	tasks := execs.Load() * (1 + floodThreads)
	t.Logf("%s flood: %d short-lived processes (fork+exec) with %d threads each, %d tasks; inference enqueued %d, normal enqueued %d",
		run, execs.Load(), floodThreads, tasks, d.Classes[0].Enqueued, d.Classes[1].Enqueued)
	t.Logf("guard dispatches %d, preempt kicks %d, kthread inserts %d", d.GuardDispatches, d.PreemptKicks, d.KthreadDirect)
	for _, w := range workers {
		t.Logf("%s (nice %d, %s a round): %d rounds, longest gap %s (watchdog %s)", w.comm, w.nice, w.compute, w.rounds.Load(), w.longestGap(), cfg.Timeout)
	}
	t.Logf("stat_refresh+sync on every CPU: %d runs, longest %s", kworkRuns, kworkMax)
	var longestWait time.Duration
	for _, c := range snap.Classes {
		wait := time.Duration(c.Hist.Max())
		longestWait = max(longestWait, wait)
		t.Logf("run-queue wait of %s tasks: %d samples, p50 %v, p99 %v, max %v",
			c.Class, c.Hist.Count(), time.Duration(c.Hist.QuantileUpper(0.5)), time.Duration(c.Hist.QuantileUpper(0.99)), wait)
	}
	// Every normal task's longest wait, longest first.
	var normal []verify.TaskLatency
	for _, tl := range snap.Tasks {
		if tl.Class == "normal" {
			normal = append(normal, tl)
		}
	}
	slices.SortFunc(normal, func(a, b verify.TaskLatency) int { return cmp.Compare(b.Hist.Max(), a.Hist.Max()) })
	t.Logf("%d normal tasks waited for a CPU; the longest waits (bound %v with a %v tick):", len(normal), bound, tick)
	for _, tl := range normal[:min(12, len(normal))] {
		t.Logf("  %s[%d]: %d waits, p99 %v, max %v", tl.Comm, tl.PID, tl.Hist.Count(),
			time.Duration(tl.Hist.QuantileUpper(0.99)), time.Duration(tl.Hist.Max()))
	}
	slices.SortFunc(longWaits, func(a, b verify.Violation) int { return cmp.Compare(b.Latency, a.Latency) })
	t.Logf("%d waits of normal tasks over the %v bound", len(longWaits), bound)
	for _, v := range longWaits[:min(10, len(longWaits))] {
		t.Logf("  %v: %s[%d] (%s) on CPU %d, which ran %s[%d]", v.Latency, v.Comm, v.PID, v.Class, v.CPU, v.PrevComm, v.PrevPID)
	}
	c := snap.Counters
	t.Logf("tracer: %d wakeups, %d switches, %d samples; ring buffer drops %d, per-task table full %d, stamp failures %d, waits unmeasured %d, unstamped %d",
		c.Wakeups, c.Switches, c.Samples, c.RingbufDrops, c.TaskTableFull, c.StampFailures, c.UnmeasuredWaits, c.UnstampedWaits)

	if info, exited, err := s.Exited(); err != nil || exited {
		t.Errorf("the scheduler exited under the inference flood: %v (%v)", info, err)
	} else if state := readSysfs(t, "state"); state != "enabled" {
		t.Errorf("sched_ext state %q after the flood, want enabled", state)
	} else if longestWait >= cfg.Timeout {
		t.Logf("note: a task waited %s, not below the %s watchdog timeout, and the watchdog did not fire: the machine held the guest up", longestWait, cfg.Timeout)
	}
	if execs.Load() == 0 {
		t.Errorf("no short-lived task ran in %s: the flood never started", run)
	}
	for _, w := range workers {
		if w.rounds.Load() == 0 {
			t.Errorf("%s made no progress", w.comm)
		}
	}
	// Every wait over the bound was streamed: none may be missing from
	// the log above.
	if n := snap.Counters.RingbufDrops; n > 0 {
		t.Errorf("%d long waits were dropped from the tracer's stream: the list above is incomplete", n)
	}
	if kworkRuns == 0 {
		t.Error("no work queued on the per-CPU kworkers completed")
	}
	if d.KthreadDirect == 0 {
		t.Error("no per-CPU kthread was inserted during the flood")
	}
	if d.GuardDispatches == 0 {
		t.Error("the starvation guard never dispatched: the flood did not saturate the CPUs")
	}
}

// roundWorker is a normal thread doing periodic work: it sleeps 10 ms
// (clock_nanosleep on its own thread, no Go timer in between), burns
// compute of its own CPU time, and keeps its longest gap between finished
// rounds.
type roundWorker struct {
	comm            string
	nice            int
	compute         time.Duration
	rounds          atomic.Int64
	lastNs, maxGapN atomic.Int64
}

func startRoundWorker(t *testing.T, ctx context.Context, wg *sync.WaitGroup, comm string, nice int, compute time.Duration) *roundWorker {
	w := &roundWorker{comm: comm, nice: nice, compute: compute}
	w.lastNs.Store(time.Now().UnixNano())
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := lockThread(comm, nice); err != nil {
			t.Error(err)
			return
		}
		sleep := unix.NsecToTimespec(int64(10 * time.Millisecond))
		for ctx.Err() == nil {
			unix.Nanosleep(&sleep, nil)
			end := threadCPUTime() + compute
			for threadCPUTime() < end {
			}
			w.observe()
			w.rounds.Add(1)
		}
		// A thread starved at the end only gets here when it runs again.
		w.observe()
	}()
	return w
}

func (w *roundWorker) observe() {
	now := time.Now().UnixNano()
	if gap := now - w.lastNs.Swap(now); gap > w.maxGapN.Load() {
		w.maxGapN.Store(gap)
	}
}

func threadCPUTime() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// spinFor keeps the calling thread busy until it has run d of CPU time.
func spinFor(d time.Duration) {
	for end := threadCPUTime() + d; threadCPUTime() < end; {
	}
}

// longestGap is the longest time between finished rounds; read it once
// the worker has stopped.
func (w *roundWorker) longestGap() time.Duration { return time.Duration(w.maxGapN.Load()) }

// floodThreads is how many threads each short-lived flood process clones.
const floodThreads = 8

// floodProgram is a complete x86-64 Linux executable, 187 bytes: it clones
// threads threads (CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD
// on the caller's stack; they touch no memory) that exit at once, then
// exit_group(0), or exit_group(2) if a clone failed. No loader, no libc and
// no Go runtime start-up: a fork+exec of it costs little more than the
// kernel's own work, so the flood is as dense as the CPUs allow.
func floodProgram(threads byte) []byte {
	code := []byte{
		0xbb, threads, 0, 0, 0, // 0:  mov ebx, threads
		0xb8, 56, 0, 0, 0, //      5:  mov eax, SYS_clone      <- loop
		0xbf, 0x00, 0x0f, 0x01, 0x00, // 10: mov edi, 0x10f00 (flags)
		0x31, 0xf6, //             15: xor esi, esi (same stack)
		0x31, 0xd2, //             17: xor edx, edx
		0x45, 0x31, 0xd2, //       19: xor r10d, r10d
		0x45, 0x31, 0xc0, //       22: xor r8d, r8d
		0x0f, 0x05, //             25: syscall
		0x85, 0xc0, //             27: test eax, eax
		0x74, 0x1b, //             29: je child (58)
		0x78, 0x0d, //             31: js fail (46)
		0xff, 0xcb, //             33: dec ebx
		0x75, 0xe0, //             35: jne loop (5)
		0x31, 0xff, //             37: xor edi, edi
		0xb8, 231, 0, 0, 0, //     39: mov eax, SYS_exit_group
		0x0f, 0x05, //             44: syscall
		0xbf, 2, 0, 0, 0, //       46: mov edi, 2              <- fail
		0xb8, 231, 0, 0, 0, //     51: mov eax, SYS_exit_group
		0x0f, 0x05, //             56: syscall
		0x31, 0xff, //             58: xor edi, edi            <- child
		0xb8, 60, 0, 0, 0, //      60: mov eax, SYS_exit
		0x0f, 0x05, //             65: syscall
	}
	const base = 0x400000
	const headers = 64 + 56 // ELF header, one program header
	size := uint64(headers + len(code))
	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Entry: base + headers, Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1,
	}
	copy(h.Ident[:], []byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)})
	binary.Write(&b, binary.LittleEndian, h)
	binary.Write(&b, binary.LittleEndian, elf.Prog64{
		Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X),
		Vaddr: base, Paddr: base, Filesz: size, Memsz: size, Align: 0x1000,
	})
	b.Write(code)
	return b.Bytes()
}

// runFloodProgram forks, execs path and reaps it, without os/exec's pipes
// and goroutines.
func runFloodProgram(path string) error {
	pid, err := syscall.ForkExec(path, []string{path}, &syscall.ProcAttr{})
	if err != nil {
		return fmt.Errorf("fork+exec %s: %w", path, err)
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("wait for %s: %w", path, err)
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return fmt.Errorf("%s: wait status %#x, want exit 0 (2: a clone failed)", path, ws)
	}
	return nil
}

// The flood program runs on any x86-64 Linux: check it on the host.
func TestFaultFloodProgram(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the flood program is x86-64 machine code")
	}
	path := filepath.Join(t.TempDir(), "infer-burst")
	if err := os.WriteFile(path, floodProgram(floodThreads), 0o755); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := runFloodProgram(path); err != nil {
			t.Fatal(err)
		}
	}
}

// withDeadline runs fn and fails if it has not returned within d; fn is
// left running then (it is stuck in the kernel, which is the finding).
func withDeadline(d time.Duration, fn func() error) (time.Duration, error) {
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(d):
		return d, fmt.Errorf("still blocked after %s", d)
	}
}

// churnChild is the test binary as a task that moves itself between
// cgroups and renames itself: each line "CGROUP-DIR NAME" on stdin makes
// its main thread (whose tid is the pid) write its pid into the cgroup and
// take the name, and it answers "ok" or the error.
func churnChild() {
	runtime.LockOSThread()
	in := bufio.NewScanner(os.Stdin)
	pid := []byte(strconv.Itoa(os.Getpid()))
	for in.Scan() {
		dir, name, _ := strings.Cut(in.Text(), " ")
		err := os.WriteFile(dir+"/cgroup.procs", pid, 0o644)
		if err == nil {
			err = setComm(name)
		}
		if err != nil {
			fmt.Printf("error: %v\n", err)
			continue
		}
		fmt.Println("ok")
	}
	os.Exit(0)
}

// A task that keeps moving between cgroups and renaming itself is
// reclassified every time, and the scheduler never errors. The policy
// gives each combination its own class: in the cgroup "sliced" whatever
// the name, else "inference" by name, else "normal".
func TestGuestFaultChurnReclassifies(t *testing.T) {
	requireFaultBoot(t)
	const (
		steps      = 1000
		checkEvery = 25
		cgroupRoot = "/sys/fs/cgroup"
		cg         = cgroupRoot + "/fault-churn.slice"
	)
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(cg)

	churn := startChild(t, churnEnv+"=1")
	stdin, answers := churn.stdin, churn.out
	pid := churn.cmd.Process.Pid

	p, err := policy.Parse("churn-policy", []byte(`{"classes": [
		{"name": "sliced", "match": [{"cgroup": "/fault-churn.slice"}]},
		{"name": "inference", "high_priority": true, "preempt": true, "match": [{"comm_prefix": "infer"}]},
		{"name": "normal"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// The child sleeps in read(2) until the first step: tasks that have
	// not run since the scheduler started are not classified yet.
	s := load(t, p, sched.Config{})

	began := time.Now()
	checks := 0
	var lastName string
	for i := range steps {
		// Walk through all four combinations in an order that changes
		// the cgroup alone, the name alone, and both at once.
		inCgroup := []bool{true, true, false, false, true, false}[i%6]
		named := []bool{false, true, true, false, false, true}[i%6]
		dir, name, want := cgroupRoot, fmt.Sprintf("worker-%d", i), "normal"
		if named {
			name, want = fmt.Sprintf("infer-%d", i), "inference"
		}
		if inCgroup {
			dir, want = cg, "sliced"
		}
		lastName = name
		fmt.Fprintf(stdin, "%s %s\n", dir, name)
		if !answers.Scan() || answers.Text() != "ok" {
			t.Fatalf("step %d (%s %s): child answered %q (%v)", i, dir, name, answers.Text(), answers.Err())
		}
		if i%checkEvery == 0 || i == steps-1 {
			waitClass(t, s, pid, want)
			checks++
		}
	}
	took := time.Since(began)

	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != lastName {
		t.Errorf("child comm %q after the last step", comm)
	}
	info, exited, err := s.Exited()
	if err != nil || exited {
		t.Fatalf("the scheduler exited during the churn: %v (%v)", info, err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d moves/renames in %s, class checked %d times; enqueued per class %d/%d/%d, uncached classifications %d",
		steps, took, checks, st.Classes[0].Enqueued, st.Classes[1].Enqueued, st.Classes[2].Enqueued, st.ClassifyUncached)
	if st.ClassifyUncached != 0 {
		t.Errorf("%d classifications could not be cached", st.ClassifyUncached)
	}
}

// `hotlane run --restart-on-error 2` with an error injected after
// 200 enqueues loads the scheduler three times, says so twice, then exits
// 1 with the last exit, leaving the kernel on its default scheduler.
func TestGuestFaultRestartOnError(t *testing.T) {
	requireFaultBoot(t)
	// On an idle machine nearly every wake-up finds an idle CPU and is
	// dispatched in select_cpu without an enqueue: 200 enqueues take about
	// 20 s. A hog per CPU makes them take well under a second; at nice 19
	// the hogs hardly slow down loading under the default scheduler.
	var comms []string
	for range runtime.NumCPU() {
		comms = append(comms, "hog")
	}
	startHogs(t, 19, comms...)
	var stderr strings.Builder
	cmd := exec.Command(vmtest.HotlaneGuestPath, "run", "-q", "--debug-error-after", "200", "--restart-on-error", "2")
	cmd.Stderr = &stderr
	began := time.Now()
	err := cmd.Run()
	t.Logf("hotlane run with 2 restarts took %s:\n%s", time.Since(began), stderr.String())
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("hotlane run: %v, want exit status 1", err)
	}
	out := stderr.String()
	if n := strings.Count(out, "hotlane: scheduler enabled"); n != 3 {
		t.Errorf("scheduler enabled %d times, want 3 (the first run and 2 restarts)", n)
	}
	// Each start says what the built-in policy's classes get (#42).
	for _, class := range []string{
		"hotlane:   inference: high priority, preempts lower classes, 2 ms slice, matched by: comm prefix \"infer\"\n",
		"hotlane:   normal: fair queue, weight 100, 5 ms slice, matched by: every task no other class takes\n",
	} {
		if n := strings.Count(out, class); n != 3 {
			t.Errorf("%d start-up lines %q, want one a start (3)", n, class)
		}
	}
	for _, want := range []string{
		"hotlane: scheduler exited with error: SCX_EXIT_ERROR_BPF (1025): scx_bpf_error: debug: error injected after 200 enqueues; restarting (1 of 2)\n",
		"hotlane: scheduler exited with error: SCX_EXIT_ERROR_BPF (1025): scx_bpf_error: debug: error injected after 200 enqueues; restarting (2 of 2)\n",
		"hotlane: scheduler exited: SCX_EXIT_ERROR_BPF (1025): scx_bpf_error: debug: error injected after 200 enqueues\n",
		"hotlane: giving up after 2 restarts\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if strings.Contains(out, "(3 of 2)") {
		t.Error("restarted more than twice")
	}
	waitState(t, "disabled", hangDeadline)
}

// CPU hotplug while the scheduler runs under a little load. hotlane has
// ops.cpu_online and ops.cpu_offline, so the kernel keeps it through the
// hotplug (without them it ends a scheduler at once with
// SCX_EXIT_UNREG_KERN "cpu 1 going offline"): it stays enabled with CPU 1
// offline, every task keeps running, and once CPU 1 is back hotlane runs
// tasks on it again.
func TestGuestFaultCPUHotplug(t *testing.T) {
	requireFaultBoot(t)
	const (
		cpu1             = "/sys/devices/system/cpu/cpu1/online"
		hotplugTolerance = 30 * time.Second
	)
	if runtime.NumCPU() < 2 {
		t.Skip("needs a second CPU to take offline")
	}
	setOnline := func(v string) (time.Duration, error) {
		return withDeadline(hotplugTolerance, func() error { return os.WriteFile(cpu1, []byte(v), 0o644) })
	}
	readOnline := func() string {
		b, _ := os.ReadFile(cpu1)
		return strings.TrimSpace(string(b))
	}
	t.Cleanup(func() {
		if readOnline() != "1" {
			setOnline("1")
		}
	})
	var s *sched.Scheduler
	stillRunning := func(when string) {
		t.Helper()
		if info, exited, err := s.Exited(); err != nil || exited {
			t.Fatalf("%s: the scheduler ended: %v (%v)", when, info, err)
		}
		if state := readSysfs(t, "state"); state != "enabled" {
			t.Fatalf("%s: sched_ext state %q, want enabled", when, state)
		}
	}

	// nice 19: loading hotlane under TCG is slow enough unshared.
	hogs := startHogs(t, 19, "infer-hog", "hog", "hog")
	s = load(t, policy.Default("infer"), sched.Config{})
	seq := readSysfs(t, "hotplug_seq")
	hogs.progress(t, "under hotlane before the hotplug", 500*time.Millisecond)

	took, err := setOnline("0")
	if err != nil {
		t.Fatalf("take cpu1 offline: %v", err)
	}
	t.Logf("cpu1 offline in %s; hotplug_seq %s -> %s", took, seq, readSysfs(t, "hotplug_seq"))
	t.Logf("work per hog in 1s with cpu1 offline: %v", hogs.progress(t, "cpu1 offline", time.Second))
	stillRunning("cpu1 offline")

	if took, err = setOnline("1"); err != nil {
		t.Fatalf("bring cpu1 back online: %v", err)
	}
	if got := readOnline(); got != "1" {
		t.Fatalf("cpu1 online = %q after writing 1", got)
	}
	back, before := time.Now(), cpuBusy(t, 1)
	t.Logf("cpu1 online in %s; work per hog in 1s with cpu1 back: %v", took, hogs.progress(t, "cpu1 back online", time.Second))
	t.Logf("cpu1 busy %d ticks in that second", cpuBusy(t, 1)-before)
	for cpuBusy(t, 1) == before {
		if time.Since(back) > hangDeadline {
			t.Fatalf("cpu1 ran nothing in the %s after it came back online", hangDeadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stillRunning("cpu1 back online")
	if info, err := s.Close(); err != nil || info.KindName != "SCX_EXIT_UNREG" {
		t.Errorf("after the hotplug the scheduler ended with %v (%v), want SCX_EXIT_UNREG", info, err)
	}
	waitState(t, "disabled", hangDeadline)
}

// cpuBusy is the user+nice+system time of one CPU from /proc/stat, in
// clock ticks.
func cpuBusy(t *testing.T, cpu int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("cpu%d ", cpu)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		var user, nice, system uint64
		if _, err := fmt.Sscanf(line[len(prefix):], "%d %d %d", &user, &nice, &system); err != nil {
			t.Fatalf("/proc/stat %q: %v", line, err)
		}
		return user + nice + system
	}
	t.Fatalf("no %q line in /proc/stat", prefix)
	return 0
}
