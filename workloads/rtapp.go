package workloads

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hotlane/hotlane/verify"
)

// RtApp runs rt-app (Debian's rt-app) as a judge, with a task set it
// writes as rt-app's JSON: Periodic tasks, each doing Compute of work
// every Period on its own timer, and a Chain of tasks where the first,
// woken by its timer every ChainPeriod, does ChainCompute of work and
// hands over to the next, which does the same, and so on to the last,
// which hands back to the first. Every task is SCHED_OTHER: they are everyone else, not the
// lane.
//
// rt-app logs every period of every task. The periodic tasks give their
// timer wake-up latency (rt-app's wu_lat: from the timer's expiry to the
// task running again, as cyclictest measures); the chain's first task
// gives the chain's response, from its wake-up to the last task's
// hand-back, that is every link's wake-up and work. A period whose work
// ran past the next timer (negative slack) is missed.
//
// The hand-overs are rt-app barriers of two tasks, not suspend/resume: a
// resume sent before its task suspends is lost (a condition variable with
// no state), which on a busy machine stops the chain for good.
type RtApp struct {
	// Path is the program; empty means "rt-app" in $PATH.
	Path     string        `json:"path,omitempty"`
	Periodic int           `json:"periodic"`
	Period   time.Duration `json:"period_ns"`
	Compute  time.Duration `json:"compute_ns"`
	// Chain is the number of tasks in the chain (0: no chain).
	Chain        int           `json:"chain"`
	ChainPeriod  time.Duration `json:"chain_period_ns"`
	ChainCompute time.Duration `json:"chain_compute_ns"`
	// Calibration is rt-app's ns per loop of its run event, which turns
	// Compute into a fixed amount of work (loops), whatever the scheduler.
	// 0: measured when Run starts (Calibrate); the bench measures it
	// once, before the first variant, so every variant does the same
	// work.
	Calibration int `json:"calibration_ns"`
}

// DefaultRtApp is two periodic tasks computing 1 ms at 50 Hz and a chain
// of three tasks computing 1 ms each at 20 Hz, calibrated when run: a
// tenth of a CPU.
func DefaultRtApp() RtApp {
	return RtApp{Periodic: 2, Period: 20 * time.Millisecond, Compute: time.Millisecond,
		Chain: 3, ChainPeriod: 50 * time.Millisecond, ChainCompute: time.Millisecond}
}

// rtAppStarted is what rt-app prints as it starts each task.
const rtAppStarted = "starting thread"

// RtAppComm prefixes the names (comms) of rt-app's tasks.
const RtAppComm = "rta-"

// rtAppLogMB is each task's log buffer: about 17,000 periods, 170 s at
// 100 Hz. rt-app drops the oldest beyond it (its "file" log mode writes
// nothing in rt-app 1.0).
const rtAppLogMB = 2

func (r RtApp) program() string { return orDefault(r.Path, "rt-app") }

func (r RtApp) validate() error {
	switch {
	case r.Periodic < 0 || r.Chain < 0 || r.Periodic+r.Chain > MaxThreads:
		return fmt.Errorf("rt-app periodic %d and chain %d must be 0..%d tasks", r.Periodic, r.Chain, MaxThreads)
	case r.Periodic == 0 && r.Chain == 0:
		return errors.New("rt-app has no task: give periodic tasks, a chain, or both")
	case r.Chain == 1:
		return errors.New("rt-app chain of 1 task: a chain needs at least 2 (0 for none)")
	case r.Periodic > 0 && (r.Period < 100*time.Microsecond || r.Compute <= 0 || r.Compute >= r.Period):
		return fmt.Errorf("rt-app periodic tasks: period %s must be at least 100us and compute %s positive and below it", r.Period, r.Compute)
	case r.Chain > 0 && (r.ChainPeriod < 100*time.Microsecond || r.ChainCompute <= 0 || time.Duration(r.Chain)*r.ChainCompute >= r.ChainPeriod):
		return fmt.Errorf("rt-app chain: period %s must be at least 100us and the %d tasks' compute %s positive and together below it", r.ChainPeriod, r.Chain, r.ChainCompute)
	case r.Calibration < 0:
		return fmt.Errorf("rt-app calibration %d ns per loop must be positive (0: measured)", r.Calibration)
	}
	return nil
}

