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

	"github.com/hotlane/hotlane/verify"
	"golang.org/x/sys/unix"
)

// Cyclictest runs cyclictest from Debian's rt-tests as a lane task: a
// measurement nobody here wrote. Its measuring threads wake every Interval
// on an absolute CLOCK_MONOTONIC timer, as our periodic task does, and do
// almost no work; cyclictest records each wake-up's lateness in a 1 µs
// histogram, which it writes (--histfile) when stopped with SIGINT.
//
// cyclictest starts SCHED_OTHER (no -p) and pins each measuring thread to
// a CPU. Once a measuring thread has set itself up (it first sleeps, within
// its first period), the bench lets it run on every CPU, like our periodic
// task, and gives it the variant's lane policy by thread id; the main
// thread, which only collects statistics, stays SCHED_OTHER like every
// other task. At the end the bench checks the policy is still in place.
type Cyclictest struct {
	// Path is the program; empty means "cyclictest" in $PATH.
	Path     string        `json:"path,omitempty"`
	Interval time.Duration `json:"interval_ns"`
	Threads  int           `json:"threads"`
	// Limit is the histogram's range (cyclictest -h, in µs); wake-ups at
	// least this late are counted as overflows, which the bench records
	// at the thread's exact maximum, so percentiles never read low.
	Limit time.Duration `json:"histogram_limit_ns"`
}

// DefaultCyclictestLimit is the histogram range unless told otherwise:
// wide enough for TCG's worst schedulers, 200k lines of output at most.
const DefaultCyclictestLimit = 200 * time.Millisecond

// CyclictestComm is the comm of cyclictest's threads, what a policy matches.
const CyclictestComm = "cyclictest"

// CyclictestResult is what one cyclictest run measured.
type CyclictestResult struct {
	// Lateness has every sample, at cyclictest's 1 µs resolution.
	Lateness verify.Histogram `json:"lateness"`
	// Overflows were beyond Limit (in Lateness at the maximum).
	Overflows uint64 `json:"overflows"`
	// Missed estimates the periods cyclictest skipped because it woke
	// after the next one was due: the periods that ended between the
	// threads' first sleep and SIGINT, less one for the ends, minus the
	// samples.
	Missed int `json:"missed"`
	// CPU is the measuring threads' CPU time.
	CPU time.Duration `json:"cpu_ns"`
	// TIDs are the measuring threads' ids, for the tracer's view.
	TIDs []int `json:"-"`
}

// Merge adds other's samples to r.
func (r *CyclictestResult) Merge(other *CyclictestResult) {
	r.Lateness.Merge(&other.Lateness)
	r.Overflows += other.Overflows
	r.Missed += other.Missed
	r.CPU += other.CPU
}

func (c Cyclictest) validate() error {
	switch {
	case c.Interval < 100*time.Microsecond || c.Interval > 10*time.Second:
		return fmt.Errorf("cyclictest interval %s must be 100us..10s", c.Interval)
	case c.Threads < 1 || c.Threads > MaxThreads:
		return fmt.Errorf("cyclictest threads %d must be 1..%d", c.Threads, MaxThreads)
	case c.Limit < time.Millisecond || c.Limit > 10*time.Second:
		return fmt.Errorf("cyclictest histogram limit %s must be 1ms..10s", c.Limit)
	}
	return nil
}

func (c Cyclictest) program() string {
	if c.Path == "" {
		return "cyclictest"
	}
	return c.Path
}

// Args are cyclictest's arguments for a run writing its histogram to
// histfile: quiet, no system tuning (no /dev/cpu_dma_latency), SCHED_OTHER.
func (c Cyclictest) Args(histfile string) []string {
	return []string{
		"--quiet", "--default-system",
		fmt.Sprintf("--interval=%d", c.Interval.Microseconds()),
		fmt.Sprintf("--threads=%d", c.Threads),
		fmt.Sprintf("--histogram=%d", c.Limit.Microseconds()),
		"--histfile=" + histfile,
	}
}

