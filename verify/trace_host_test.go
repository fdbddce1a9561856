package verify

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
)

// inferenceMax5ms is the host tests' policy (comm prefix "infer" is the
// inference class) and their bound on it.
func inferenceMax5ms(t *testing.T) (*policy.Table, []Bound) {
	t.Helper()
	table, err := policy.Default("infer").Compile("")
	if err != nil {
		t.Fatal(err)
	}
	bounds, err := ParseBounds("inference:max<=5ms", "inference")
	if err != nil {
		t.Fatal(err)
	}
	return table, bounds
}

// writeAndReadTrace writes a trace to path with write and reads it back.
func writeAndReadTrace(t *testing.T, path string, write func() error) parsedTrace {
	t.Helper()
	if err := write(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseTrace(t, data)
}

// A SCHED_FIFO hog bursting on a sleeper's CPU, the sleeper at a lower
// realtime priority so that nothing but realtime work can keep it
// waiting: the first violation stops the run (a FAIL), runs the
// --on-violation command once with its figures, and its trace has the
// sleeper's track and the hog's slices, adding up to the explanation.
func TestTraceOfAnRTHog(t *testing.T) {
	requireRoot(t)
	hog, victim := rtHogAndSleeper(t, 5)

	table, bounds := inferenceMax5ms(t)
	var out bytes.Buffer
	const planned = 30 * time.Second
	res, err := Run(context.Background(), Options{
		Tracer:          TracerConfig{Table: table, FilterTGID: uint32(os.Getpid()), Explain: true},
		Bounds:          bounds,
		Duration:        planned,
		OnViolation:     []string{"env"},
		ActionOutput:    &out,
		StopOnViolation: true,
	})
	if err != nil {
		t.Fatal(err)
	}

	// --stop-on-violation: the first one ended the run, a FAIL.
	v := res.StoppedBy
	if v == nil {
		t.Fatalf("the run was not stopped by a violation (%d streamed over %s)", res.Violations, res.Snapshot.Elapsed)
	}
	t.Logf("stopped after %s by %s[%d] %s on cpu %d: %v", res.Snapshot.Elapsed, v.Comm, v.PID, v.waited(), v.CPU, v.Why)
	if res.Pass || res.Verdict != report.VerdictFail || res.Interrupted || res.Snapshot.Elapsed >= planned {
		t.Errorf("pass %v, verdict %s, interrupted %v, elapsed %s of %s: want a FAIL that ended the run early",
			res.Pass, res.Verdict, res.Interrupted, res.Snapshot.Elapsed, planned)
	}
	if int(v.PID) != victim || v.Class != "inference" || v.Bound != 5*time.Millisecond || v.View != ViewFelt {
		t.Fatalf("stopped by %s[%d] of class %s, bound %v view %q: want the victim %d, inference, 5ms, felt", v.Comm, v.PID, v.Class, v.Bound, v.View, victim)
	}

	// --on-violation: once, with that violation's figures.
	runs := envOf(out.String())
	if res.Actions == nil || res.Actions.Started != 1 || res.Actions.Failed != 0 || len(runs) != 1 {
		t.Fatalf("actions %+v, %d runs in the output: want the command run once\n%s", res.Actions, len(runs), out.String())
	}
	for name, want := range map[string]string{
		"PID": strconv.Itoa(victim), "COMM": "infer-victim", "CLASS": "inference", "CPU": fmt.Sprint(v.CPU),
		"LATENCY_NS": fmt.Sprint(int64(v.Measured())), "BOUND_NS": "5000000", "AT_NS": fmt.Sprint(int64(v.At)),
		"WAIT_NS": fmt.Sprint(int64(v.Latency)), "CAUSE": v.Why.Cause,
	} {
		if runs[0][name] != want {
			t.Errorf("%s%s=%q, want %q", ViolationEnvPrefix, name, runs[0][name], want)
		}
	}

	// The trace: the sleeper's track, the hog's slices on its CPU.
	if v.Why == nil {
		t.Fatal("the violation was not explained")
	}
	var hogTask *BlamedTask
	for i := range v.Why.Tasks {
		if int(v.Why.Tasks[i].PID) == hog {
			hogTask = &v.Why.Tasks[i]
		}
	}
	if hogTask == nil || hogTask.Kind != KindRTDL || hogTask.Time < v.Latency/2 {
		t.Fatalf("the hog (%d) is not named as the rt_dl task that took most of the wait: %v", hog, v.Why)
	}
	path := filepath.Join(t.TempDir(), "trace.json")
	pt := writeAndReadTrace(t, path, func() error { return res.WriteTraceFile(path, 0) })
	rank := 0
	for i := range res.Worst {
		if res.Worst[i].At == v.At && res.Worst[i].PID == v.PID {
			rank = i + 1
		}
	}
	if rank == 0 || rank > DefaultTraceViolations {
		t.Fatalf("the violation is not among the trace's (rank %d of %d kept)", rank, len(res.Worst))
	}
	if pt.threads[[2]int{os.Getpid(), victim}] != "infer-victim" {
		t.Errorf("no track for the sleeper (pid %d tid %d): %v", os.Getpid(), victim, pt.threads)
	}
	pt.checkAgainst(t, rank, *v)
	var hogSlices time.Duration
	for _, e := range pt.of(rank) {
		if e.Ph == phSlice && e.Name == fmt.Sprintf("hl-rthog[%d]", hog) && e.Cat == KindRTDL {
			hogSlices += e.Dur
		}
	}
	if hogSlices != hogTask.Time {
		t.Errorf("the hog's slices add up to %v, the explanation gives it %v", hogSlices, hogTask.Time)
	}

	// And the report says where the trace is and how to open it.
	var text bytes.Buffer
	if err := res.WriteText(&text, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stopped at the first violation", "on-violation: command started 1 times", path, "ui.perfetto.dev"} {
		if !bytes.Contains(text.Bytes(), []byte(want)) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
}

// A caller that attaches the tracer itself (the bench) keeps the worst
// violations with a ViolationLog and writes the same trace.
func TestViolationLogKeepsTheWorst(t *testing.T) {
	requireRoot(t)
	hog, victim := rtHogAndSleeper(t, 5)
	table, bounds := inferenceMax5ms(t)
	cfg := TracerConfig{Table: table, FilterTGID: uint32(os.Getpid())}
	WatchBounds(&cfg, bounds)
	if !cfg.Explain || cfg.Thresholds["inference"] != 5*time.Millisecond {
		t.Fatalf("WatchBounds: explain %v, thresholds %v", cfg.Explain, cfg.Thresholds)
	}
	tr := attachForTest(t, cfg)
	var log ViolationLog
	stop := log.Follow(tr, cfg)
	for deadline := time.Now().Add(20 * time.Second); len(log.Worst()) == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	worst := log.Worst()
	if len(worst) == 0 {
		t.Fatal("no violation kept")
	}
	v := worst[0]
	if int(v.PID) != victim || v.Bound != 5*time.Millisecond || v.Why == nil || len(v.Why.Tasks) == 0 || int(v.Why.Tasks[0].PID) != hog {
		t.Fatalf("worst %s[%d] bound %v: %v; want the sleeper %d, 5ms, behind the hog %d", v.Comm, v.PID, v.Bound, v.Why, victim, hog)
	}
	path := filepath.Join(t.TempDir(), "trace.json")
	writeAndReadTrace(t, path, func() error { return log.WriteTraceFile(path, 0) }).checkAgainst(t, 1, v)
	if err := (&ViolationLog{}).WriteTraceFile(filepath.Join(t.TempDir(), "none.json"), 0); err != ErrNoViolation {
		t.Errorf("an empty log: %v, want ErrNoViolation", err)
	}
}
