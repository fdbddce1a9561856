package workloads

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hotlane/hotlane/verify"
)

// Sysbench runs one of sysbench's scheduler-bound tests as a judge:
// "threads" (threads taking turns on a few mutexes and yielding: a
// wake-up and a switch per turn) or "cpu" (threads computing primes). Its
// figure is events per second; each event's latency goes to a histogram
// (--histogram). sysbench runs for whole seconds (--time); Run starts it
// again until the measurement ends.
type Sysbench struct {
	// Path is the program; empty means "sysbench" in $PATH.
	Path string `json:"path,omitempty"`
	// Test is SysbenchThreads or SysbenchCPU.
	Test    string `json:"test"`
	Threads int    `json:"threads"`
	// RunTime is one run's --time, in whole seconds.
	RunTime time.Duration `json:"run_time_ns"`
	// Yields is the threads test's --thread-yields, the yields an event
	// makes; 0 means DefaultSysbenchYields.
	Yields int `json:"yields,omitempty"`
}

// sysbench tests.
const (
	SysbenchThreads = "threads"
	SysbenchCPU     = "cpu"
)

// DefaultSysbenchRunTime is one run's length unless told otherwise: the
// shortest sysbench takes, so that a run of a few seconds counts several.
const DefaultSysbenchRunTime = time.Second

// DefaultSysbenchYields is the threads test's yields per event unless told
// otherwise: a tenth of sysbench's 1000. sysbench lets the events in
// flight finish after --time, and on a loaded machine, where each yield
// waits for every other runnable task, an event of 1000 yields took
// seconds: a 1 s run did not end within a 3 s measurement.
const DefaultSysbenchYields = 100

func (s Sysbench) program() string { return orDefault(s.Path, "sysbench") }

func (s Sysbench) validate() error {
	switch {
	case s.Test != SysbenchThreads && s.Test != SysbenchCPU:
		return fmt.Errorf("sysbench test %q: use %q or %q", s.Test, SysbenchThreads, SysbenchCPU)
	case s.Threads < 1 || s.Threads > MaxThreads:
		return fmt.Errorf("sysbench threads %d must be 1..%d", s.Threads, MaxThreads)
	case s.RunTime < time.Second || s.RunTime > time.Hour || s.RunTime%time.Second != 0:
		return fmt.Errorf("sysbench run time %s must be whole seconds, 1s..1h", s.RunTime)
	case s.Yields < 0 || s.Yields > 1_000_000:
		return fmt.Errorf("sysbench yields %d must be 0..1000000", s.Yields)
	}
	return nil
}

// Args are sysbench's arguments for one run.
func (s Sysbench) Args() []string {
	args := []string{s.Test, "--threads=" + strconv.Itoa(s.Threads), fmt.Sprintf("--time=%d", int(s.RunTime.Seconds()))}
	if s.Test == SysbenchThreads {
		args = append(args, "--thread-yields="+strconv.Itoa(cmp.Or(s.Yields, DefaultSysbenchYields)))
	}
	return append(args, "--histogram=on", "run")
}

// Run runs sysbench again and again until ctx is done.
func (s Sysbench) Run(ctx context.Context) (Judgement, error) {
	if err := s.validate(); err != nil {
		return Judgement{}, err
	}
	argv := append([]string{s.program()}, s.Args()...)
	j := Judgement{Judge: "sysbench-" + s.Test, Command: strings.Join(argv, " "), Headline: HeadlineRate,
		Unit: "events", Latency: &verify.Histogram{}, LatencyOf: "event"}
	var err error
	j.Runs, err = repeatRuns(ctx, "sysbench "+s.Test, argv, func(out string) error {
		r, err := ParseSysbench(strings.NewReader(out))
		if err != nil {
			return err
		}
		j.Work += float64(r.Events)
		j.Time += r.TotalTime
		j.Latency.Merge(r.Latency)
		return nil
	})
	return j, err
}

// SysbenchResult is what one sysbench run printed.
type SysbenchResult struct {
	Events    uint64
	TotalTime time.Duration
	// Latency is the events' latency histogram (--histogram=on), at the
	// value sysbench printed for each of its buckets.
	Latency *verify.Histogram
}

// ParseSysbench reads the report of sysbench 1.0 run with --histogram=on:
//
//	Latency histogram (values are in milliseconds)
//	       value  ------------- distribution ------------- count
//	       0.275 |******                                   6
//	...
//	General statistics:
//	    total time:                          1.0026s
//	    total number of events:              1188
//
// The histogram's counts must add up to the events: sysbench prints
// nothing to say a histogram was left out or cut short.
func ParseSysbench(r io.Reader) (SysbenchResult, error) {
	res := SysbenchResult{Latency: &verify.Histogram{}}
	var inHist, haveTime, haveEvents bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, val, colon := strings.Cut(line, ":")
		switch {
		case strings.HasPrefix(line, "Latency histogram"):
			inHist = true
		case inHist && strings.Contains(line, "|"):
			value, rest, _ := strings.Cut(line, "|")
			f := strings.Fields(rest)
			ms, err1 := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if len(f) == 0 || err1 != nil || ms < 0 {
				return res, fmt.Errorf("sysbench histogram line %q is not a value and a count", line)
			}
			n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
			if err != nil {
				return res, fmt.Errorf("sysbench histogram line %q is not a value and a count", line)
			}
			res.Latency.RecordN(uint64(math.Round(ms*1e6)), n)
		case inHist && strings.HasPrefix(line, "value"):
		case colon && key == "total time":
			inHist = false
			secs, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(val), "s"), 64)
			if err != nil {
				return res, fmt.Errorf("sysbench total time %q: %w", val, err)
			}
			res.TotalTime, haveTime = time.Duration(secs*float64(time.Second)), true
		case colon && key == "total number of events":
			n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
			if err != nil {
				return res, fmt.Errorf("sysbench events %q: %w", val, err)
			}
			res.Events, haveEvents = n, true
		default:
			if line != "" {
				inHist = false
			}
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	switch {
	case !haveTime || !haveEvents:
		return res, errors.New("sysbench output has no \"total time\" or \"total number of events\": did the run end early?")
	case res.Latency.Count() != res.Events:
		return res, fmt.Errorf("sysbench's latency histogram holds %d events but it counted %d (run it with --histogram=on)", res.Latency.Count(), res.Events)
	}
	return res, nil
}