// TaskSet is rt-app's JSON for the task set, logging to logdir.
func (r RtApp) TaskSet(logdir string) ([]byte, error) {
	// rt-app runs a task's events in the order of the JSON object's keys,
	// and tells events apart by their keys' prefixes: so the object is
	// written by hand, key by key.
	var b strings.Builder
	str := func(s string) string { q, _ := json.Marshal(s); return string(q) }
	us := func(d time.Duration) int64 { return max(d.Microseconds(), 1) }
	timer := func(period time.Duration) string {
		return fmt.Sprintf(`{"ref": "unique", "period": %d, "mode": "absolute"}`, us(period))
	}
	fmt.Fprintf(&b, `{"global": {"duration": -1, "calibration": %d, "default_policy": "SCHED_OTHER", "logdir": %s, "log_basename": "rt-app", "log_size": %d},`+"\n",
		r.Calibration, str(logdir), rtAppLogMB)
	b.WriteString(` "tasks": {`)
	var tasks []string
	if r.Periodic > 0 {
		tasks = append(tasks, fmt.Sprintf(`%s: {"instance": %d, "loop": -1, "run0": %d, "timer0": %s}`,
			str(RtAppComm+"periodic"), r.Periodic, us(r.Compute), timer(r.Period)))
	}
	hop := func(i int) string {
		if i == r.Chain {
			return str(RtAppComm + "back")
		}
		return str(fmt.Sprintf("%shop%d", RtAppComm, i))
	}
	for i := range r.Chain {
		name := str(fmt.Sprintf("%schain%d", RtAppComm, i))
		if i == 0 {
			tasks = append(tasks, fmt.Sprintf(`%s: {"loop": -1, "run0": %d, "barrier0": %s, "barrier1": %s, "timer0": %s}`,
				name, us(r.ChainCompute), hop(1), hop(r.Chain), timer(r.ChainPeriod)))
			continue
		}
		tasks = append(tasks, fmt.Sprintf(`%s: {"loop": -1, "barrier0": %s, "run0": %d, "barrier1": %s}`,
			name, hop(i), us(r.ChainCompute), hop(i+1)))
	}
	b.WriteString(strings.Join(tasks, ",\n  "))
	b.WriteString("}}\n")
	if !json.Valid([]byte(b.String())) {
		return nil, fmt.Errorf("rt-app task set is not JSON: %s", b.String())
	}
	return []byte(b.String()), nil
}

// calibrationRun is the work of each of calibrationPeriods periods of the
// calibration run, at calibrationGuess ns per loop: a few tens of
// milliseconds on a 2026 host, a few seconds under emulation.
const (
	calibrationGuess   = 20
	calibrationRun     = 2 * time.Millisecond
	calibrationPeriods = 10
)

