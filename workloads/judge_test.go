package workloads

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/verify"
)

func openTestdata(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// perf 6.1's output (bookworm's linux-perf), captured on the host.
func TestParsePerfBench(t *testing.T) {
	m, err := ParsePerfBench(openTestdata(t, "perf-messaging.txt"))
	if err != nil || m.Total != 48*time.Millisecond || m.Ops != 0 || m.Time() != 48*time.Millisecond {
		t.Errorf("messaging: %+v, %v; want a total of 0.048 s", m, err)
	}
	p, err := ParsePerfBench(openTestdata(t, "perf-pipe.txt"))
	if err != nil || p.Ops != 5000 || p.Total != 35*time.Millisecond || p.UsecsPerOp != 7.1426 {
		t.Errorf("pipe: %+v, %v; want 5000 ops at 7.1426 us in 0.035 s", p, err)
	}
	// Time per op has more digits than the total.
	if got := p.Time(); got != 35713*time.Microsecond {
		t.Errorf("pipe seconds %v, want 5000 x 7.1426 us", got)
	}
	if _, err := ParsePerfBench(strings.NewReader("# Running 'sched/pipe' benchmark:\n")); err == nil || !strings.Contains(err.Error(), "Total time") {
		t.Errorf("output without a total: %v", err)
	}
	if _, err := ParsePerfBench(strings.NewReader("     Total time: x [sec]\n")); err == nil {
		t.Error("a total that is not a number parsed")
	}
	for _, tc := range []struct {
		p    PerfBench
		want string
	}{
		{PerfBench{Bench: PerfMessaging, Groups: 2, Loops: 20}, "bench sched messaging --group 2 --nr_loops 20"},
		{PerfBench{Bench: PerfMessaging, Groups: 1, Loops: 5, Threads: true}, "bench sched messaging --group 1 --nr_loops 5 --thread"},
		{PerfBench{Bench: PerfPipe, Loops: 5000}, "bench sched pipe --loop 5000"},
		{PerfBench{Bench: PerfPipe, Loops: 10, Threads: true}, "bench sched pipe --loop 10 --threaded"},
	} {
		if got := strings.Join(tc.p.Args(), " "); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.p, got, tc.want)
		}
	}
}

// sysbench 1.0.20's output (bookworm), captured on the host with
// --histogram=on.
func TestParseSysbench(t *testing.T) {
	for file, want := range map[string]struct {
		events uint64
		total  time.Duration
		max    float64 // ms, the histogram's last value
	}{
		"sysbench-threads.txt": {613, 1007100 * time.Microsecond, 0},
		"sysbench-cpu.txt":     {739, 1011500 * time.Microsecond, 97.555},
	} {
		r, err := ParseSysbench(openTestdata(t, file))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if r.Events != want.events || r.TotalTime != want.total || r.Latency.Count() != want.events {
			t.Errorf("%s: %d events in %s, histogram of %d; want %d in %s", file, r.Events, r.TotalTime, r.Latency.Count(), want.events, want.total)
		}
		if want.max > 0 && r.Latency.Max() != uint64(want.max*1e6) {
			t.Errorf("%s: histogram max %d ns, want %g ms", file, r.Latency.Max(), want.max)
		}
	}
	plain := "General statistics:\n    total time:                          1.0011s\n    total number of events:              1231\n"
	if _, err := ParseSysbench(strings.NewReader(plain)); err == nil || !strings.Contains(err.Error(), "--histogram=on") {
		t.Errorf("a report without its histogram: %v", err)
	}
	if _, err := ParseSysbench(strings.NewReader("Threads started!\n")); err == nil || !strings.Contains(err.Error(), "total time") {
		t.Errorf("a report cut short: %v", err)
	}
	got := strings.Join(Sysbench{Test: SysbenchThreads, Threads: 4, RunTime: 2 * time.Second}.Args(), " ")
	if got != "threads --threads=4 --time=2 --thread-yields=100 --histogram=on run" {
		t.Errorf("args %q", got)
	}
	if err := (Sysbench{Test: SysbenchCPU, Threads: 1, RunTime: 1500 * time.Millisecond}).validate(); err == nil {
		t.Error("a run time of 1.5 s validated: sysbench takes whole seconds")
	}
}

