package workloads

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StressNg runs stress-ng: its CPU stressor as background load, whose
// throughput (bogo operations) is the bench's background work, and, as
// judges, stressors that wake a lot: --switch (tasks handing the CPU to
// each other over pipes), --futex (futex wait and wake) and --pipe (a
// writer and a reader). Each of those is a judgement whose figure is its
// bogo ops per second. Its workers stay SCHED_OTHER under every variant.
type StressNg struct {
	// Path is the program; empty means "stress-ng" in $PATH.
	Path string `json:"path,omitempty"`
	// CPU is the number of --cpu workers.
	CPU int `json:"cpu"`
	// Method is the --cpu-method; one fixed method keeps a bogo op the
	// same amount of work all run long ("all" would cycle through them).
	Method string `json:"method"`
	// Switch, Futex and Pipe are the workers of those stressors.
	Switch int `json:"switch,omitempty"`
	Futex  int `json:"futex,omitempty"`
	Pipe   int `json:"pipe,omitempty"`
}

// StressNgResult is what one stress-ng run did.
type StressNgResult struct {
	// CPUOps is the CPU stressor's bogo ops.
	CPUOps uint64
	// Judgements are the waking stressors', in the order switch, futex,
	// pipe (those that ran).
	Judgements []Judgement
}

// stressor is a stress-ng stressor and its number of workers.
type stressor struct {
	name    string
	workers int
}

// wakers are the waking stressors that have workers, in order.
func (s StressNg) wakers() []stressor {
	var out []stressor
	for _, w := range []stressor{{"switch", s.Switch}, {"futex", s.Futex}, {"pipe", s.Pipe}} {
		if w.workers > 0 {
			out = append(out, w)
		}
	}
	return out
}

// DefaultStressMethod is the --cpu-method unless told otherwise.
const DefaultStressMethod = "int64"

func (s StressNg) program() string {
	if s.Path == "" {
		return "stress-ng"
	}
	return s.Path
}

// stressNgStarted is what stress-ng prints as it starts its workers.
const stressNgStarted = "dispatching hogs"

// Args are stress-ng's arguments for a run writing its metrics to yaml.
func (s StressNg) Args(yaml string) []string {
	var args []string
	if s.CPU > 0 {
		args = append(args, "--cpu", strconv.Itoa(s.CPU), "--cpu-method", orDefault(s.Method, DefaultStressMethod))
	}
	for _, w := range s.wakers() {
		args = append(args, "--"+w.name, strconv.Itoa(w.workers))
	}
	return append(args, "--timeout", "0", "--metrics-brief", "--yaml", yaml)
}

func (s StressNg) validate() error {
	for _, n := range []int{s.CPU, s.Switch, s.Futex, s.Pipe} {
		if n < 0 || n > MaxThreads {
			return fmt.Errorf("stress-ng workers must be 0..%d per stressor (cpu %d, switch %d, futex %d, pipe %d)", MaxThreads, s.CPU, s.Switch, s.Futex, s.Pipe)
		}
	}
	if s.CPU+s.Switch+s.Futex+s.Pipe == 0 {
		return errors.New("stress-ng has no workers: give cpu, switch, futex or pipe")
	}
	return nil
}

// Run runs the workers until ctx is done and returns what they did.
func (s StressNg) Run(ctx context.Context) (StressNgResult, error) {
	var res StressNgResult
	if err := s.validate(); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "hotlane-stress-ng-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	yaml := filepath.Join(dir, "metrics.yaml")
	argv := append([]string{s.program()}, s.Args(yaml)...)
	// In dir: stress-ng may leave temporary files in its working directory.
	started := time.Now()
	p, out, err := runUntilDone(ctx, dir, "stress-ng", 0, argv)
	if p != nil {
		defer p.kill()
	}
	if err != nil {
		return res, err
	}
	// Stopped before it has started its workers (a short run on a busy
	// machine), stress-ng dies of the signal without writing metrics; just
	// after, its workers have done nothing and its metrics leave the
	// stressor out.
	if err := p.awaitStart(out, "stress-ng", func() bool { return out.contains(stressNgStarted) }); err != nil {
		return res, err
	}
	ran := time.Since(started)
	if err := p.stop(10 * time.Second); err != nil {
		return res, fmt.Errorf("stress-ng: %w: %s", err, out.last())
	}
	f, err := os.Open(yaml)
	if err != nil {
		return res, fmt.Errorf("stress-ng wrote no metrics: %w: %s", err, out.last())
	}
	defer f.Close()
	ops, err := ParseStressNgOps(f)
	if err != nil {
		return res, err
	}
	// The rate is per second of the run: stress-ng 0.15 leaves the
	// wall-clock time of some stressors it stopped by SIGINT at 0.
	// A waking stressor left out did nothing: for a judge, that is its
	// figure (none), not a failed run.
	for _, w := range s.wakers() {
		n := ops[w.name]
		res.Judgements = append(res.Judgements, Judgement{Judge: "stress-ng-" + w.name, Command: strings.Join(argv, " "),
			Runs: 1, Work: float64(n), Unit: "bogo ops", Time: ran, Headline: HeadlineRate})
	}
	if s.CPU > 0 {
		res.CPUOps, err = stressorOps(ops, "cpu")
	}
	return res, err
}

func stressorOps(ops map[string]uint64, stressor string) (uint64, error) {
	n, ok := ops[stressor]
	if !ok {
		// --metrics-brief leaves out a stressor none of whose workers
		// did any work (and none returned): they never got to run.
		return 0, fmt.Errorf("stress-ng metrics have no %s stressor: its workers %w (a stalled machine?)", stressor, ErrNoWork)
	}
	return n, nil
}

// ParseStressNgOps reads the bogo ops of each stressor from stress-ng's
// --yaml metrics:
//
//	metrics:
//	    - stressor: cpu
//	      bogo-ops: 3866
func ParseStressNgOps(r io.Reader) (map[string]uint64, error) {
	ops := map[string]uint64{}
	sc := bufio.NewScanner(r)
	stressor := ""
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "- ")), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.Trim(strings.TrimSpace(val), `'"`)
		switch {
		case key == "stressor":
			stressor = val
		case stressor != "" && key == "bogo-ops":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("stress-ng metrics: %s bogo-ops %q is not a count", stressor, val)
			}
			ops[stressor] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ops, nil
}