// Calibrate measures rt-app's ns per loop and sets Calibration, unless it
// is set. rt-app's own calibration repeats a 1 s sleep and a measurement
// until two measurements agree within 2 %, which took 6 s on the host and
// did not end in 8 minutes in an emulated guest. Instead rt-app runs its
// loop a few times at a guessed calibration and logs, per period, the
// loops it ran and the time they took: the fastest period (the least
// interrupted) gives the ns per loop.
func (r *RtApp) Calibrate(ctx context.Context) error {
	if r.Calibration > 0 {
		return nil
	}
	dir, err := os.MkdirTemp("", "hotlane-rt-app-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "calibrate.json")
	// One phase looped, once: a loop count beside the events of a task
	// without phases repeats them for ever.
	set := fmt.Sprintf(`{"global": {"duration": -1, "calibration": %d, "logdir": %q, "log_basename": "rt-app", "log_size": 1},`+
		` "tasks": {"%scalibrate": {"loop": 1, "phases": {"run": {"loop": %d, "run0": %d}}}}}`, calibrationGuess, dir, RtAppComm, calibrationPeriods, calibrationRun.Microseconds())
	if err := os.WriteFile(file, []byte(set), 0o644); err != nil {
		return err
	}
	_, cut, err := runToEnd(ctx, dir, "rt-app's calibration", []string{r.program(), file})
	if err != nil {
		return err
	}
	if cut {
		return fmt.Errorf("rt-app's calibration: %w", ctx.Err())
	}
	f, err := os.Open(filepath.Join(dir, "rt-app-"+RtAppComm+"calibrate-0.log"))
	if err != nil {
		return fmt.Errorf("rt-app's calibration wrote no log: %w", err)
	}
	defer f.Close()
	periods, err := ParseRtAppLog(f)
	if err != nil {
		return fmt.Errorf("rt-app's calibration: %w", err)
	}
	r.Calibration, err = NsPerLoop(periods)
	return err
}

// NsPerLoop is the time per loop of rt-app's run event in the fastest of
// the periods: the one least interrupted.
func NsPerLoop(periods []RtAppPeriod) (int, error) {
	best := 0.0
	for _, p := range periods {
		if p.Loops <= 0 || p.Run <= 0 {
			continue
		}
		if ns := float64(p.Run) / float64(p.Loops); best == 0 || ns < best {
			best = ns
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("rt-app logged no period with loops run (%d periods)", len(periods))
	}
	return max(int(math.Round(best)), 1), nil
}

// Run runs the task set until ctx is done and returns the periodic
// tasks' judgement and the chain's, those the task set has, in that
// order.
func (r RtApp) Run(ctx context.Context) ([]Judgement, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if err := r.Calibrate(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hotlane-rt-app-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	set, err := r.TaskSet(dir)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "taskset.json")
	if err := os.WriteFile(file, set, 0o644); err != nil {
		return nil, err
	}
	command := r.program() + " " + file
	started := time.Now()
	p, out, err := runUntilDone(ctx, dir, "rt-app", judgeOutput, []string{r.program(), file})
	if p != nil {
		defer p.kill()
	}
	if err != nil {
		return nil, err
	}
	// rt-app says "[N] starting thread ..." as each task starts; stopped
	// before, a task's log is empty.
	tasks := r.Periodic + r.Chain
	if err := p.awaitStart(out, "rt-app", func() bool { return out.count(rtAppStarted) >= tasks }); err != nil {
		return nil, err
	}
	ran := time.Since(started)
	// rt-app writes its logs as it stops, on SIGINT: each task as it
	// leaves its loop. rt-app 1.0's shutdown can lose a hand-over: a
	// chain task that enters a barrier just after the shutdown's
	// broadcast waits there for a partner that has left. Those tasks
	// were asleep, not starved: the logs of the tasks that left are
	// whole, and a judge whose log the hang kept unwritten has no figure
	// this round, with a note, rather than part of one.
	stopErr := p.stop(10 * time.Second)
	var hung *hungError
	if stopErr != nil && !(errors.As(stopErr, &hung) && hung.waitsOnItself()) {
		return nil, fmt.Errorf("rt-app: %w: %s", stopErr, out.last())
	}
	readLogs := func(j *Judgement, paths []string, chain bool) error {
		for _, path := range paths {
			err := addRtAppLog(j, path, chain)
			if err == nil {
				continue
			}
			if stopErr == nil {
				return err
			}
			*j = Judgement{Judge: j.Judge, Command: j.Command, Unit: j.Unit, LatencyOf: j.LatencyOf, Headline: j.Headline,
				Notes: []string{fmt.Sprintf("rt-app %s, and lost a log (%v): no figure this round", stopErr, err)}}
			return nil
		}
		if stopErr != nil {
			j.Notes = append(j.Notes, fmt.Sprintf("rt-app %s; the logs read were whole", stopErr))
		}
		return nil
	}
	var js []Judgement
	if r.Periodic > 0 {
		j := Judgement{Judge: "rt-app-periodic", Command: command, Runs: 1, Unit: "periods", Time: ran,
			Latency: &verify.Histogram{}, LatencyOf: "wake-up", Headline: HeadlineLatency}
		logs, _ := filepath.Glob(filepath.Join(dir, "rt-app-"+RtAppComm+"periodic-*.log"))
		if len(logs) != r.Periodic {
			return nil, fmt.Errorf("rt-app wrote %d logs for its %d periodic tasks: %s", len(logs), r.Periodic, out.last())
		}
		if err := readLogs(&j, logs, false); err != nil {
			return nil, err
		}
		js = append(js, j)
	}
	if r.Chain > 0 {
		j := Judgement{Judge: "rt-app-chain", Command: command, Runs: 1, Unit: "periods", Time: ran,
			Latency: &verify.Histogram{}, LatencyOf: "response", Headline: HeadlineLatency}
		logs, _ := filepath.Glob(filepath.Join(dir, "rt-app-"+RtAppComm+"chain0-*.log"))
		if len(logs) != 1 {
			return nil, fmt.Errorf("rt-app wrote %d logs for the chain's first task: %s", len(logs), out.last())
		}
		if err := readLogs(&j, logs, true); err != nil {
			return nil, err
		}
		js = append(js, j)
	}
	return js, nil
}

// addRtAppLog adds a task's log to j: its periods as work, each period's
// wake-up latency (but an overrun's, which had no wake-up) or the chain's
// response to j.Latency, and its overruns. The
// last line of a log stopped by SIGINT is a period cut short before its
// timer (no timer period, no wake-up): it is left out.
func addRtAppLog(j *Judgement, path string, chain bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	periods, err := ParseRtAppLog(f)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	for _, p := range periods {
		if p.ConfiguredPeriod == 0 {
			continue // the period the stop cut short, before its timer
		}
		j.Work++
		if p.Slack < 0 {
			j.Missed++
		}
		switch {
		case chain:
			// An overrun is the chain's slowest response: it counts.
			j.Latency.Record(uint64(p.Response()))
		case p.Slack >= 0:
			// An overrun period had no timer wake-up to measure.
			j.Latency.Record(uint64(p.WakeUp))
		}
	}
	return nil
}

// RtAppPeriod is one line of an rt-app task log: one period (phase) of
// the task.
type RtAppPeriod struct {
	// Loops is the loops its run events ran (perf), and Run the time
	// they took.
	Loops int64
	Run   time.Duration
	// Period is the time from the period's start to its end, and Slack
	// the time between its last event and the timer's expiry (negative:
	// the work overran the period, and there was no sleep).
	Period, Slack time.Duration
	// ConfiguredPeriod is the timer's period (c_period).
	ConfiguredPeriod time.Duration
	// WakeUp is the timer wake-up latency (wu_lat): from the expiry to
	// the task running again.
	WakeUp time.Duration
}

// Response is the time from the period's start to the end of its work
// before the timer: the period less the sleep and the wake-up.
func (p RtAppPeriod) Response() time.Duration {
	return max(p.Period-max(p.Slack, 0)-p.WakeUp, 0)
}

// ParseRtAppLog reads an rt-app (1.0) task log, whose columns it finds by
// their names in the header:
//
//	# Policy : SCHED_OTHER priority : 0
//	#idx     perf      run   period           start             end          rel_st      slack c_duration   c_period     wu_lat
//	   2    26315      610    18742      2383704839      2383723581            3715      16792        500      20000         70
//
// Times are in µs; perf is the loops the run events ran.
func ParseRtAppLog(r io.Reader) ([]RtAppPeriod, error) {
	var (
		cols = map[string]int{}
		out  []RtAppPeriod
	)
	need := []string{"perf", "run", "period", "slack", "c_period", "wu_lat"}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "#idx"); ok {
			for i, name := range append([]string{"idx"}, strings.Fields(rest)...) {
				cols[name] = i
			}
			for _, n := range need {
				if _, ok := cols[n]; !ok {
					return nil, fmt.Errorf("rt-app log header has no %s column: %q", n, line)
				}
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(cols) == 0 {
			return nil, fmt.Errorf("rt-app log line %q comes before the #idx header", line)
		}
		f := strings.Fields(line)
		v := map[string]int64{}
		for _, n := range need {
			i := cols[n]
			if i >= len(f) {
				return nil, fmt.Errorf("rt-app log line %q has no %s", line, n)
			}
			n64, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("rt-app log line %q: %s %q is not a number", line, n, f[i])
			}
			v[n] = n64
		}
		us := func(n string) time.Duration { return time.Duration(v[n]) * time.Microsecond }
		out = append(out, RtAppPeriod{Loops: v["perf"], Run: us("run"), Period: us("period"), Slack: us("slack"),
			ConfiguredPeriod: us("c_period"), WakeUp: us("wu_lat")})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, errors.New("rt-app log has no #idx header")
	}
	return out, nil
}
