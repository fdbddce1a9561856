package workloads

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StressNg runs stress-ng's CPU stressor as background load: an outside
// program whose throughput (bogo operations) nobody here counts. Its
// workers stay SCHED_OTHER under every variant.
type StressNg struct {
	// Path is the program; empty means "stress-ng" in $PATH.
	Path string `json:"path,omitempty"`
	// CPU is the number of --cpu workers.
	CPU int `json:"cpu"`
	// Method is the --cpu-method; one fixed method keeps a bogo op the
	// same amount of work all run long ("all" would cycle through them).
	Method string `json:"method"`
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

// workerGrace is how long stress-ng's workers run, at least, after a run
// that ended before they were started.
const workerGrace = 500 * time.Millisecond

// Args are stress-ng's arguments for a run writing its metrics to yaml.
func (s StressNg) Args(yaml string) []string {
	method := s.Method
	if method == "" {
		method = DefaultStressMethod
	}
	return []string{"--cpu", strconv.Itoa(s.CPU), "--cpu-method", method, "--timeout", "0", "--metrics-brief", "--yaml", yaml}
}

// Run runs the workers until ctx is done and returns their bogo ops.
func (s StressNg) Run(ctx context.Context) (uint64, error) {
	if s.CPU < 1 || s.CPU > MaxThreads {
		return 0, fmt.Errorf("stress-ng cpu workers %d must be 1..%d", s.CPU, MaxThreads)
	}
	dir, err := os.MkdirTemp("", "hotlane-stress-ng-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	yaml := filepath.Join(dir, "metrics.yaml")
	// In dir: stress-ng may leave temporary files in its working directory.
	p, out, err := startProcess(dir, append([]string{s.program()}, s.Args(yaml)...)...)
	if err != nil {
		return 0, fmt.Errorf("start stress-ng: %w", err)
	}
	defer p.kill()
	select {
	case <-ctx.Done():
	case <-p.done:
		return 0, fmt.Errorf("stress-ng exited during the run: %s", out.last())
	}
	// Stopped before it has started its workers (a short run on a busy
	// machine), stress-ng dies of the signal without writing metrics; just
	// after, its workers have done nothing and its metrics leave the
	// stressor out. So a run that ends before the workers were started
	// waits for them and gives them workerGrace.
	late := !out.contains(stressNgStarted)
	for deadline := time.Now().Add(10 * time.Second); !out.contains(stressNgStarted) && time.Now().Before(deadline); {
		select {
		case <-p.done:
			return 0, fmt.Errorf("stress-ng exited during the run: %s", out.last())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if late {
		select {
		case <-p.done:
			return 0, fmt.Errorf("stress-ng exited during the run: %s", out.last())
		case <-time.After(workerGrace):
		}
	}
	if err := p.stop(10 * time.Second); err != nil {
		return 0, fmt.Errorf("stress-ng: %w: %s", err, out.last())
	}
	f, err := os.Open(yaml)
	if err != nil {
		return 0, fmt.Errorf("stress-ng wrote no metrics: %w: %s", err, out.last())
	}
	defer f.Close()
	return ParseStressNgOps(f, "cpu")
}

// ParseStressNgOps reads the bogo ops of one stressor from stress-ng's
// --yaml metrics:
//
//	metrics:
//	    - stressor: cpu
//	      bogo-ops: 3866
func ParseStressNgOps(r io.Reader, stressor string) (uint64, error) {
	sc := bufio.NewScanner(r)
	in, found := false, false
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "- ")), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.Trim(strings.TrimSpace(val), `'"`)
		switch {
		case key == "stressor":
			in = val == stressor
			found = found || in
		case in && key == "bogo-ops":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("stress-ng metrics: bogo-ops %q is not a count", val)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		// --metrics-brief leaves out a stressor none of whose workers
		// did any work (and none returned): they never got to run.
		return 0, fmt.Errorf("stress-ng metrics have no %s stressor: its workers never ran (a stalled machine?)", stressor)
	}
	return 0, fmt.Errorf("stress-ng metrics have no bogo-ops for %s", stressor)
}