// rt-app 1.0's logs (bookworm), captured on the host from task sets as
// TaskSet writes them: light-* on an idle machine, overloaded-* with
// three tasks of 4 ms every 10 ms and a chain of three 2 ms links every
// 20 ms on 2 CPUs, where nearly every period overran.
func TestParseRtAppLog(t *testing.T) {
	for _, tc := range []struct {
		file           string
		periods, overs int
	}{
		{"rt-app/light-periodic.log", 193, 4},
		{"rt-app/light-chain-head.log", 99, 3},
		{"rt-app/overloaded-periodic.log", 87, 86},
		{"rt-app/overloaded-chain-head.log", 68, 67},
	} {
		ps, err := ParseRtAppLog(openTestdata(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		overs := 0
		for _, p := range ps {
			if p.Slack < 0 {
				overs++
				if p.WakeUp != 0 || p.Response() != p.Period {
					t.Errorf("%s: an overrun period %+v has a wake-up, or a response other than its length", tc.file, p)
				}
			}
		}
		if len(ps) != tc.periods || overs != tc.overs {
			t.Errorf("%s: %d periods, %d overrun; want %d and %d", tc.file, len(ps), overs, tc.periods, tc.overs)
		}
	}
	// The head's first period in the light log: 22667 us long, 1853 us of
	// slack, woken 3313 us late: the chain took 17501 us.
	ps, _ := ParseRtAppLog(openTestdata(t, "rt-app/light-chain-head.log"))
	if len(ps) == 0 || ps[0].Response() != 17501*time.Microsecond || ps[0].ConfiguredPeriod != 20*time.Millisecond {
		t.Errorf("first chain period %+v, want a response of 17501 us", ps)
	}
	for text, want := range map[string]string{
		"   0 1 2 3\n":                          "before the #idx header",
		"#idx perf run\n   0 1 2\n":             "no period column",
		"# Policy : SCHED_OTHER priority : 0\n": "no #idx header",
		"#idx perf run period slack c_period wu_lat\n 0 1 1 10 x 10 1\n": `slack "x" is not a number`,
	} {
		if _, err := ParseRtAppLog(strings.NewReader(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
	// A judgement from the logs: the overruns are missed, and have no
	// wake-up sample but a chain response (the longest), and the last
	// period, cut short by the stop before its timer, is left out.
	for _, tc := range []struct {
		file                  string
		chain                 bool
		work, missed, samples int
	}{
		{"rt-app/light-periodic.log", false, 192, 4, 188},
		{"rt-app/overloaded-periodic.log", false, 86, 86, 0},
		{"rt-app/overloaded-chain-head.log", true, 67, 67, 67},
		{"rt-app/light-chain-head.log", true, 99, 3, 99},
	} {
		j := Judgement{Latency: &verify.Histogram{}}
		if err := addRtAppLog(&j, "testdata/"+tc.file, tc.chain); err != nil {
			t.Fatal(err)
		}
		if int(j.Work) != tc.work || j.Missed != tc.missed || int(j.Latency.Count()) != tc.samples {
			t.Errorf("%s: %g periods, %d missed, %d samples; want %d, %d, %d", tc.file, j.Work, j.Missed, j.Latency.Count(), tc.work, tc.missed, tc.samples)
		}
		if tc.samples > 0 && j.Latency.Min() == 0 {
			t.Errorf("%s: a sample of 0", tc.file)
		}
	}
	// Calibrate's run on the host: ten periods of 100000 loops, the
	// fastest in 2389 us: 23.89 ns a loop.
	ps, _ = ParseRtAppLog(openTestdata(t, "rt-app/calibrate.log"))
	if ns, err := NsPerLoop(ps); err != nil || ns != 24 || len(ps) != 10 || ps[0].Loops != 100000 || ps[0].Run != 2525*time.Microsecond {
		t.Errorf("ns per loop %d, %v (periods %+v); want 24", ns, err, ps)
	}
	if _, err := NsPerLoop([]RtAppPeriod{{Period: time.Millisecond}}); err == nil {
		t.Error("a calibration from no loops")
	}
}

// The task set rt-app runs: the periodic tasks and the chain, each link
// handing over through a barrier that only it and the next share, the
// last back to the first.
func TestRtAppTaskSet(t *testing.T) {
	r := RtApp{Periodic: 2, Period: 10 * time.Millisecond, Compute: time.Millisecond,
		Chain: 3, ChainPeriod: 20 * time.Millisecond, ChainCompute: 500 * time.Microsecond, Calibration: 19}
	b, err := r.TaskSet("/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"calibration": 19`, `"logdir": "/tmp/x"`,
		`"rta-periodic": {"instance": 2, "loop": -1, "run0": 1000, "timer0": {"ref": "unique", "period": 10000, "mode": "absolute"}}`,
		`"rta-chain0": {"loop": -1, "run0": 500, "barrier0": "rta-hop1", "barrier1": "rta-back", "timer0": {"ref": "unique", "period": 20000`,
		`"rta-chain1": {"loop": -1, "barrier0": "rta-hop1", "run0": 500, "barrier1": "rta-hop2"}`,
		`"rta-chain2": {"loop": -1, "barrier0": "rta-hop2", "run0": 500, "barrier1": "rta-back"}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("task set lacks %s:\n%s", want, b)
		}
	}
	for _, bad := range []RtApp{
		{},
		{Chain: 1, ChainPeriod: time.Second, ChainCompute: time.Millisecond},
		{Chain: 3, ChainPeriod: 10 * time.Millisecond, ChainCompute: 4 * time.Millisecond},
		{Periodic: 1, Period: 10 * time.Millisecond, Compute: 10 * time.Millisecond},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

func TestJudgementFigures(t *testing.T) {
	lat := &verify.Histogram{}
	lat.RecordN(uint64(time.Millisecond), 99)
	lat.Record(uint64(50 * time.Millisecond))
	for _, tc := range []struct {
		j    Judgement
		want Figure
	}{
		{Judgement{Judge: "perf-messaging", Headline: HeadlineTime, Runs: 4, Time: 2 * time.Second}, Figure{Name: "perf-messaging time/run", Unit: "ns", Value: 5e8}},
		{Judgement{Judge: "perf-pipe", Headline: HeadlineRate, Unit: "ops", Work: 1000, Time: 4 * time.Second}, Figure{Name: "perf-pipe", Unit: "ops/s", Value: 250, HigherIsBetter: true}},
		{Judgement{Judge: "rt-app-periodic", Headline: HeadlineLatency, Latency: lat, LatencyOf: "wake-up"}, Figure{Name: "rt-app-periodic wake-up p99", Unit: "ns", Value: float64(lat.QuantileUpper(0.99))}},
	} {
		if got, ok := tc.j.Figure(); !ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.j.Judge, got, ok, tc.want)
		}
	}
	for _, empty := range []Judgement{{Headline: HeadlineTime}, {Headline: HeadlineRate, Time: time.Second}, {Headline: HeadlineLatency}} {
		if f, ok := empty.Figure(); ok {
			t.Errorf("a judgement with nothing finished has figure %+v", f)
		}
	}
	var merged Judgement
	for range 2 {
		merged.Merge(&Judgement{Judge: "x", Headline: HeadlineRate, Unit: "ops", Runs: 1, Work: 10, Time: time.Second, Missed: 1, Latency: lat})
	}
	if merged.Judge != "x" || merged.Runs != 2 || merged.Work != 20 || merged.Missed != 2 || merged.Latency.Count() != 200 {
		t.Errorf("merged %+v", merged)
	}
}

// Runs the host's perf, sysbench, rt-app and stress-ng as judges, each
// kind on its own for two seconds: each finishes runs (or periods) and
// says so in its own figure. rt-app is calibrated first.
func TestJudgesOnHost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs perf, sysbench, rt-app and stress-ng")
	}
	for _, p := range []string{"perf", "sysbench", "rt-app", "stress-ng"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (scripts/deps.sh installs it)", p)
		}
	}
	rtapp := &RtApp{Periodic: 1, Period: 10 * time.Millisecond, Compute: time.Millisecond, Chain: 2, ChainPeriod: 20 * time.Millisecond, ChainCompute: time.Millisecond}
	calibrate, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rtapp.Calibrate(calibrate); err != nil || rtapp.Calibration <= 0 {
		t.Fatalf("rt-app's calibration: %d ns per loop, %v", rtapp.Calibration, err)
	}
	t.Logf("rt-app: %d ns per loop", rtapp.Calibration)
	for _, tc := range []struct {
		mix  Mix
		want []string
	}{
		{Mix{PerfBench: []PerfBench{{Bench: PerfMessaging, Groups: 1, Loops: 5}, {Bench: PerfPipe, Loops: 1000}}}, []string{"perf-messaging", "perf-pipe"}},
		{Mix{Sysbench: []Sysbench{{Test: SysbenchThreads, Threads: 2, RunTime: time.Second}, {Test: SysbenchCPU, Threads: 1, RunTime: time.Second}}}, []string{"sysbench-threads", "sysbench-cpu"}},
		{Mix{RtApp: []RtApp{*rtapp}}, []string{"rt-app-periodic", "rt-app-chain"}},
		{Mix{StressNg: []StressNg{{Switch: 1, Futex: 1, Pipe: 1}}}, []string{"stress-ng-switch", "stress-ng-futex", "stress-ng-pipe"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, err := tc.mix.Run(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Judgements) != len(tc.want) || tc.mix.Judges() != len(tc.want) {
			t.Fatalf("%d judgements (Judges says %d), want %v", len(res.Judgements), tc.mix.Judges(), tc.want)
		}
		for i, j := range res.Judgements {
			f, ok := j.Figure()
			t.Logf("%s: %d runs, %s %g %s", j.Judge, j.Runs, f.Name, f.Value, f.Unit)
			if j.Judge != tc.want[i] || j.Runs == 0 || !ok || f.Value <= 0 {
				t.Errorf("judgement %d: %s with %d runs and figure %+v (%v), want %s with a figure", i, j.Judge, j.Runs, f, ok, tc.want[i])
			}
		}
		for i, ops := range res.StressOps {
			if ops != 0 {
				t.Errorf("stress-ng %d without CPU workers has CPU ops %d", i, ops)
			}
		}
	}
}

// A judge that fails is an error, not a figure missing nobody notices.
func TestJudgeThatFailsIsAnError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := PerfBench{Path: "/bin/false", Bench: PerfPipe, Loops: 10}.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "perf bench sched pipe failed during the run") {
		t.Errorf("perf as /bin/false: %v", err)
	}
	_, err = Sysbench{Path: "/bin/true", Test: SysbenchCPU, Threads: 1, RunTime: time.Second}.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "no \"total time\"") {
		t.Errorf("sysbench as /bin/true: %v", err)
	}
}

// fakeRtApp writes a program that stands in for rt-app running one
// periodic task and a chain of two: it says it started each task, writes
// the periodic task's log and the chain head's (whole, or empty as rt-app
// leaves the log of a task that never left its loop), then ignores SIGINT
// and runs the shell command then.
func fakeRtApp(t *testing.T, whole bool, then string) string {
	t.Helper()
	chainLog := "cp " + testdataPath(t, "rt-app/light-chain-head.log") + ` "$d/rt-app-rta-chain0-2.log"`
	if !whole {
		chainLog = `: > "$d/rt-app-rta-chain0-2.log"`
	}
	script := `#!/bin/sh
d=$(dirname "$1")
trap '' INT
cp ` + testdataPath(t, "rt-app/light-periodic.log") + ` "$d/rt-app-rta-periodic-0.log"
` + chainLog + `
for i in 0 1 2; do echo "[$i] starting thread"; done
` + then + "\n"
	path := filepath.Join(t.TempDir(), "rt-app")
	if err := safefile.WriteFile(path, []byte(script), safefile.Executable); err != nil {
		t.Fatal(err)
	}
	return path
}

func testdataPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rt-app that will not exit after SIGINT: asleep, it lost a wake-up of
// its own and its whole logs count, with a note; a judge whose log it
// never wrote has no figure this round, with a note saying so; a thread
// still runnable (starved) fails the judge and says why.
func TestRtAppThatHangsAtExit(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out rt-app's 10 s grace three times")
	}
	const hang = "rt-app did not exit within 10s of SIGINT; killed; its threads then: sleep S"
	for _, tc := range []struct {
		name  string
		whole bool
		then  string
		want  string // the error; "" for a result with notes
	}{
		{"asleep with its logs written", true, "exec sleep 1000", ""},
		{"asleep with a log unwritten", false, "exec sleep 1000", ""},
		{"runnable", true, "while :; do :; done", "did not exit within 10s of SIGINT; killed; its threads then: rt-app R"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := RtApp{Path: fakeRtApp(t, tc.whole, tc.then), Periodic: 1, Period: 20 * time.Millisecond, Compute: time.Millisecond,
				Chain: 2, ChainPeriod: 50 * time.Millisecond, ChainCompute: time.Millisecond, Calibration: 20}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			js, err := r.Run(ctx)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want an error with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(js) != 2 || js[0].Judge != "rt-app-periodic" || js[1].Judge != "rt-app-chain" {
				t.Fatalf("judgements %+v, want the periodic task's and the chain's", js)
			}
			if _, ok := js[0].Figure(); !ok {
				t.Errorf("the periodic task's log was whole, yet it has no figure: %+v", js[0])
			}
			if len(js[0].Notes) != 1 || !strings.Contains(js[0].Notes[0], hang) {
				t.Errorf("periodic notes %q, want the hang, with the sleeping thread", js[0].Notes)
			}
			chain, ok := js[1].Figure()
			if tc.whole {
				if !ok {
					t.Errorf("the chain's log was whole, yet it has no figure: %+v", js[1])
				}
				if len(js[1].Notes) != 1 || !strings.Contains(js[1].Notes[0], hang) {
					t.Errorf("chain notes %q, want the hang, with the sleeping thread", js[1].Notes)
				}
				return
			}
			if ok || js[1].Runs != 0 || js[1].Work != 0 {
				t.Errorf("the chain's log was never written, yet it has %+v (runs %d, work %v)", chain, js[1].Runs, js[1].Work)
			}
			if len(js[1].Notes) != 1 || !strings.Contains(js[1].Notes[0], hang) || !strings.Contains(js[1].Notes[0], "no figure this round") {
				t.Errorf("chain notes %q, want the hang and the lost figure", js[1].Notes)
			}
		})
	}
}
