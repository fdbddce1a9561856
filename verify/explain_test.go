package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/policy"
)

func TestExplanationFromRecord(t *testing.T) {
	comm := func(s string) (c [16]int8) {
		for i := range len(s) {
			c[i] = int8(s[i])
		}
		return c
	}
	var r bpf.RunqlatExplanation
	r.Flags = exDone | exMigrated | exExtKnown | exExtLeft | exBypass | exBypassOK
	r.FromCpu = 3
	r.Ns[1] = 2e6 // fair
	r.Ns[3] = 5e6 // rt_dl
	r.SoftirqNs = 1e6
	r.Top[0] = bpf.RunqlatBlamed{Ns: 1e6, Pid: 7, Kind: 1, ClassId: 1, Comm: comm("fairhog")}
	r.Top[2] = bpf.RunqlatBlamed{Ns: 5e6, Pid: 9, Kind: 3, ClassId: 0, Comm: comm("rthog")}
	e := explanationOf(&r, []string{"inference", "normal"})
	if e == nil {
		t.Fatal("no explanation from a record marked done")
	}
	want := Parts{{KindRTDL, 5 * time.Millisecond}, {KindFair, 2 * time.Millisecond}, {KindSoftirq, time.Millisecond}}
	if fmt.Sprint(e.Parts) != fmt.Sprint(want) {
		t.Errorf("parts %v, want %v (largest first, zero parts left out)", e.Parts, want)
	}
	if e.Cause != KindRTDL || !e.Migrated || e.FromCPU != 3 || !e.SchedExtExited || !e.SchedExtKnown {
		t.Errorf("cause %q migrated %v from %d exited %v known %v", e.Cause, e.Migrated, e.FromCPU, e.SchedExtExited, e.SchedExtKnown)
	}
	if !e.SchedExtBypassed || !e.BypassKnown {
		t.Errorf("bypassed %v known %v, want both", e.SchedExtBypassed, e.BypassKnown)
	}
	if len(e.Tasks) != 2 || e.Tasks[0].Comm != "rthog" || e.Tasks[0].Kind != KindRTDL || e.Tasks[0].Class != "inference" ||
		e.Tasks[1].Comm != "fairhog" || e.Tasks[1].Class != "normal" {
		t.Errorf("tasks %+v, want rthog (rt_dl, inference) then fairhog (fair, normal)", e.Tasks)
	}
	line := e.String()
	for _, w := range []string{"rt_dl 5.00ms", "rthog[9] rt_dl/inference 5.00ms", "migrated from cpu 3", "sched_ext exited", "bypassing"} {
		if !strings.Contains(line, w) {
			t.Errorf("line %q lacks %q", line, w)
		}
	}
	r.Flags = 0
	if explanationOf(&r, nil) != nil {
		t.Error("a record the tracer did not explain gave an explanation")
	}
}

