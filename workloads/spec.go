package workloads

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hotlane/hotlane/internal/infile"
	"github.com/hotlane/hotlane/internal/jsonpos"
)

// A workload file describes a Mix in JSON:
//
//	{
//	  "periodic":  [{"comm": "infer", "rate_hz": 100, "compute": "2ms",
//	                 "threads": 1, "burst_every": 10, "burst_compute": "6ms",
//	                 "device": "/dev/full"}],
//	  "hogs":      [{"comm": "hog", "threads": "2x"}],
//	  "messaging": [{"comm": "msg", "pairs": 2}],
//	  "cyclictest": [{"rate_hz": 100, "threads": 1, "histogram_limit": "200ms"}],
//	  "stress_ng": [{"cpu": "2x", "method": "int64", "switch": 1, "futex": 1, "pipe": 1}],
//	  "hackbench": [{"groups": 1, "fds": 4}],
//	  "perf_bench": [{"bench": "messaging", "groups": 1, "loops": 5, "threads": true}, {"bench": "pipe", "loops": 20}],
//	  "sysbench": [{"test": "threads", "threads": "1x", "run_time": "1s", "yields": 100}],
//	  "rt_app": [{"periodic": 2, "rate_hz": 100, "compute": "1ms",
//	              "chain": 3, "chain_rate_hz": 50, "chain_compute": "1ms"}],
//	  "request_server": [{"comm": "rpc", "message_threads": 2, "workers": "1x",
//	                      "rate_hz": 1000, "compute": "200us", "sleep": "500us"}],
//	  "decode": [{"comm": "infer-decode", "streams": 1, "tokens": 64, "prefill": "5ms",
//	              "host": "300us", "device_time": "2ms", "device": "/dev/full",
//	              "helper": "50us", "helper_comm": "detok"}]
//	}
//
// Durations use Go's syntax; a thread count may be a number or "Nx", N
// times the CPUs. Every generator is optional, but a workload needs one.
// cyclictest and hackbench (rt-tests), stress-ng, and the judges perf
// (linux-perf), sysbench and rt-app are outside programs, found in $PATH
// unless "path" is given. A request server's fields all have defaults, and
// so have a decode server's (those above): "device": "none" leaves out
// its ioctl, "helper": "0s" its helper threads (see Decode).
type fileSpec struct {
	Periodic []struct {
		Comm         string  `json:"comm"`
		RateHz       float64 `json:"rate_hz"`
		Compute      string  `json:"compute"`
		Threads      int     `json:"threads"`
		BurstEvery   int     `json:"burst_every"`
		BurstCompute string  `json:"burst_compute"`
		Device       string  `json:"device"`
	} `json:"periodic"`
	Hogs []struct {
		Comm    string      `json:"comm"`
		Threads threadCount `json:"threads"`
	} `json:"hogs"`
	Messaging []struct {
		Comm  string `json:"comm"`
		Pairs int    `json:"pairs"`
	} `json:"messaging"`
	Cyclictest []struct {
		Path           string  `json:"path"`
		RateHz         float64 `json:"rate_hz"`
		Threads        int     `json:"threads"`
		HistogramLimit string  `json:"histogram_limit"`
	} `json:"cyclictest"`
	StressNg []struct {
		Path   string      `json:"path"`
		CPU    threadCount `json:"cpu"`
		Method string      `json:"method"`
		Switch threadCount `json:"switch"`
		Futex  threadCount `json:"futex"`
		Pipe   threadCount `json:"pipe"`
	} `json:"stress_ng"`
	Hackbench []struct {
		Path   string `json:"path"`
		Groups int    `json:"groups"`
		Fds    int    `json:"fds"`
	} `json:"hackbench"`
	PerfBench []struct {
		Path    string `json:"path"`
		Bench   string `json:"bench"`
		Groups  int    `json:"groups"`
		Loops   int    `json:"loops"`
		Threads bool   `json:"threads"`
	} `json:"perf_bench"`
	Sysbench []struct {
		Path    string      `json:"path"`
		Test    string      `json:"test"`
		Threads threadCount `json:"threads"`
		RunTime string      `json:"run_time"`
		Yields  int         `json:"yields"`
	} `json:"sysbench"`
	RtApp []struct {
		Path          string  `json:"path"`
		Periodic      int     `json:"periodic"`
		RateHz        float64 `json:"rate_hz"`
		Compute       string  `json:"compute"`
		Chain         int     `json:"chain"`
		ChainRateHz   float64 `json:"chain_rate_hz"`
		ChainCompute  string  `json:"chain_compute"`
		CalibrationNs int     `json:"calibration_ns"`
	} `json:"rt_app"`
	RequestServer []struct {
		Comm       string      `json:"comm"`
		Messengers int         `json:"message_threads"`
		Workers    threadCount `json:"workers"`
		RateHz     float64     `json:"rate_hz"`
		Compute    string      `json:"compute"`
		Sleep      string      `json:"sleep"`
	} `json:"request_server"`
	Decode []struct {
		Comm       string      `json:"comm"`
		Streams    threadCount `json:"streams"`
		Tokens     int         `json:"tokens"`
		Prefill    string      `json:"prefill"`
		Host       string      `json:"host"`
		DeviceTime string      `json:"device_time"`
		Device     string      `json:"device"`
		Helper     string      `json:"helper"`
		HelperComm string      `json:"helper_comm"`
	} `json:"decode"`
}

