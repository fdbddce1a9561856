package workloads

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hotlane/hotlane/internal/jsonpos"
)

// A workload file describes a Mix in JSON:
//
//	{
//	  "periodic":  [{"comm": "infer", "rate_hz": 100, "compute": "2ms",
//	                 "threads": 1, "burst_every": 10, "burst_compute": "6ms"}],
//	  "hogs":      [{"comm": "hog", "threads": "2x"}],
//	  "messaging": [{"comm": "msg", "pairs": 2}]
//	}
//
// Durations use Go's syntax; a thread count may be a number or "Nx", N
// times the CPUs. Every generator is optional, but a workload needs one.
type fileSpec struct {
	Periodic []struct {
		Comm         string  `json:"comm"`
		RateHz       float64 `json:"rate_hz"`
		Compute      string  `json:"compute"`
		Threads      int     `json:"threads"`
		BurstEvery   int     `json:"burst_every"`
		BurstCompute string  `json:"burst_compute"`
	} `json:"periodic"`
	Hogs []struct {
		Comm    string      `json:"comm"`
		Threads threadCount `json:"threads"`
	} `json:"hogs"`
	Messaging []struct {
		Comm  string `json:"comm"`
		Pairs int    `json:"pairs"`
	} `json:"messaging"`
}

// threadCount is a number or "Nx" (N per CPU), resolved later.
type threadCount string

func (t *threadCount) UnmarshalJSON(b []byte) error {
	*t = threadCount(strings.Trim(string(b), `"`))
	return nil
}

func (t threadCount) resolve(ncpu int) (int, error) {
	s := string(t)
	if s == "" {
		return 0, fmt.Errorf("threads missing: give a number or \"Nx\" (N per CPU)")
	}
	per := strings.HasSuffix(s, "x")
	n, err := strconv.Atoi(strings.TrimSuffix(s, "x"))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("threads %q: give a positive number, or \"Nx\" for N per CPU", s)
	}
	if per {
		n *= ncpu
	}
	return n, nil
}

// MaxThreads bounds any one generator: a workload file is not a fork bomb.
const MaxThreads = 1024

// ParseWorkload reads a workload file's text; ncpu resolves "Nx" counts.
func ParseWorkload(name string, data []byte, ncpu int) (Mix, error) {
	var spec fileSpec
	if err := jsonpos.Decode(name, data, &spec); err != nil {
		return Mix{}, err
	}
	var m Mix
	bad := func(kind string, i int, format string, args ...any) error {
		return fmt.Errorf("%s: %s %d: %s", name, kind, i+1, fmt.Sprintf(format, args...))
	}
	dur := func(kind string, i int, field, v string, optional bool) (time.Duration, error) {
		if v == "" && optional {
			return 0, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, bad(kind, i, "%s %q is not a duration (use e.g. 2ms, 500us)", field, v)
		}
		return d, nil
	}
	for i, p := range spec.Periodic {
		if p.RateHz <= 0 || p.RateHz > 100000 {
			return Mix{}, bad("periodic", i, "rate_hz %g must be in (0, 100000]", p.RateHz)
		}
		compute, err := dur("periodic", i, "compute", p.Compute, false)
		if err != nil {
			return Mix{}, err
		}
		burst, err := dur("periodic", i, "burst_compute", p.BurstCompute, true)
		if err != nil {
			return Mix{}, err
		}
		per := Periodic{
			Comm: orDefault(p.Comm, "infer"), Period: time.Duration(float64(time.Second) / p.RateHz),
			Compute: compute, Threads: max(p.Threads, 1), BurstEvery: p.BurstEvery, BurstCompute: burst,
		}
		if err := per.validate(); err != nil {
			return Mix{}, bad("periodic", i, "%v", err)
		}
		if p.Threads < 0 || per.Threads > MaxThreads || len(per.Comm) > 15 {
			return Mix{}, bad("periodic", i, "threads must be 1..%d and comm at most 15 bytes", MaxThreads)
		}
		m.Periodic = append(m.Periodic, per)
	}
	for i, h := range spec.Hogs {
		n, err := h.Threads.resolve(ncpu)
		if err != nil {
			return Mix{}, bad("hogs", i, "%v", err)
		}
		if n > MaxThreads || len(h.Comm) > 15 {
			return Mix{}, bad("hogs", i, "at most %d threads and a comm of at most 15 bytes", MaxThreads)
		}
		m.Hogs = append(m.Hogs, Hogs{Comm: orDefault(h.Comm, "hog"), Threads: n})
	}
	for i, g := range spec.Messaging {
		if g.Pairs <= 0 || 2*g.Pairs > MaxThreads || len(g.Comm) > 15 {
			return Mix{}, bad("messaging", i, "pairs must be 1..%d and comm at most 15 bytes", MaxThreads/2)
		}
		m.Messaging = append(m.Messaging, Messaging{Comm: orDefault(g.Comm, "msg"), Pairs: g.Pairs})
	}
	if len(m.Periodic)+len(m.Hogs)+len(m.Messaging) == 0 {
		return Mix{}, fmt.Errorf(`%s: no generators; give at least one of "periodic", "hogs", "messaging"`, name)
	}
	return m, nil
}

// LoadWorkload reads a workload file.
func LoadWorkload(path string, ncpu int) (Mix, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Mix{}, fmt.Errorf("workload: %w", err)
	}
	return ParseWorkload(path, data, ncpu)
}

// DefaultMix is the seed's story: one inference task at 100 Hz computing
// 2 ms per frame against 2x CPU oversubscription by hogs.
func DefaultMix(ncpu int) Mix {
	return Mix{
		Periodic: []Periodic{{Comm: "infer", Period: 10 * time.Millisecond, Compute: 2 * time.Millisecond, Threads: 1}},
		Hogs:     []Hogs{{Comm: "hog", Threads: 2 * ncpu}},
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