// The summary adds parts and tasks over violations, per class, and counts
// the ones without an explanation without adding anything for them.
func TestCauseSummariesAddUp(t *testing.T) {
	var c CauseSummaries
	rt := &Explanation{Parts: Parts{{KindRTDL, 4 * time.Millisecond}, {KindIRQ, time.Millisecond}}, Cause: KindRTDL,
		Tasks: []BlamedTask{{PID: 1, Comm: "hog", Kind: KindRTDL, Time: 4 * time.Millisecond}}}
	fair := &Explanation{Parts: Parts{{KindFair, 3 * time.Millisecond}}, Cause: KindFair, Migrated: true,
		Tasks: []BlamedTask{{PID: 2, Comm: "hog", Kind: KindRTDL, Time: time.Millisecond}, {PID: 3, Comm: "x", Kind: KindFair, Time: 2 * time.Millisecond}}}
	c.Add(Violation{Class: "inference", Latency: 5 * time.Millisecond, Why: rt})
	c.Add(Violation{Class: "inference", Latency: 3 * time.Millisecond, Why: fair})
	c.Add(Violation{Class: "inference", Latency: 9 * time.Millisecond})
	c.Add(Violation{Class: "normal", Latency: 9 * time.Millisecond, Why: fair})
	sums := c.Summaries()
	if len(sums) != 2 || sums[0].Class != "inference" || sums[1].Class != "normal" {
		t.Fatalf("summaries %+v, want inference and normal", sums)
	}
	s := sums[0]
	if s.Violations != 3 || s.Explained != 2 || s.Wait != 8*time.Millisecond || s.Migrated != 1 {
		t.Errorf("violations %d explained %d wait %v migrated %d, want 3, 2, 8ms, 1", s.Violations, s.Explained, s.Wait, s.Migrated)
	}
	wantParts := Parts{{KindRTDL, 4 * time.Millisecond}, {KindFair, 3 * time.Millisecond}, {KindIRQ, time.Millisecond}}
	if fmt.Sprint(s.Parts) != fmt.Sprint(wantParts) {
		t.Errorf("parts %v, want %v", s.Parts, wantParts)
	}
	if s.ByCause[KindRTDL] != 1 || s.ByCause[KindFair] != 1 {
		t.Errorf("by cause %v", s.ByCause)
	}
	if len(s.Tasks) != 2 || s.Tasks[0].Comm != "hog" || s.Tasks[0].Time != 5*time.Millisecond {
		t.Errorf("tasks %+v, want hog (5ms over two pids) first", s.Tasks)
	}
	var b bytes.Buffer
	writeCauses(&b, sums)
	if !strings.Contains(b.String(), "inference: 3 violations") || !strings.Contains(b.String(), "rt_dl 50%") {
		t.Errorf("text:\n%s", b.String())
	}

	// A timer that woke its task late: the window reaches back to its
	// expiry, and the shares are of the window, not of the wait (which
	// would put them over 100 %).
	var late CauseSummaries
	late.Add(Violation{Class: "inference", Latency: time.Millisecond, Caused: true, Felt: 4 * time.Millisecond,
		Why: &Explanation{Window: 4 * time.Millisecond, Parts: Parts{{KindSchedExt, 3 * time.Millisecond}, {KindIRQ, time.Millisecond}}, Cause: KindSchedExt}})
	ls := late.Summaries()[0]
	if ls.Wait != time.Millisecond || ls.Window != 4*time.Millisecond {
		t.Errorf("wait %v window %v, want 1ms and 4ms", ls.Wait, ls.Window)
	}
	b.Reset()
	writeCauses(&b, late.Summaries())
	if !strings.Contains(b.String(), "1.00ms waited in all, 4.00ms from their timers' expiry: sched_ext 75% irq 25%") {
		t.Errorf("text:\n%s", b.String())
	}
}

// A task whose first blamed run began before the trace (no class) is
// named by the class its later runs have.
func TestCauseSummariesNameTheClassOnceKnown(t *testing.T) {
	var c CauseSummaries
	for _, class := range []string{"", "normal", ""} {
		c.Add(Violation{Class: "inference", Latency: 2 * time.Millisecond, Why: &Explanation{
			Parts: Parts{{KindSchedExt, 2 * time.Millisecond}}, Cause: KindSchedExt,
			Tasks: []BlamedTask{{PID: 7, Comm: "hog", Kind: KindSchedExt, Class: class, Time: 2 * time.Millisecond}}}})
	}
	tasks := c.Summaries()[0].Tasks
	if len(tasks) != 1 || tasks[0].Class != "normal" || tasks[0].Time != 6*time.Millisecond {
		t.Errorf("tasks %+v, want hog of class normal, 6ms", tasks)
	}
}

// An explained violation prints its explanation in place of the bare
// "while X ran".
func TestViolationPrinterPrintsTheExplanation(t *testing.T) {
	var b strings.Builder
	p := &ViolationPrinter{W: &b, PerSecond: 10}
	p.Print(Violation{Class: "inference", Comm: "w", PID: 4, Latency: 6 * time.Millisecond, CPU: 1, PrevComm: "hog",
		Why: &Explanation{Parts: Parts{{KindSoftirq, 6 * time.Millisecond}}, Cause: KindSoftirq}})
	if got := b.String(); !strings.HasPrefix(got, "violation: inference w pid 4 waited 6.00ms on cpu 1: softirq 6.00ms") {
		t.Errorf("line %q", got)
	}
}

