package workloads

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hotlane/hotlane/verify"
)

// A judge is an outside program that measures the whole machine, not the
// lane: perf bench sched, sysbench, rt-app, stress-ng's stressors that
// wake a lot. Each says how the machine served it in its own figure (a
// time, a rate, a latency), and the bench sets that figure under each
// variant beside EEVDF's: what the lane costs everyone else, in the words
// of tools nobody here wrote.

// ErrNoWork is wrapped by a generator's error when its workers did no work
// at all in a run: on a stalled machine, or in a run too short for them to
// have started.
var ErrNoWork = errors.New("did no work")

// Which figure is a judge's own (Judgement.Headline).
const (
	// HeadlineTime is the time one fixed run of work took (perf bench
	// sched messaging's "Total time"): lower is better.
	HeadlineTime = "time"
	// HeadlineRate is work per second (ops/s, events/s): higher is better.
	HeadlineRate = "rate"
	// HeadlineLatency is the p99 of the judge's own latency samples:
	// lower is better.
	HeadlineLatency = "latency"
)

// Judgement is what one judge reported over a run, in mergeable form: the
// figures are computed from it (Figure), so repeats add up exactly.
type Judgement struct {
	// Judge names the judge and what it runs, e.g. "perf-messaging",
	// "sysbench-threads", "rt-app-chain", "stress-ng-futex".
	Judge string `json:"judge"`
	// Command is the judge's command line.
	Command string `json:"command"`
	// Runs counts the judge's finished runs. A judge that does a fixed
	// amount of work (perf bench, sysbench) runs again and again; the
	// run the end of the measurement cut short is not counted.
	Runs int `json:"runs"`
	// Work is what the finished runs did, in Unit, in Time by the judge's
	// own clock (or the bench's, where the judge has none).
	Work float64       `json:"work"`
	Unit string        `json:"unit"`
	Time time.Duration `json:"time_ns"`
	// Latency holds the judge's own latency samples, where it reports
	// them (rt-app: timer wake-up or chain response; sysbench: per
	// event), and LatencyOf says what they are.
	Latency   *verify.Histogram `json:"latency,omitempty"`
	LatencyOf string            `json:"latency_of,omitempty"`
	// Missed counts the periods the judge's tasks overran (rt-app).
	Missed int `json:"missed,omitempty"`
	// Headline says which figure is the judge's own.
	Headline string `json:"headline"`
	// Notes are what went wrong without spoiling the figures, e.g. a
	// judge that hung at exit after its results were written.
	Notes []string `json:"notes,omitempty"`
}

// Merge adds other (the same judge in another round) to j.
func (j *Judgement) Merge(other *Judgement) {
	if j.Judge == "" {
		j.Judge, j.Command, j.Unit, j.LatencyOf, j.Headline = other.Judge, other.Command, other.Unit, other.LatencyOf, other.Headline
	}
	j.Runs += other.Runs
	j.Work += other.Work
	j.Time += other.Time
	j.Missed += other.Missed
	j.Notes = append(j.Notes, other.Notes...)
	if other.Latency != nil {
		if j.Latency == nil {
			j.Latency = &verify.Histogram{}
		}
		j.Latency.Merge(other.Latency)
	}
}

// Figure is one number a report shows, with which way is better.
type Figure struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
	// HigherIsBetter: a rate; otherwise a time or a latency.
	HigherIsBetter bool `json:"higher_is_better"`
}

// Figure is the judge's own figure; ok is false when the judge finished
// no run or recorded no sample, so there is nothing to show.
func (j *Judgement) Figure() (f Figure, ok bool) {
	switch j.Headline {
	case HeadlineTime:
		if j.Runs == 0 || j.Time <= 0 {
			return f, false
		}
		return Figure{Name: j.Judge + " time/run", Unit: "ns", Value: float64(j.Time) / float64(j.Runs)}, true
	case HeadlineRate:
		if j.Work <= 0 || j.Time <= 0 {
			return f, false
		}
		return Figure{Name: j.Judge, Unit: j.Unit + "/s", Value: j.Work / j.Time.Seconds(), HigherIsBetter: true}, true
	case HeadlineLatency:
		if j.Latency == nil || j.Latency.Count() == 0 {
			return f, false
		}
		return Figure{Name: j.Judge + " " + j.LatencyOf + " p99", Unit: "ns", Value: float64(j.Latency.QuantileUpper(0.99))}, true
	}
	return f, false
}

// repeatRuns runs argv to the end again and again, in a fresh temporary
// directory, until ctx is done, and hands each finished run's output to
// parse (unless nil). The run ctx cuts short is killed and not counted: a
// judge that does a fixed amount of work has a figure only for whole
// runs. A run that fails is an error: the load the bench was meant to
// have was not there. It returns the number of runs finished.
func repeatRuns(ctx context.Context, name string, argv []string, parse func(output string) error) (int, error) {
	dir, err := os.MkdirTemp("", "hotlane-judge-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	runs := 0
	for {
		out, cut, err := runToEnd(ctx, dir, name, argv)
		if cut || err != nil {
			return runs, err
		}
		if parse != nil {
			if err := parse(out); err != nil {
				return runs, fmt.Errorf("%s (%s): %w", name, strings.Join(argv, " "), err)
			}
		}
		runs++
	}
}

// runToEnd runs argv in dir until it exits, and returns its output; cut
// says ctx ended first, and the program was killed. A program that exits
// with an error is an error.
func runToEnd(ctx context.Context, dir, name string, argv []string) (out string, cut bool, err error) {
	if ctx.Err() != nil {
		return "", true, nil
	}
	p, buf, err := startProcess(dir, judgeOutput, argv...)
	if err != nil {
		return "", false, fmt.Errorf("start %s: %w", name, err)
	}
	select {
	case <-ctx.Done():
		p.kill()
		return buf.String(), true, nil
	case <-p.done:
	}
	if p.err != nil {
		return buf.String(), false, fmt.Errorf("%s failed during the run: %v: %s", name, p.err, buf.last())
	}
	return buf.String(), false, nil
}

// judgeOutput is how much of a judge's output is kept: all of it, for
// the parsers (sysbench's histogram is the longest, a few KiB).
const judgeOutput = 1 << 20
