package workloads

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
)

// ScenarioConfig configures RunCyclictestScenario.
type ScenarioConfig struct {
	// Variants are variant names (e.g. eevdf, eevdf+fifo, eevdf+nice-20,
	// hotlane); Options resolves them (scx_* paths, FIFO priority).
	Variants []string
	Options  VariantOptions
	// Policy is hotlane's policy; nil means the default policy with
	// cyclictest's comm as the inference class.
	Policy            *policy.Policy
	Warmup, Duration  time.Duration
	Repeats           int
	CyclictestPath    string // empty: cyclictest in $PATH
	StressNgPath      string // empty: stress-ng in $PATH
	EnableTimeout     time.Duration
	Progress          io.Writer
	SkipUnrunnable    bool // skip variants this host cannot run instead of failing
	CyclictestRateHz  float64
	StressNgPerCPU    int
	CyclictestThreads int
}

// RunCyclictestScenario runs the outside-tool scenario (CyclictestScenario:
// cyclictest at 100 Hz as the lane, stress-ng --cpu 2N as background)
// under each variant in this boot, and returns the lane latency cyclictest
// itself measured per variant (P50, P99, ... of report.Latency), with the
// whole report. Variants that failed are absent from the map and named in
// the report. Call it as root inside the sched_ext VM, with cyclictest and
// stress-ng added to the guest.
func RunCyclictestScenario(ctx context.Context, cfg ScenarioConfig) (map[string]report.Latency, *Report, error) {
	mix := CyclictestScenario(runtime.NumCPU())
	mix.Cyclictest[0].Path = cfg.CyclictestPath
	mix.StressNg[0].Path = cfg.StressNgPath
	if cfg.CyclictestRateHz > 0 {
		mix.Cyclictest[0].Interval = time.Duration(float64(time.Second) / cfg.CyclictestRateHz).Round(time.Microsecond)
	}
	if cfg.CyclictestThreads > 0 {
		mix.Cyclictest[0].Threads = cfg.CyclictestThreads
	}
	if cfg.StressNgPerCPU > 0 {
		mix.StressNg[0].CPU = cfg.StressNgPerCPU * runtime.NumCPU()
	}
	list := ""
	for i, v := range cfg.Variants {
		if i > 0 {
			list += ","
		}
		list += v
	}
	variants, err := ParseVariants(list, cfg.Options)
	if err != nil {
		return nil, nil, err
	}
	run, skipped := Preflight(variants, DetectHost())
	if len(skipped) > 0 && !cfg.SkipUnrunnable {
		return nil, nil, fmt.Errorf("%s cannot run here: %s", skipped[0].Name, skipped[0].Reason)
	}
	pol := cfg.Policy
	if pol == nil {
		pol = policy.Default(mix.LaneComms()...)
	}
	b := Bench{
		Variants: run, Workload: mix, Policy: pol,
		Warmup: cfg.Warmup, Duration: cfg.Duration, Repeats: cfg.Repeats,
		EnableTimeout: cfg.EnableTimeout, Progress: cfg.Progress,
	}
	started := time.Now()
	runs, err := b.Run(ctx)
	if err != nil {
		return nil, nil, err
	}
	rep := NewReport(started, runs, skipped, EEVDF, nil)
	return CyclictestLatencies(rep.Runs), rep, nil
}

// CyclictestLatencies returns, per variant that ran to the end, the lane
// latency in cyclictest's own view (its histogram, all repeats merged).
func CyclictestLatencies(runs []Run) map[string]report.Latency {
	out := map[string]report.Latency{}
	for _, r := range runs {
		if r.Failure != "" {
			continue
		}
		if h := r.LaneView(ViewOutside); h.Count() > 0 {
			out[r.Scheduler] = report.Summarize(h)
		}
	}
	return out
}