// explainedRun runs verify for d with a bound on the inference class
// (comm prefix "infer") of this process, explaining violations, and
// returns what its JSON says.
func explainedRun(t *testing.T, bound string, d time.Duration) explainedJSON {
	t.Helper()
	table, err := policy.Default("infer").Compile("")
	if err != nil {
		t.Fatal(err)
	}
	bounds, err := ParseBounds(bound, "inference")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Options{
		Tracer:   TracerConfig{Table: table, FilterTGID: uint32(os.Getpid()), Explain: true},
		Bounds:   bounds,
		Duration: d,
	})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var out explainedJSON
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	writeCauses(&text, out.Causes)
	t.Logf("%d violations:\n%s", out.Streamed, text.String())
	for i, v := range out.Worst {
		if i < 3 {
			t.Logf("violation: %s waited %v: %v", v.Comm, v.Latency, v.Why)
		}
		// The parts split the window; the irq share of the oldest run is
		// rounded down, never up.
		if v.Why == nil {
			continue
		}
		var sum time.Duration
		for _, p := range v.Why.Parts {
			sum += p.Time
		}
		if v.Why.Window < v.Latency || sum > v.Why.Window {
			t.Errorf("violation of %s: parts add up to %v over a window of %v (wait %v)", v.Comm, sum, v.Why.Window, v.Latency)
		}
	}
	for _, s := range out.Causes {
		var sum time.Duration
		for _, p := range s.Parts {
			sum += p.Time
		}
		if s.Explained > 0 && (s.Window < s.Wait || sum > s.Window) {
			t.Errorf("class %s: parts add up to %v over explained windows of %v (waits %v)", s.Class, sum, s.Window, s.Wait)
		}
	}
	return out
}

type explainedJSON struct {
	Streamed uint64         `json:"violations_streamed"`
	Causes   []CauseSummary `json:"causes"`
	Worst    []Violation    `json:"violations"`
}

// inference is the summary of the inference class, which must have
// explained violations.
func (j explainedJSON) inference(t *testing.T) CauseSummary {
	t.Helper()
	for _, s := range j.Causes {
		if s.Class == "inference" && s.Explained > 0 {
			return s
		}
	}
	t.Fatalf("no explained violation of the inference class (%d streamed)", j.Streamed)
	return CauseSummary{}
}

// share is the part of the explained windows that was of this kind.
func (s CauseSummary) share(kind string) float64 {
	return float64(s.Parts.Of(kind)) / float64(max(s.Window, s.Wait))
}

// the longest-running named task of the summary.
func (s CauseSummary) topTask(t *testing.T) BlamedTask {
	t.Helper()
	if len(s.Tasks) == 0 {
		t.Fatal("no task named in the violations")
	}
	return s.Tasks[0]
}

// spinThenSleep busies the CPU for on, then sleeps for off, until ctx ends.
func spinThenSleep(ctx context.Context, on, off time.Duration) {
	for ctx.Err() == nil {
		end := time.Now().Add(on)
		for time.Now().Before(end) {
		}
		time.Sleep(off)
	}
}

func sleepLoop(ctx context.Context, d time.Duration) {
	for ctx.Err() == nil {
		time.Sleep(d)
	}
}

// rtHogAndSleeper runs, until the test ends, a SCHED_FIFO (priority 10)
// hog "hl-rthog" bursting 20 ms every 50 ms on the last CPU, and beside it
// "infer-victim" sleeping 1 ms at a time at SCHED_FIFO sleeperPrio (0:
// SCHED_OTHER); it returns their thread ids.
func rtHogAndSleeper(t *testing.T, sleeperPrio int) (hog, sleeper int) {
	t.Helper()
	cpu := runtime.NumCPU() - 1
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(2)
	hog, _ = onThread(t, "hl-rthog", cpu, 10, func() { defer wg.Done(); spinThenSleep(ctx, 20*time.Millisecond, 30*time.Millisecond) })
	sleeper, _ = onThread(t, "infer-victim", cpu, sleeperPrio, func() { defer wg.Done(); sleepLoop(ctx, time.Millisecond) })
	return hog, sleeper
}