// Run runs cyclictest until ctx is done, with the lane policy on its
// measuring threads, and returns what it measured.
func (c Cyclictest) Run(ctx context.Context, lane LanePolicy) (CyclictestResult, error) {
	var res CyclictestResult
	if err := c.validate(); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "hotlane-cyclictest-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	histfile := filepath.Join(dir, "histogram")
	p, out, err := startProcess("", 0, append([]string{c.program()}, c.Args(histfile)...)...)
	if err != nil {
		return res, fmt.Errorf("start cyclictest: %w", err)
	}
	defer p.kill()
	started := time.Now()

	// Find the measuring threads: every thread but the main one.
	for {
		tids, _ := threadsOf(p.cmd.Process.Pid)
		if len(tids) >= c.Threads+1 {
			for _, t := range tids {
				if t != p.cmd.Process.Pid {
					res.TIDs = append(res.TIDs, t)
				}
			}
			break
		}
		if p.exited() {
			return res, fmt.Errorf("cyclictest exited at start: %s", out.last())
		}
		if time.Since(started) > 5*time.Second {
			return res, fmt.Errorf("cyclictest started %d of its %d threads within 5s", len(tids)-1, c.Threads)
		}
		time.Sleep(200 * time.Microsecond)
	}
	// cyclictest pins each measuring thread to one CPU and sets its
	// policy as the thread starts; wait until the thread first sleeps
	// (its setup is done), then let it run on every CPU, as our periodic
	// task does (SCHED_DEADLINE also requires that), and apply the lane.
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		return res, fmt.Errorf("cyclictest: read the bench's CPU affinity: %w", err)
	}
	for _, tid := range res.TIDs {
		if err := waitSleeping(tid, 5*time.Second); err != nil {
			return res, fmt.Errorf("cyclictest: %w", err)
		}
		if err := unix.SchedSetaffinity(tid, &cpus); err != nil {
			return res, fmt.Errorf("cyclictest: let thread %d run on every CPU: %w", tid, err)
		}
		if err := lane.Apply(tid, LaneTask{Period: c.Interval}); err != nil {
			return res, fmt.Errorf("cyclictest: %w", err)
		}
	}
	measuring := time.Now() // each thread is in its first period
	select {
	case <-ctx.Done():
	case <-p.done:
		return res, fmt.Errorf("cyclictest exited during the run: %s", out.last())
	}
	for _, tid := range res.TIDs {
		if d, err := threadCPU(tid); err == nil {
			res.CPU += d
		}
		if err := lane.Check(tid); err != nil {
			return res, fmt.Errorf("cyclictest changed its thread's scheduling during the run: %w", err)
		}
	}
	ran := time.Since(measuring)
	if err := p.stop(10 * time.Second); err != nil {
		return res, fmt.Errorf("cyclictest: %w: %s", err, out.last())
	}
	f, err := os.Open(histfile)
	if err != nil {
		return res, fmt.Errorf("cyclictest wrote no histogram: %w: %s", err, out.last())
	}
	defer f.Close()
	h, err := ParseCyclictestHistogram(f)
	if err != nil {
		return res, err
	}
	res.Lateness = *h.Lateness()
	for _, t := range h.Threads {
		res.Overflows += t.Overflows
		periods := int(ran/c.Interval) - 1
		res.Missed += max(periods-int(t.Total+t.Overflows), 0)
		if periods > 10 && t.Total+t.Overflows == 0 {
			return res, fmt.Errorf("cyclictest recorded no samples in %s", ran.Round(time.Millisecond))
		}
	}
	return res, nil
}