// threadCount is a number or "Nx" (N per CPU), resolved later.
type threadCount string

func (t *threadCount) UnmarshalJSON(b []byte) error {
	*t = threadCount(strings.Trim(string(b), `"`))
	return nil
}

// resolveOr is resolve, with def for a count not given.
func (t threadCount) resolveOr(ncpu, def int) (int, error) {
	if t == "" {
		return def, nil
	}
	return t.resolve(ncpu)
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

// MaxThreads bounds any one generator, and MaxTasks a whole workload's
// threads and processes (Mix.Tasks), however many generators it lists: a
// workload file is not a fork bomb.
const (
	MaxThreads = 1024
	MaxTasks   = 4096
)

// MaxWorkloadSize caps a workload file: a few hundred bytes of JSON.
const MaxWorkloadSize = 1 << 20

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
		if maxHz := float64(time.Second / MinPeriod); p.RateHz <= 0 || p.RateHz > maxHz {
			return Mix{}, bad("periodic", i, "rate_hz %g must be in (0, %g]", p.RateHz, maxHz)
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
			Device: p.Device,
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
	for i, c := range spec.Cyclictest {
		if c.RateHz < 0.1 || c.RateHz > 10000 {
			return Mix{}, bad("cyclictest", i, "rate_hz %g must be in [0.1, 10000]", c.RateHz)
		}
		limit, err := dur("cyclictest", i, "histogram_limit", c.HistogramLimit, true)
		if err != nil {
			return Mix{}, err
		}
		ct := Cyclictest{Path: c.Path, Interval: time.Duration(float64(time.Second) / c.RateHz).Round(time.Microsecond),
			Threads: max(c.Threads, 1), Limit: limit}
		if ct.Limit == 0 {
			ct.Limit = DefaultCyclictestLimit
		}
		if err := ct.validate(); err != nil || c.Threads < 0 {
			return Mix{}, bad("cyclictest", i, "%v", errors.Join(err, errIf(c.Threads < 0, "threads must be positive")))
		}
		m.Cyclictest = append(m.Cyclictest, ct)
	}
	for i, g := range spec.StressNg {
		sn := StressNg{Path: g.Path, Method: orDefault(g.Method, DefaultStressMethod)}
		for _, c := range []struct {
			name  string
			count threadCount
			n     *int
		}{{"cpu", g.CPU, &sn.CPU}, {"switch", g.Switch, &sn.Switch}, {"futex", g.Futex, &sn.Futex}, {"pipe", g.Pipe, &sn.Pipe}} {
			n, err := c.count.resolveOr(ncpu, 0)
			if err != nil {
				return Mix{}, bad("stress_ng", i, "%s: %v", c.name, err)
			}
			*c.n = n
		}
		if err := sn.validate(); err != nil {
			return Mix{}, bad("stress_ng", i, "%v", err)
		}
		m.StressNg = append(m.StressNg, sn)
	}
	for i, h := range spec.Hackbench {
		if h.Groups < 0 || h.Fds < 0 {
			return Mix{}, bad("hackbench", i, "groups and fds must be positive (absent: %d and %d)", DefaultHackbenchGroups, DefaultHackbenchFds)
		}
		hb := Hackbench{Path: h.Path, Groups: h.Groups, Fds: h.Fds}
		if hb.Groups == 0 {
			hb.Groups = DefaultHackbenchGroups
		}
		if hb.Fds == 0 {
			hb.Fds = DefaultHackbenchFds
		}
		if err := hb.validate(); err != nil {
			return Mix{}, bad("hackbench", i, "%v", err)
		}
		m.Hackbench = append(m.Hackbench, hb)
	}
	for i, p := range spec.PerfBench {
		pb := PerfBench{Path: p.Path, Bench: p.Bench, Groups: p.Groups, Loops: p.Loops, Threads: p.Threads}
		if pb.Groups == 0 && pb.Bench == PerfMessaging {
			pb.Groups = DefaultPerfGroups
		}
		if pb.Loops == 0 {
			pb.Loops = map[string]int{PerfMessaging: DefaultPerfMessagingLoops, PerfPipe: DefaultPerfPipeLoops}[pb.Bench]
		}
		if err := pb.validate(); err != nil {
			return Mix{}, bad("perf_bench", i, "%v", err)
		}
		m.PerfBench = append(m.PerfBench, pb)
	}
	for i, g := range spec.Sysbench {
		n, err := g.Threads.resolveOr(ncpu, ncpu)
		if err != nil {
			return Mix{}, bad("sysbench", i, "%v", err)
		}
		sb := Sysbench{Path: g.Path, Test: g.Test, Threads: n, RunTime: DefaultSysbenchRunTime, Yields: g.Yields}
		if g.RunTime != "" {
			if sb.RunTime, err = dur("sysbench", i, "run_time", g.RunTime, false); err != nil {
				return Mix{}, err
			}
		}
		if err := sb.validate(); err != nil {
			return Mix{}, bad("sysbench", i, "%v", err)
		}
		m.Sysbench = append(m.Sysbench, sb)
	}
	for i, r := range spec.RtApp {
		ra := RtApp{Path: r.Path, Periodic: r.Periodic, Chain: r.Chain, Calibration: r.CalibrationNs}
		period := func(field string, hz float64, n int) (time.Duration, error) {
			if n == 0 && hz == 0 {
				return 0, nil
			}
			if hz <= 0 || hz > 10000 {
				return 0, bad("rt_app", i, "%s %g must be in (0, 10000]", field, hz)
			}
			return time.Duration(float64(time.Second) / hz).Round(time.Microsecond), nil
		}
		var err error
		if ra.Period, err = period("rate_hz", r.RateHz, r.Periodic); err != nil {
			return Mix{}, err
		}
		if ra.ChainPeriod, err = period("chain_rate_hz", r.ChainRateHz, r.Chain); err != nil {
			return Mix{}, err
		}
		if ra.Compute, err = dur("rt_app", i, "compute", r.Compute, r.Periodic == 0); err != nil {
			return Mix{}, err
		}
		if ra.ChainCompute, err = dur("rt_app", i, "chain_compute", r.ChainCompute, r.Chain == 0); err != nil {
			return Mix{}, err
		}
		if err := ra.validate(); err != nil {
			return Mix{}, bad("rt_app", i, "%v", err)
		}
		m.RtApp = append(m.RtApp, ra)
	}
	for i, r := range spec.RequestServer {
		rs := DefaultRequestServer(ncpu)
		var err error
		if rs.Workers, err = r.Workers.resolveOr(ncpu, rs.Workers); err != nil {
			return Mix{}, bad("request_server", i, "workers: %v", err)
		}
		rs.Comm = orDefault(r.Comm, rs.Comm)
		if r.Messengers != 0 {
			rs.Messengers = r.Messengers
		}
		if r.RateHz != 0 {
			rs.RateHz = r.RateHz
		}
		if r.Compute != "" {
			if rs.Compute, err = dur("request_server", i, "compute", r.Compute, false); err != nil {
				return Mix{}, err
			}
		}
		if r.Sleep != "" {
			if rs.Sleep, err = dur("request_server", i, "sleep", r.Sleep, false); err != nil {
				return Mix{}, err
			}
		}
		if err := rs.validate(); err != nil {
			return Mix{}, bad("request_server", i, "%v", err)
		}
		m.RequestServers = append(m.RequestServers, rs)
	}
	for i, r := range spec.Decode {
		d := DefaultDecode()
		var err error
		if d.Streams, err = r.Streams.resolveOr(ncpu, d.Streams); err != nil {
			return Mix{}, bad("decode", i, "streams: %v", err)
		}
		d.Comm = orDefault(r.Comm, d.Comm)
		d.HelperComm = orDefault(r.HelperComm, d.HelperComm)
		if r.Tokens < 0 {
			return Mix{}, bad("decode", i, "tokens %d must be positive (absent: %d)", r.Tokens, DefaultDecodeTokens)
		}
		if r.Tokens != 0 {
			d.Tokens = r.Tokens
		}
		switch r.Device {
		case "":
		case "none":
			d.Device = ""
		default:
			d.Device = r.Device
		}
		for _, f := range []struct {
			field, v string
			d        *time.Duration
		}{{"prefill", r.Prefill, &d.Prefill}, {"host", r.Host, &d.Host}, {"device_time", r.DeviceTime, &d.DeviceTime}, {"helper", r.Helper, &d.Helper}} {
			if f.v == "" {
				continue
			}
			if *f.d, err = dur("decode", i, f.field, f.v, false); err != nil {
				return Mix{}, err
			}
		}
		if err := d.validate(); err != nil {
			return Mix{}, bad("decode", i, "%v", err)
		}
		m.Decode = append(m.Decode, d)
	}
	if len(m.Periodic)+len(m.Hogs)+len(m.Messaging)+len(m.Cyclictest)+len(m.StressNg)+len(m.Hackbench)+
		len(m.PerfBench)+len(m.Sysbench)+len(m.RtApp)+len(m.RequestServers)+len(m.Decode) == 0 {
		return Mix{}, fmt.Errorf(`%s: no generators; give at least one of "periodic", "hogs", "messaging", "cyclictest", "stress_ng", "hackbench", "perf_bench", "sysbench", "rt_app", "request_server", "decode"`, name)
	}
	if err := m.CheckTasks(); err != nil {
		return Mix{}, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

func errIf(cond bool, msg string) error {
	if cond {
		return errors.New(msg)
	}
	return nil
}

// Built-in workload names, accepted where a workload file is.
const (
	// WorkloadDefault is DefaultMix: our periodic task over our hogs.
	WorkloadDefault = "default"
	// WorkloadCyclictest is CyclictestScenario: outside tools only.
	WorkloadCyclictest = "cyclictest"
	// WorkloadJudges is JudgesMix: our periodic task beside every outside
	// judge and a request server.
	WorkloadJudges = "judges"
	// WorkloadRequestServer is RequestServerMix: our periodic task beside
	// a request server and CPU hogs.
	WorkloadRequestServer = "request-server"
	// WorkloadDecode is DecodeMix: an inference server's decode loop over
	// CPU hogs.
	WorkloadDecode = "decode"
)

// BuiltinWorkloads lists the built-in workload names.
var BuiltinWorkloads = []string{WorkloadDefault, WorkloadCyclictest, WorkloadJudges, WorkloadRequestServer, WorkloadDecode}

// BuiltinWorkload returns a built-in workload by name.
func BuiltinWorkload(name string, ncpu int) (Mix, bool) {
	switch name {
	case WorkloadDefault:
		return DefaultMix(ncpu), true
	case WorkloadCyclictest:
		return CyclictestScenario(ncpu), true
	case WorkloadJudges:
		return JudgesMix(ncpu), true
	case WorkloadRequestServer:
		return RequestServerMix(ncpu), true
	case WorkloadDecode:
		return DecodeMix(ncpu), true
	}
	return Mix{}, false
}

// JudgesMix is the whole machine judged from outside: the inference task
// at 100 Hz computing 2 ms (the lane) beside stress-ng's CPU workers (one
// per four CPUs) and its switch, futex and pipe stressors, perf bench
// sched messaging (in threads) and pipe, sysbench threads (two threads)
// and cpu (one per four CPUs), rt-app's periodic tasks and chain
// (DefaultRtApp) and a request server (DefaultRequestServer): the CPUs
// half busy with work that never sleeps, and everything else waking all
// the time. Every judge's figure is its own; the bench sets them beside
// EEVDF's.
//
// The sizes suit an emulated guest too, where a vCPU runs tens of times
// slower than a host CPU and process start-up is slower still: perf's
// messaging in processes took 0.8 s a run on an idle 2-CPU guest, in
// threads 0.1 s.
func JudgesMix(ncpu int) Mix {
	quarter := max(ncpu/4, 1)
	return Mix{
		Periodic: []Periodic{{Comm: "infer", Period: 10 * time.Millisecond, Compute: 2 * time.Millisecond, Threads: 1}},
		StressNg: []StressNg{{CPU: quarter, Method: DefaultStressMethod, Switch: 1, Futex: 1, Pipe: 1}},
		PerfBench: []PerfBench{{Bench: PerfMessaging, Groups: DefaultPerfGroups, Loops: DefaultPerfMessagingLoops, Threads: true},
			{Bench: PerfPipe, Loops: DefaultPerfPipeLoops}},
		Sysbench: []Sysbench{{Test: SysbenchThreads, Threads: 2, RunTime: DefaultSysbenchRunTime},
			{Test: SysbenchCPU, Threads: quarter, RunTime: DefaultSysbenchRunTime}},
		RtApp:          []RtApp{DefaultRtApp()},
		RequestServers: []RequestServer{DefaultRequestServer(ncpu)},
	}
}

// RequestServerMix is a request server (DefaultRequestServer) beside the
// inference task at 100 Hz computing 2 ms, over a CPU hog per CPU: what
// an RPC or tokenizer service next to the lane gets.
func RequestServerMix(ncpu int) Mix {
	return Mix{
		Periodic:       []Periodic{{Comm: "infer", Period: 10 * time.Millisecond, Compute: 2 * time.Millisecond, Threads: 1}},
		Hogs:           []Hogs{{Comm: "hog", Threads: ncpu}},
		RequestServers: []RequestServer{DefaultRequestServer(ncpu)},
	}
}

// DecodeMix is an inference server's decode loop (DefaultDecode: one
// stream of 64-token requests, 300 us of host work and an ioctl on
// /dev/full per token, 2 ms on the device) with its detokenizer, under CPU
// hogs at 2x the CPUs: the figures an inference user reads (tokens per
// second, time to first token, inter-token latency) under contention.
func DecodeMix(ncpu int) Mix {
	return Mix{
		Decode: []Decode{DefaultDecode()},
		Hogs:   []Hogs{{Comm: "hog", Threads: 2 * ncpu}},
	}
}

// CyclictestScenario is the outside-tool scenario: cyclictest at 100 Hz
// (negligible compute) as the lane, under 2x CPU oversubscription by
// stress-ng CPU workers (stress-ng --cpu 2N). Both are tools nobody here
// wrote; the lane is cyclictest's measuring thread.
func CyclictestScenario(ncpu int) Mix {
	return Mix{
		Cyclictest: []Cyclictest{{Interval: 10 * time.Millisecond, Threads: 1, Limit: DefaultCyclictestLimit}},
		StressNg:   []StressNg{{CPU: 2 * ncpu, Method: DefaultStressMethod}},
	}
}

// LoadWorkload reads a workload: a built-in name (BuiltinWorkloads) or a
// workload file, a regular file of at most MaxWorkloadSize bytes (a FIFO
// or a device is refused at once).
func LoadWorkload(path string, ncpu int) (Mix, error) {
	if !strings.ContainsAny(path, "/.") {
		if m, ok := BuiltinWorkload(path, ncpu); ok {
			return m, nil
		}
		if _, err := os.Stat(path); err != nil {
			return Mix{}, fmt.Errorf("workload %q is neither a built-in (%s) nor a file", path, strings.Join(BuiltinWorkloads, ", "))
		}
	}
	data, err := infile.Read("workload", path, MaxWorkloadSize)
	if err != nil {
		return Mix{}, err
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
