package ioctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// requireRoot skips privileged tests with the reason.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loads BPF programs into the running kernel: run as root")
	}
}

// ourPrograms lists the BPF programs of this probe loaded in the kernel
// (any process's: the kernel keeps the first 15 bytes of the name).
func ourPrograms(t testing.TB) []string {
	t.Helper()
	var names []string
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			break
		}
		id = next
		prog, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		if info, err := prog.Info(); err == nil && strings.HasPrefix(info.Name, "ioctl_") {
			names = append(names, fmt.Sprintf("%s (id %d)", info.Name, id))
		}
		prog.Close()
	}
	return names
}

// requireNothingLoaded fails if any program of this probe is still in the
// kernel. Freeing is asynchronous after the last fd closes, so it waits a
// little.
func requireNothingLoaded(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := ourPrograms(t)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("programs left loaded: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// row is what a test expects for one (device, command).
type row struct {
	Device string
	Cmd    string
	Calls  uint64
	Errnos map[string]uint64
}

// generator holds the files ioctls are issued on: a pty pair, a pipe and
// /dev/null, opened before the probe is attached so that opening them
// (which itself issues ioctls, TIOCSPTLCK and TIOCGPTN) is not counted.
type generator struct {
	master, slave int
	pipeR, pipeW  int
	null          int
	ptsPath       string
}

// badFD is far above any fd the test process has open: ioctl fails with
// EBADF, and the probe reports the fd as not open.
const badFD = 100000

func newGenerator(t testing.TB) *generator {
	t.Helper()
	g := &generator{}
	var err error
	if g.master, err = unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(g.master, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(g.master, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	g.ptsPath = fmt.Sprintf("/dev/pts/%d", n)
	if g.slave, err = unix.Open(g.ptsPath, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err != nil {
		t.Fatalf("open %s: %v", g.ptsPath, err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	g.pipeR, g.pipeW = p[0], p[1]
	if g.null, err = unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, fd := range []int{g.master, g.slave, g.pipeR, g.pipeW, g.null} {
			unix.Close(fd)
		}
	})
	return g
}

// run issues a known mix of ioctls, n per kind for the common ones, and
// returns what the probe must report.
func (g *generator) run(t testing.TB, n int) []row {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	fail := func(err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	for range n {
		_, err := unix.IoctlGetTermios(g.master, unix.TCGETS)
		must(err)
	}
	for range n / 2 {
		_, err := unix.IoctlGetWinsize(g.master, unix.TIOCGWINSZ)
		must(err)
	}
	for range n / 4 {
		_, err := unix.IoctlGetTermios(g.slave, unix.TCGETS)
		must(err)
	}
	ws := &unix.Winsize{Row: 24, Col: 80}
	for range 10 {
		must(unix.IoctlSetWinsize(g.slave, unix.TIOCSWINSZ, ws))
	}
	for range n / 2 {
		_, err := unix.IoctlGetInt(g.pipeR, unix.TIOCINQ) // FIONREAD
		must(err)
	}
	// Failures: a terminal ioctl on a pipe and on /dev/null (ENOTTY),
	// any ioctl on an fd that is not open (EBADF).
	for range 7 {
		_, err := unix.IoctlGetTermios(g.pipeR, unix.TCGETS)
		fail(err, unix.ENOTTY)
	}
	for range 3 {
		_, err := unix.IoctlGetWinsize(g.null, unix.TIOCGWINSZ)
		fail(err, unix.ENOTTY)
	}
	for range 5 {
		_, err := unix.IoctlGetTermios(badFD, unix.TCGETS)
		fail(err, unix.EBADF)
	}
	return []row{
		{"/dev/ptmx", "TCGETS", uint64(n), nil},
		{"/dev/ptmx", "TIOCGWINSZ", uint64(n / 2), nil},
		{g.ptsPath, "TCGETS", uint64(n / 4), nil},
		{g.ptsPath, "TIOCSWINSZ", 10, nil},
		{"pipe", "FIONREAD", uint64(n / 2), nil},
		{"pipe", "TCGETS", 7, map[string]uint64{"ENOTTY": 7}},
		{"/dev/null", "TIOCGWINSZ", 3, map[string]uint64{"ENOTTY": 3}},
		{"(fd not open)", "TCGETS", 5, map[string]uint64{"EBADF": 5}},
	}
}

// rows turns a result into rows, for comparison.
func rows(r *Result) []row {
	var out []row
	for _, s := range r.Commands {
		x := row{Device: s.Device.String(), Cmd: s.Command.String(), Calls: s.Calls}
		for _, e := range s.Errnos {
			if x.Errnos == nil {
				x.Errnos = map[string]uint64{}
			}
			x.Errnos[e.Name] = e.Count
		}
		out = append(out, x)
	}
	return out
}

func sortRows(r []row) []row {
	r = append([]row(nil), r...)
	sort.Slice(r, func(i, j int) bool {
		if r[i].Device != r[j].Device {
			return r[i].Device < r[j].Device
		}
		return r[i].Cmd < r[j].Cmd
	})
	return r
}

func total(rs []row) (calls, errs uint64) {
	for _, r := range rs {
		calls += r.Calls
		for _, n := range r.Errnos {
			errs += n
		}
	}
	return calls, errs
}

// measure attaches with cfg, runs fn, detaches and returns the result
// with the slow calls streamed.
func measure(t *testing.T, cfg Config, fn func()) (*Result, []SlowCall) {
	t.Helper()
	p, err := Attach(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		requireNothingLoaded(t)
	}()
	var slow []SlowCall
	done := make(chan error, 1)
	go func() { done <- p.ReadSlow(func(s SlowCall) { slow = append(slow, s) }) }()
	fn()
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return r, slow
}

// TestProbeCountsExactly is the acceptance test: a generator issues known
// ioctls on a pty, a pipe, /dev/null and a closed fd, and the probe must
// report exactly those per (device, command), with the right paths and
// errnos, for every hook family that works on this kernel.
func TestProbeCountsExactly(t *testing.T) {
	requireRoot(t)
	const n = 1000
	for _, h := range []Hook{HookTracepoint, HookTpBTF, HookRawTP} {
		t.Run(string(h), func(t *testing.T) {
			g := newGenerator(t)
			var want []row
			r, _ := measure(t, Config{Hook: h, PID: os.Getpid()}, func() { want = g.run(t, n) })
			if diff := cmp.Diff(sortRows(want), sortRows(rows(r))); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			calls, errs := total(want)
			if r.Counters.Calls != calls || r.Counters.Errors != errs {
				t.Errorf("counters: %d calls, %d errors; want %d, %d", r.Counters.Calls, r.Counters.Errors, calls, errs)
			}
			if lost := r.Losses.Total(); lost != 0 {
				t.Errorf("lost %d: %+v", lost, r.Losses)
			}
			for _, s := range r.Commands {
				if s.Hist.Count() != s.Calls || s.Latency.Samples != s.Calls {
					t.Errorf("%s %s: histogram has %d samples, %d calls", s.Device, s.Command, s.Hist.Count(), s.Calls)
				}
				if s.Latency.Max <= 0 || s.Latency.P50 > s.Latency.Max {
					t.Errorf("%s %s: implausible latency %+v", s.Device, s.Command, s.Latency)
				}
			}
			self, _ := os.ReadFile("/proc/self/comm")
			for _, s := range r.Processes {
				if s.PID != uint32(os.Getpid()) || s.Comm != strings.TrimSpace(string(self)) {
					t.Errorf("process row %d %q, want %d %q", s.PID, s.Comm, os.Getpid(), strings.TrimSpace(string(self)))
				}
			}
			if s, ok := r.Find("/dev/ptmx", unix.TCGETS); !ok || s.Device.Type != TypeChar || s.Device.Number() != "5:2" {
				t.Errorf("/dev/ptmx TCGETS: %+v", s.Device)
			}
			t.Logf("%s: %d calls; TCGETS on /dev/ptmx p50 %v p99 %v; cost %v", h, r.Counters.Calls,
				r.Commands[0].Latency.P50, r.Commands[0].Latency.P99, r.Cost)
		})
	}
}

// TestProbeAutoHook checks that with no hook forced Attach picks one and
// says why it skipped cheaper ones.
func TestProbeAutoHook(t *testing.T) {
	requireRoot(t)
	g := newGenerator(t)
	var want []row
	r, _ := measure(t, Config{PID: os.Getpid()}, func() { want = g.run(t, 100) })
	if diff := cmp.Diff(sortRows(want), sortRows(rows(r))); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if r.Hook != Hooks()[0] && len(r.Notes) == 0 {
		t.Errorf("hook %s chosen without a note on why not %s", r.Hook, Hooks()[0])
	}
	t.Logf("hook %s (%s); notes %q", r.Hook, r.HookDetail, r.Notes)
}

// TestProbeFilters checks the device and comm filters in the kernel.
func TestProbeFilters(t *testing.T) {
	requireRoot(t)
	g := newGenerator(t)

	t.Run("dev", func(t *testing.T) {
		r, _ := measure(t, Config{PID: os.Getpid(), Dev: g.ptsPath}, func() { g.run(t, 40) })
		want := []row{{g.ptsPath, "TCGETS", 10, nil}, {g.ptsPath, "TIOCSWINSZ", 10, nil}}
		if diff := cmp.Diff(sortRows(want), sortRows(rows(r))); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})
	t.Run("dev-number", func(t *testing.T) {
		r, _ := measure(t, Config{PID: os.Getpid(), Dev: "5:2"}, func() { g.run(t, 40) })
		want := []row{{"/dev/ptmx", "TCGETS", 40, nil}, {"/dev/ptmx", "TIOCGWINSZ", 20, nil}}
		if diff := cmp.Diff(sortRows(want), sortRows(rows(r))); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
		if r.Filter.Dev != "/dev/ptmx (5:2)" {
			t.Errorf("filter shown as %q", r.Filter.Dev)
		}
	})
	t.Run("comm", func(t *testing.T) {
		// One thread renamed: only its calls match its name, and all
		// threads match the process's name.
		const name = "ioctl-filter"
		renamed := func() {
			onOtherThread(func() {
				old, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/comm", unix.Gettid()))
				if err := setThreadName(name); err != nil {
					t.Error(err)
					return
				}
				for range 33 {
					unix.IoctlGetInt(g.pipeR, unix.TIOCINQ)
				}
				setThreadName(strings.TrimSpace(string(old)))
			})
			for range 5 {
				unix.IoctlGetInt(g.pipeR, unix.TIOCINQ)
			}
		}
		// A prefix of the thread's name matches only its calls.
		r, _ := measure(t, Config{Comm: name[:9]}, renamed)
		if diff := cmp.Diff([]row{{"pipe", "FIONREAD", 33, nil}}, rows(r)); diff != "" {
			t.Errorf("thread comm: rows (-want +got):\n%s", diff)
		}
		// A prefix of the process's name matches every thread.
		self, _ := os.ReadFile("/proc/self/comm")
		r, _ = measure(t, Config{Comm: strings.TrimSpace(string(self))[:len("ioctl.")]}, renamed)
		if diff := cmp.Diff([]row{{"pipe", "FIONREAD", 38, nil}}, rows(r)); diff != "" {
			t.Errorf("process comm: rows (-want +got):\n%s", diff)
		}
		r, _ = measure(t, Config{Comm: "ioctl-x"}, renamed)
		if got := rows(r); len(got) != 0 {
			t.Errorf("comm ioctl-x matched %+v", got)
		}
	})
}

// TestProbeSlowStream streams every call through a one-page ring buffer
// that nobody reads while the calls are made: most are dropped, and every
// call must be either streamed or counted as lost.
func TestProbeSlowStream(t *testing.T) {
	requireRoot(t)
	g := newGenerator(t)
	p, err := Attach(context.Background(), Config{PID: os.Getpid(), StreamSlow: true, Slow: 0, RingBufferBytes: os.Getpagesize()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Close()
		requireNothingLoaded(t)
	}()
	const n = 1000
	for range n {
		unix.IoctlGetTermios(g.master, unix.TCGETS)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	var got []SlowCall
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := p.ReadSlow(func(s SlowCall) { got = append(got, s) }); err != nil {
		t.Fatal(err)
	}
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.Calls != n || c.Slow+c.LostRingbuf != n || uint64(len(got)) != c.Slow {
		t.Errorf("%d calls, %d streamed, %d dropped, %d read; want %d calls, streamed+dropped = calls, read = streamed",
			c.Calls, c.Slow, c.LostRingbuf, len(got), n)
	}
	if c.LostRingbuf == 0 {
		t.Errorf("a one-page ring buffer took all %d calls", n)
	}
	if l := c.Losses(); l.Total() != c.LostRingbuf {
		t.Errorf("losses %+v, want only the ring buffer's %d", l, c.LostRingbuf)
	}
	for _, s := range got {
		if s.Device.Path != "/dev/ptmx" || s.Command.Name != "TCGETS" || s.PID != uint32(os.Getpid()) || s.Ret != 0 || s.Latency <= 0 {
			t.Fatalf("bad slow call %+v", s)
		}
	}
	t.Logf("%d calls: %d streamed through %d bytes, %d dropped", c.Calls, c.Slow, os.Getpagesize(), c.LostRingbuf)
}

// TestRun runs the probe as the CLI does, streaming every call (threshold
// 0), and checks that the stream, the counters and the report agree.
func TestRun(t *testing.T) {
	requireRoot(t)
	g := newGenerator(t)
	ctx, cancel := context.WithCancel(context.Background())
	var progress strings.Builder
	var streamed int
	var want []row
	attached := make(chan struct{})
	go func() {
		<-attached
		want = g.run(t, 50)
		time.Sleep(1200 * time.Millisecond) // for a progress line
		cancel()
	}()
	r, err := Run(ctx, Config{PID: os.Getpid(), StreamSlow: true}, RunOptions{
		Progress: &progress, ProgressInterval: time.Second,
		OnSlow:   func(SlowCall) { streamed++ },
		Attached: func(*Probe) { close(attached) },
	})
	if err != nil {
		t.Fatal(err)
	}
	requireNothingLoaded(t)
	calls, _ := total(want)
	if r.Counters.Calls != calls || uint64(streamed) != calls || r.Counters.Slow != calls {
		t.Errorf("%d calls, %d streamed (counter %d); want %d", r.Counters.Calls, streamed, r.Counters.Slow, calls)
	}
	if len(r.Slowest) != min(int(calls), MaxSlowKept) {
		t.Errorf("kept %d slowest, want %d", len(r.Slowest), min(int(calls), MaxSlowKept))
	}
	for i := 1; i < len(r.Slowest); i++ {
		if r.Slowest[i].Latency > r.Slowest[i-1].Latency {
			t.Fatalf("slowest not in order at %d", i)
		}
	}
	if !strings.Contains(progress.String(), "ioctl: 1s: ") {
		t.Errorf("progress: %q", progress.String())
	}
	var text strings.Builder
	if err := r.WriteText(&text, TextOptions{TopProcesses: 5, Histograms: 100}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"/dev/ptmx", "TIOCGWINSZ", g.ptsPath, "pipe", "ENOTTY", "EBADF", "lost events: none", "slow calls (>= 0ns)"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, text.String())
		}
	}
	t.Logf("report:\n%s", text.String())
}

// TestBadInput checks that wrong settings fail with one clear line before
// anything is loaded.
func TestBadInput(t *testing.T) {
	pidMax := 4194304
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		fmt.Sscan(string(b), &pidMax)
	}
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{PID: pidMax}, fmt.Sprintf("pid %d: no such process", pidMax)},
		{Config{PID: -3}, "pid -3: not a process id"},
		{Config{Dev: "/dev/does-not-exist"}, "unknown device /dev/does-not-exist: no such file or directory"},
		{Config{Dev: "4095:1048575"}, "unknown device 4095:1048575: no character or block device node under /dev has that number"},
		{Config{Dev: "nvidia0"}, "unknown device nvidia0: no such file or directory"},
		{Config{Dev: "1:x"}, `unknown device "1:x": give a device path (/dev/nvidia0) or MAJOR:MINOR (195:0)`},
		{Config{Dev: "/etc/hostname"}, "unknown device /etc/hostname: not a character or block device node"},
		{Config{Comm: "a-very-long-thread-name"}, `comm "a-very-long-thread-name" is 23 bytes; the kernel keeps only 15`},
		{Config{Hook: "kprobe"}, `unknown hook "kprobe"; use one of fentry, tracepoint, tp_btf, raw_tp`},
		{Config{StreamSlow: true, Slow: -time.Millisecond}, "slow threshold -1ms is negative"},
		{Config{RingBufferBytes: 5000}, "ring buffer size 5000: use a power of two of at least 4096"},
	}
	for _, c := range cases {
		_, err := Attach(context.Background(), c.cfg)
		if err == nil {
			t.Errorf("%+v: no error", c.cfg)
			continue
		}
		if !errors.Is(err, ErrBadConfig) || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v:\n got %q\nwant %q (one line, ErrBadConfig)", c.cfg, err, c.want)
		}
	}
	if _, err := Attach(context.Background(), Config{Dev: "/dev/nope"}); !errors.Is(err, ErrUnknownDevice) {
		t.Errorf("unknown device: %v does not wrap ErrUnknownDevice", err)
	}
	if os.Geteuid() == 0 {
		requireNothingLoaded(t)
	}
}

// TestMissingTracepoint names syscall tracepoints that do not exist: a
// forced tracepoint hook fails with one line naming it, the automatic
// choice falls back and says why, and nothing stays loaded either way.
func TestMissingTracepoint(t *testing.T) {
	requireRoot(t)
	saved := syscallTracepoints
	syscallTracepoints = [2]string{"sys_enter_nope", "sys_exit_nope"}
	defer func() { syscallTracepoints = saved }()

	_, err := Attach(context.Background(), Config{Hook: HookTracepoint, PID: os.Getpid()})
	const want = "hook tracepoint: tracepoint syscalls:sys_enter_nope not found in "
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("got %v, want one line starting %q", err, want)
	}
	requireNothingLoaded(t)

	g := newGenerator(t)
	var wantRows []row
	r, _ := measure(t, Config{PID: os.Getpid()}, func() { wantRows = g.run(t, 20) })
	if r.Hook == HookTracepoint || r.Hook == HookFentry && len(r.Notes) == 0 {
		t.Errorf("hook %s with notes %q", r.Hook, r.Notes)
	}
	if r.Hook != HookFentry && !strings.Contains(strings.Join(r.Notes, "\n"), "tracepoint not used: tracepoint syscalls:sys_enter_nope not found") {
		t.Errorf("notes do not say why the tracepoint was not used: %q", r.Notes)
	}
	if diff := cmp.Diff(sortRows(wantRows), sortRows(rows(r))); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// TestAttachFailureLeavesNothing makes the second attach of each family
// fail after the first has succeeded, and checks that nothing stays
// loaded or attached.
func TestAttachFailureLeavesNothing(t *testing.T) {
	requireRoot(t)
	defer func() { testAttachFault = nil }()
	for _, h := range []Hook{HookTracepoint, HookTpBTF, HookRawTP} {
		attached := 0
		testAttachFault = func(prog string) error {
			if attached++; attached == 2 {
				return errors.New("injected failure")
			}
			return nil
		}
		_, err := Attach(context.Background(), Config{Hook: h, PID: os.Getpid()})
		if err == nil || !strings.Contains(err.Error(), "injected failure") {
			t.Errorf("%s: got %v, want the injected failure", h, err)
		}
		if attached != 2 {
			t.Errorf("%s: %d attach attempts, want 2", h, attached)
		}
		requireNothingLoaded(t)
	}
}

// onOtherThread runs fn locked to a thread that is not the process's
// main thread (the thread-group leader, whose comm is the process's).
func onOtherThread(fn func()) {
	done := make(chan struct{})
	var start func()
	start = func() {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if unix.Gettid() == os.Getpid() {
				start() // holding the leader, the next one runs elsewhere
				<-done
				return
			}
			fn()
			close(done)
		}()
	}
	start()
	<-done
}

// setThreadName sets the calling thread's comm.
func setThreadName(name string) error {
	b, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(b)), 0, 0, 0)
}

