package workloads

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// PerfBench runs one of perf's scheduler benchmarks (linux-perf) as a
// judge: "messaging" (groups of 20 senders and 20 receivers passing
// messages, hackbench's shape; its figure is the time a run took) or
// "pipe" (two tasks bouncing a token over a pipe, one wake-up per
// operation; its figure is operations per second). Each run does a fixed
// amount of work; Run starts it again until the measurement ends.
//
// On Debian, /usr/bin/perf may be a script that runs perf_<kernel
// version> and refuses a kernel it has no perf for; the guest's kernel is
// not the host's, so the VM gets the real binary (vm.JudgePrograms).
type PerfBench struct {
	// Path is the program; empty means "perf" in $PATH.
	Path string `json:"path,omitempty"`
	// Bench is PerfMessaging or PerfPipe.
	Bench string `json:"bench"`
	// Groups is messaging's --group (20 senders and 20 receivers each).
	Groups int `json:"groups,omitempty"`
	// Loops is messaging's --nr_loops (messages each sender sends each
	// receiver) or pipe's --loop (operations).
	Loops int `json:"loops"`
	// Threads runs threads instead of processes (--thread, --threaded).
	Threads bool `json:"threads,omitempty"`
}

// perf bench sched benchmarks.
const (
	PerfMessaging = "messaging"
	PerfPipe      = "pipe"
)

// Defaults: runs short enough to finish within a few seconds of a loaded
// emulated guest. On an idle 2-CPU guest 1000 loops of pipe took 2.2 s
// (on the host 7 ms), and on a loaded 8-CPU guest 100 loops did not end
// within 8 s; 5 loops of messaging took 0.8 s in processes, 0.1 s in
// threads.
const (
	DefaultPerfGroups         = 1
	DefaultPerfMessagingLoops = 5
	DefaultPerfPipeLoops      = 20
)

func (p PerfBench) program() string { return orDefault(p.Path, "perf") }

func (p PerfBench) validate() error {
	switch {
	case p.Bench != PerfMessaging && p.Bench != PerfPipe:
		return fmt.Errorf("perf bench %q: use %q or %q", p.Bench, PerfMessaging, PerfPipe)
	case p.Loops < 1 || p.Loops > 100_000_000:
		return fmt.Errorf("perf bench %s loops %d must be 1..100000000", p.Bench, p.Loops)
	case p.Bench == PerfMessaging && (p.Groups < 1 || 40*p.Groups > MaxThreads):
		return fmt.Errorf("perf bench messaging groups %d must be 1..%d (40 tasks each)", p.Groups, MaxThreads/40)
	}
	return nil
}

// Args are perf's arguments for one run.
func (p PerfBench) Args() []string {
	args := []string{"bench", "sched", p.Bench, "--loop", strconv.Itoa(p.Loops)}
	if p.Bench == PerfMessaging {
		args = []string{"bench", "sched", p.Bench, "--group", strconv.Itoa(p.Groups), "--nr_loops", strconv.Itoa(p.Loops)}
		if p.Threads {
			args = append(args, "--thread")
		}
	} else if p.Threads {
		args = append(args, "--threaded")
	}
	return args
}

// Run runs the benchmark again and again until ctx is done.
func (p PerfBench) Run(ctx context.Context) (Judgement, error) {
	if err := p.validate(); err != nil {
		return Judgement{}, err
	}
	argv := append([]string{p.program()}, p.Args()...)
	j := Judgement{Judge: "perf-" + p.Bench, Command: strings.Join(argv, " "), Headline: HeadlineRate, Unit: "ops"}
	if p.Bench == PerfMessaging {
		j.Headline, j.Unit = HeadlineTime, "runs"
	}
	var err error
	j.Runs, err = repeatRuns(ctx, "perf bench sched "+p.Bench, argv, func(out string) error {
		r, err := ParsePerfBench(strings.NewReader(out))
		if err != nil {
			return err
		}
		j.Time += r.Time()
		if p.Bench == PerfPipe {
			j.Work += float64(r.Ops)
		} else {
			j.Work++
		}
		return nil
	})
	return j, err
}

// PerfBenchResult is what one run of perf bench sched printed.
type PerfBenchResult struct {
	// Total is "Total time" (millisecond resolution).
	Total time.Duration
	// Ops and UsecsPerOp are pipe's operations and time per operation
	// (zero for messaging).
	Ops        uint64
	UsecsPerOp float64
}

// Time is the run's time at the best resolution perf printed: pipe's
// time per operation has six decimals, Total three.
func (r PerfBenchResult) Time() time.Duration {
	if r.Ops > 0 && r.UsecsPerOp > 0 {
		return time.Duration(math.Round(float64(r.Ops) * r.UsecsPerOp * 1e3))
	}
	return r.Total
}

// ParsePerfBench reads the default output of perf bench sched messaging
// or pipe (perf 6.1):
//
//	# Running 'sched/pipe' benchmark:
//	# Executed 5000 pipe operations between two processes
//
//	     Total time: 0.035 [sec]
//
//	       7.142600 usecs/op
//	         140005 ops/sec
func ParsePerfBench(r io.Reader) (PerfBenchResult, error) {
	var res PerfBenchResult
	found := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		var err error
		switch {
		case strings.HasPrefix(line, "Total time:") && len(f) >= 3:
			var secs float64
			secs, err = strconv.ParseFloat(f[2], 64)
			res.Total, found = time.Duration(math.Round(secs*1e9)), err == nil
		case strings.HasPrefix(line, "# Executed ") && len(f) >= 3:
			res.Ops, err = strconv.ParseUint(f[2], 10, 64)
		case len(f) == 2 && f[1] == "usecs/op":
			res.UsecsPerOp, err = strconv.ParseFloat(f[0], 64)
		}
		if err != nil {
			return res, fmt.Errorf("perf bench output: %q: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if !found {
		return res, errors.New("perf bench output has no \"Total time:\" line")
	}
	return res, nil
}
