package workloads

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/errtest"
	"github.com/hotlane/hotlane/policy"
)

func TestBenchRequestVariants(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  BenchRequest
		want string // in the error; "" for none
	}{
		{"the default baseline may be left out", BenchRequest{Schedulers: HotlaneName, Baseline: EEVDF}, ""},
		{"a baseline asked for is compared", BenchRequest{Schedulers: EEVDF + "," + HotlaneName, Baseline: EEVDF, BaselineGiven: true}, ""},
		{"a baseline asked for but not compared", BenchRequest{Schedulers: HotlaneName, Baseline: EEVDF, BaselineGiven: true},
			"--baseline eevdf is not among the variants compared (hotlane)"},
		{"a scheduler of one's own", BenchRequest{Schedulers: "rusty", External: []string{"rusty=/usr/bin/scx_rusty"}, Baseline: "rusty", BaselineGiven: true}, ""},
		{"a scheduler without a command", BenchRequest{Schedulers: EEVDF, External: []string{"rusty"}}, `--scheduler "rusty": write NAME=COMMAND`},
		{"an argument left over", BenchRequest{Schedulers: EEVDF, Args: []string{"now"}}, `unexpected argument "now"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.req.Variants(); !errtest.Says(err, tt.want) {
				t.Errorf("Variants() = %v, want %q", err, tt.want)
			}
		})
	}
}

// defaultBench is a request for the default workload that passes.
func defaultBench() BenchRequest {
	return BenchRequest{
		Workload: WorkloadDefault, Period: 10 * time.Millisecond, Compute: 2 * time.Millisecond, Hogs: 3,
		Duration: time.Second, Warmup: time.Second, Repeats: 2, Bound: "inference:p99<=5ms",
		Programs: Programs{Cyclictest: "none"},
	}
}

func TestBenchRequestBench(t *testing.T) {
	ctx := context.Background()
	variants := []Variant{{Name: EEVDF}}
	b, err := defaultBench().Bench(ctx, variants)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Variants) != 1 || len(b.Workload.Periodic) != 1 || b.Workload.Hogs[0].Threads != 3 || len(b.Workload.Cyclictest) != 0 ||
		b.Repeats != 2 || len(b.Bounds) != 1 || b.Bounds[0].Class != "inference" {
		t.Errorf("Bench() = %+v; want the default workload, 3 hogs, no cyclictest, 2 repeats, inference's bound", b)
	}
	// The built-in policy's lane is the workload's own comms.
	if i, ok := b.Policy.Class("inference"); !ok || !slices.Contains(b.Policy.Classes[i].Match, policy.Matcher{CommPrefix: "infer"}) {
		t.Errorf("policy %v: want infer in the inference class", b.Policy.ClassNames())
	}
}

func TestBenchRequestWarnsWithoutCyclictest(t *testing.T) {
	req := defaultBench()
	req.Programs.Cyclictest = "/nonexistent/cyclictest"
	var warned []string
	req.Warn = func(msg string) { warned = append(warned, msg) }
	b, err := req.Bench(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Workload.Cyclictest) != 0 || len(warned) != 1 || !strings.Contains(warned[0], "/nonexistent/cyclictest not found: the outside view is left out") {
		t.Errorf("cyclictest %v, warned %q; want none run and one warning", b.Workload.Cyclictest, warned)
	}
}

func TestBenchRequestRefuses(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*BenchRequest)
		want   string
	}{
		{"compute not below the period", func(r *BenchRequest) { r.Compute = r.Period }, "need compute < period"},
		{"fewer than 10 periods", func(r *BenchRequest) { r.Duration = 5 * r.Period }, "a duration of at least 10 periods"},
		{"a policy and comms", func(r *BenchRequest) { r.PolicyPath, r.InferenceComms = "policy.json", []string{"x"} },
			"--policy and --inference-comm both given"},
		{"a bound on a class the policy lacks", func(r *BenchRequest) { r.Bound = "batch:p99<=1ms" }, `bound for unknown class "batch"`},
		{"a bad bound", func(r *BenchRequest) { r.Bound = "inference:p99<=abc" }, `"abc" is not a duration`},
		{"a judge that is not there", func(r *BenchRequest) {
			r.Workload = WorkloadJudges
			r.Programs = Programs{Cyclictest: "sh", StressNg: "sh", Hackbench: "sh", Perf: "/nonexistent/perf", Sysbench: "sh", RtApp: "sh"}
		}, "the workload runs perf, but /nonexistent/perf is not found: install linux-perf"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := defaultBench()
			tt.change(&req)
			if _, err := req.Bench(context.Background(), nil); !errtest.Says(err, tt.want) {
				t.Errorf("Bench() = %v, want %q", err, tt.want)
			}
		})
	}
}