// waitSleeping waits until thread tid is asleep (state S).
func waitSleeping(tid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", tid))
		if err != nil {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
		if _, f, ok := parseStat(string(b)); ok && f[0] == "S" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("thread %d did not go to sleep within %s", tid, within)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// CyclictestHistogram is cyclictest's --histfile: per measuring thread a
// 1 µs histogram and cyclictest's own summary.
type CyclictestHistogram struct {
	Threads []CyclictestThread
}

// CyclictestThread is one measuring thread's histogram.
type CyclictestThread struct {
	// Counts maps a latency in µs to its samples (non-zero bins only).
	Counts map[uint64]uint64
	// Total counts the samples in the histogram; Overflows those beyond.
	Total, Overflows uint64
	// Min, Avg and Max are cyclictest's own figures (µs resolution; Max
	// includes the overflows).
	Min, Avg, Max time.Duration
}

// ParseCyclictestHistogram reads the histogram rt-tests' cyclictest (2.x)
// writes with -h/--histogram and --histfile:
//
//	# Histogram
//	000000 000000	000000
//	...
//	# Total: 000000197 000000199
//	# Min Latencies: 00040 00037
//	# Avg Latencies: 00143 00104
//	# Max Latencies: 08344 04011
//	# Histogram Overflows: 00003 00001
func ParseCyclictestHistogram(r io.Reader) (*CyclictestHistogram, error) {
	var (
		rows    [][]uint64 // bin, counts...
		summary = map[string][]uint64{}
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(text, "#"); ok {
			key, vals, ok := strings.Cut(rest, ":")
			key = strings.TrimSpace(key)
			switch key {
			case "Total", "Min Latencies", "Avg Latencies", "Max Latencies", "Histogram Overflows":
			default:
				continue // "# Histogram", "# Thread N: cycles of overflows", ...
			}
			if !ok {
				continue
			}
			nums, err := parseUints(strings.Fields(vals))
			if err != nil {
				return nil, fmt.Errorf("cyclictest histogram line %d: %s: %v", line, key, err)
			}
			summary[key] = nums
			continue
		}
		nums, err := parseUints(strings.Fields(text))
		if err != nil || len(nums) < 2 {
			return nil, fmt.Errorf("cyclictest histogram line %d: %q is not a bin and its counts", line, text)
		}
		rows = append(rows, nums)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read cyclictest histogram: %w", err)
	}
	totals, ok := summary["Total"]
	if !ok || len(totals) == 0 {
		return nil, errors.New("cyclictest histogram has no '# Total:' line: was it stopped before it wrote it?")
	}
	n := len(totals)
	h := &CyclictestHistogram{Threads: make([]CyclictestThread, n)}
	for i := range h.Threads {
		t := &h.Threads[i]
		t.Counts = map[uint64]uint64{}
		t.Total = totals[i]
		us := func(key string) time.Duration {
			if v := summary[key]; i < len(v) {
				return time.Duration(v[i]) * time.Microsecond
			}
			return 0
		}
		t.Min, t.Avg, t.Max = us("Min Latencies"), us("Avg Latencies"), us("Max Latencies")
		if v := summary["Histogram Overflows"]; i < len(v) {
			t.Overflows = v[i]
		}
	}
	for _, row := range rows {
		if len(row) < 1+n {
			return nil, fmt.Errorf("cyclictest histogram: bin %d has %d counts for %d threads", row[0], len(row)-1, n)
		}
		for i := range n {
			if c := row[1+i]; c > 0 {
				h.Threads[i].Counts[row[0]] += c
			}
		}
	}
	for i, t := range h.Threads {
		var sum uint64
		for _, c := range t.Counts {
			sum += c
		}
		if sum != t.Total {
			return nil, fmt.Errorf("cyclictest histogram: thread %d's bins hold %d samples but its total says %d", i, sum, t.Total)
		}
	}
	return h, nil
}

// Lateness merges the threads into one histogram in ns: a bin of b µs is
// recorded as b µs, as cyclictest reports it; overflows at the thread's
// maximum.
func (h *CyclictestHistogram) Lateness() *verify.Histogram {
	var out verify.Histogram
	for _, t := range h.Threads {
		for us, c := range t.Counts {
			out.RecordN(us*1000, c)
		}
		if t.Overflows > 0 {
			out.RecordN(uint64(t.Max), t.Overflows)
		}
	}
	return &out
}

func parseUints(fields []string) ([]uint64, error) {
	out := make([]uint64, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out[i] = v
	}
	return out, nil
}