// TestProbeTablesFull shrinks the tables to two entries each: the calls
// that do not fit must be counted as lost, table by table, so that what
// was counted plus what was lost is every call.
func TestProbeTablesFull(t *testing.T) {
	requireRoot(t)
	g := newGenerator(t)
	var want []row
	r, _ := measure(t, Config{Hook: HookTpBTF, PID: os.Getpid(), maxKeys: 2}, func() { want = g.run(t, 100) })
	calls, errs := total(want)
	var inStats, inHist, inErrno uint64
	for _, s := range r.Commands {
		inStats += s.Calls
		inHist += s.Hist.Count()
		for _, e := range s.Errnos {
			inErrno += e.Count
		}
	}
	c := r.Counters
	if c.Calls != calls || c.Errors != errs {
		t.Fatalf("counters: %d calls, %d errors; want %d, %d", c.Calls, c.Errors, calls, errs)
	}
	if inStats+c.LostStats != calls || c.LostStats == 0 {
		t.Errorf("call table: %d counted + %d lost, want %d with some lost", inStats, c.LostStats, calls)
	}
	if inHist+c.LostHist != calls || c.LostHist == 0 {
		t.Errorf("histogram table: %d counted + %d lost, want %d with some lost", inHist, c.LostHist, calls)
	}
	if inErrno+c.LostErrno != errs || c.LostErrno == 0 {
		t.Errorf("errno table: %d counted + %d lost, want %d with some lost", inErrno, c.LostErrno, errs)
	}
	if r.Losses.Total() != c.LostStats+c.LostHist+c.LostErrno {
		t.Errorf("losses %+v", r.Losses)
	}
	var text strings.Builder
	r.WriteText(&text, TextOptions{})
	if !strings.Contains(text.String(), "EVENTS LOST") {
		t.Errorf("the report does not say events were lost:\n%s", text.String())
	}
	t.Logf("lost: %d calls, %d histogram samples, %d errnos", c.LostStats, c.LostHist, c.LostErrno)
}