// A SCHED_FIFO hog bursting on the sleeper's CPU: the violations are its.
func TestExplainBlamesAnRTHog(t *testing.T) {
	requireRoot(t)
	rtHogAndSleeper(t, 0)

	s := explainedRun(t, "inference:max<=5ms", 1500*time.Millisecond).inference(t)
	if sh := s.share(KindRTDL); sh < 0.8 {
		t.Errorf("rt_dl is %.0f%% of the violations' wait, want most of it", 100*sh)
	}
	if top := s.topTask(t); top.Comm != "hl-rthog" || top.Kind != KindRTDL {
		t.Errorf("longest-running task %s (%s), want hl-rthog (rt_dl)", top.Comm, top.Kind)
	}
}

// A SCHED_FIFO hog that has had its CPU since before the tracer attached,
// and a lower-priority SCHED_FIFO sleeper woken on that CPU once it had:
// the wait is the hog's, not "uncovered", though the CPU's first switch
// the tracer sees is the one that ends it. (A CI run's first violation
// was once 8 ms of nothing but uncovered time.)
func TestExplainCoversARunFromBeforeTheAttach(t *testing.T) {
	requireRoot(t)
	// A collection would park the spinning goroutine's thread: a switch.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	cpu := runtime.NumCPU() - 1
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	var released atomic.Bool
	var wg sync.WaitGroup
	defer func() { released.Store(true); unix.Close(pipe[1]); wg.Wait() }()
	wg.Add(2)
	victim, _ := onThread(t, "infer-victim", cpu, 5, func() {
		defer wg.Done()
		var b [1]byte
		for {
			if n, err := unix.Read(pipe[0], b[:]); n <= 0 || err != nil {
				return
			}
		}
	})
	hog, _ := onThread(t, "hl-rthog", cpu, 10, func() {
		defer wg.Done()
		for !released.Load() {
		}
	})

	table, bounds := inferenceMax5ms(t)
	res, err := Run(context.Background(), Options{
		Tracer:          TracerConfig{Table: table, FilterTGID: uint32(os.Getpid()), Explain: true},
		Bounds:          bounds,
		Duration:        10 * time.Second,
		StopOnViolation: true,
		Live: func(*Tracer) func() {
			// Woken from this CPU once the tracer is attached, it waits
			// behind the hog until the hog lets go.
			if _, err := unix.Write(pipe[1], []byte{1}); err != nil {
				t.Error(err)
			}
			time.AfterFunc(50*time.Millisecond, func() { released.Store(true) })
			return func() {}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	v := res.StoppedBy
	if v == nil || int(v.PID) != victim || v.Why == nil {
		t.Fatalf("stopped by %+v, want an explained violation of the sleeper %d", v, victim)
	}
	t.Logf("%s[%d] waited %v: %v", v.Comm, v.PID, v.Latency, v.Why)
	if un := v.Why.Parts.Of(KindUncovered); un > v.Latency/4 {
		t.Errorf("%v of the %v wait uncovered, want the hog's run to cover it", un, v.Latency)
	}
	if len(v.Why.Tasks) == 0 || int(v.Why.Tasks[0].PID) != hog || v.Why.Tasks[0].Kind != KindRTDL || v.Why.Tasks[0].Comm != "hl-rthog" {
		t.Errorf("tasks %+v, want the hog %d (rt_dl) first", v.Why.Tasks, hog)
	}
}

// A fair hog at nice -20 beside a nice 19 sleeper under the fair class:
// the violations name the hog.
func TestExplainNamesAFairHog(t *testing.T) {
	requireRoot(t)
	if s, err := os.ReadFile("/sys/kernel/sched_ext/state"); err == nil && strings.TrimSpace(string(s)) != "disabled" {
		t.Skip("a sched_ext scheduler is loaded; this test is about the fair class")
	}
	cpu := runtime.NumCPU() - 1
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Add(2)
	onThread(t, "hl-fairhog", cpu, 0, func() {
		defer wg.Done()
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, -20); err != nil {
			t.Error(err)
		}
		spinThenSleep(ctx, time.Second, 0)
	})
	onThread(t, "infer-victim", cpu, 0, func() {
		defer wg.Done()
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, 19); err != nil {
			t.Error(err)
		}
		sleepLoop(ctx, time.Millisecond)
	})

	s := explainedRun(t, "inference:max<=1ms", 1500*time.Millisecond).inference(t)
	top := s.topTask(t)
	if top.Comm != "hl-fairhog" || (top.Kind != KindFair && top.Kind != KindTask) {
		t.Errorf("longest-running task %s (%s), want hl-fairhog (fair)", top.Comm, top.Kind)
	}
	if sh := s.share(KindFair) + s.share(KindTask); sh < 0.5 {
		t.Errorf("fair tasks are %.0f%% of the violations' wait, want most of it", 100*sh)
	}
}

// A softirq storm: UDP packets into a veth whose receive side RPS steers
// to the sleeper's CPU, sent from another CPU. The sleeper's CPU does
// little but softirqs (in ksoftirqd, which competes with the sleeper as
// a fair task, and on interrupt exit), and the violations say so. This
// host is shared: its other fair tasks (a tokio worker; this test's own
// Go threads) may also run on that CPU, and a cold run once had 69% of
// the wait behind them. So the shares are of the wait not spent running
// a named task other than ksoftirqd, and the violations counted are
// those not mostly spent behind fair tasks. Putting the sleeper at
// SCHED_FIFO instead leaves no violation: it then preempts ksoftirqd.
func TestExplainBlamesSoftirqs(t *testing.T) {
	requireRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs a second CPU to send from")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("needs ip from iproute2 (make deps installs it)")
	}
	cpu := runtime.NumCPU() - 1
	peer := vethWithRPS(t, cpu)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	conn, err := net.Dial("udp", net.JoinHostPort(peer, "9"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wg.Add(2)
	onThread(t, "hl-flood", 0, 0, func() {
		defer wg.Done()
		b := make([]byte, 64)
		for ctx.Err() == nil {
			for range 1000 {
				conn.Write(b)
			}
		}
	})
	onThread(t, "infer-victim", cpu, 0, func() { defer wg.Done(); sleepLoop(ctx, time.Millisecond) })

	s := explainedRun(t, "inference:max<=300us", 1500*time.Millisecond).inference(t)
	var others time.Duration
	for _, task := range s.Tasks {
		if !strings.HasPrefix(task.Comm, "ksoftirqd/") {
			others += task.Time
		}
	}
	window := max(s.Window, s.Wait) - others
	if window <= 0 {
		t.Fatalf("the violations' wait was all spent running other tasks (%v of %v): nothing to attribute", others, max(s.Window, s.Wait))
	}
	if sh := float64(s.Parts.Of(KindSoftirq)+s.Parts.Of(KindIRQ)) / float64(window); sh < 0.5 {
		t.Errorf("interrupts are %.0f%% of the violations' wait not spent running other tasks (%v of it), want most of it", 100*sh, window)
	}
	if rest := s.Explained - s.ByCause[KindFair]; s.ByCause[KindSoftirq] == 0 || s.ByCause[KindSoftirq] < rest/2 {
		t.Errorf("softirq is the largest part of %d of the %d violations not mostly spent behind fair tasks, want most", s.ByCause[KindSoftirq], rest)
	}
}

// vethWithRPS makes a veth pair into a new network namespace, steers the
// namespace side's receive processing to cpu, and returns that side's
// address. Everything is removed when the test ends.
func vethWithRPS(t *testing.T, cpu int) string {
	t.Helper()
	ns := fmt.Sprintf("hlx%d", os.Getpid())
	host, inner := ns+"a", ns+"b"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "add", host, "type", "veth", "peer", "name", inner, "netns", ns)
	t.Cleanup(func() { exec.Command("ip", "link", "del", host).Run() })
	run("addr", "add", "10.213.7.1/24", "dev", host)
	run("link", "set", host, "up")
	run("-n", ns, "addr", "add", "10.213.7.2/24", "dev", inner)
	run("-n", ns, "link", "set", inner, "up")
	mask := fmt.Sprintf("%x", 1<<cpu)
	// sysfs shows the namespace's devices only to a process inside it.
	out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c",
		`echo "$1" > "/sys/class/net/$2/queues/rx-0/rps_cpus"`, "sh", mask, inner).CombinedOutput()
	if err != nil {
		t.Fatalf("steer %s's receive to cpu %d: %v: %s", inner, cpu, err, out)
	}
	return "10.213.7.2"
}
