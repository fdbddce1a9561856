package workloads

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/verify"
)

// A BenchRequest is what a bench command line asks for, as given:
// Variants and Bench check it and assemble the Bench to run. Its errors
// name the command's flags, for they are what the user has to change.
type BenchRequest struct {
	// Schedulers is the comma-separated list of variants; External are
	// the --scheduler NAME=COMMAND specs it may name.
	Schedulers string
	External   []string
	Variant    VariantOptions
	// Baseline is the variant the ratios are relative to; BaselineGiven
	// says the user chose it rather than leaving the default.
	Baseline      string
	BaselineGiven bool
	// Args are the arguments left after the flags: none are taken.
	Args []string
	// Workload is WorkloadDefault, a built-in workload's name or a
	// workload file; Period, Compute and Hogs shape the default one.
	Workload string
	Period   time.Duration
	Compute  time.Duration
	Hogs     int
	Programs Programs
	// Bound is the bound as written, its classless parts inference's;
	// "" checks none.
	Bound string
	// PolicyPath is hotlane's policy; "" is the built-in policy with
	// InferenceComms, or else the workload's lane comms.
	PolicyPath     string
	InferenceComms []string
	Duration       time.Duration
	Warmup         time.Duration
	Repeats        int
	EnableTimeout  time.Duration
	// Warn, if set, is told what the bench leaves out and runs anyway.
	Warn func(msg string)
}

// Programs are the outside programs a workload may run; a generator
// without a path of its own runs these.
type Programs struct {
	Cyclictest, StressNg, Hackbench, Perf, Sysbench, RtApp string
}

// Variants parses the variants to compare and checks the baseline is
// among them.
func (r BenchRequest) Variants() ([]Variant, error) {
	if len(r.Args) > 0 {
		return nil, fmt.Errorf("unexpected argument %q", r.Args[0])
	}
	opts := r.Variant
	for _, spec := range r.External {
		v, err := ParseScheduler(spec)
		if err != nil {
			return nil, err
		}
		opts.External = append(opts.External, v)
	}
	variants, err := ParseVariants(r.Schedulers, opts)
	if err != nil {
		return nil, err
	}
	// The default baseline may be left out of the list (no ratios then);
	// one asked for by name must be compared, or the run is for nothing.
	if r.BaselineGiven && !slices.ContainsFunc(variants, func(v Variant) bool { return v.Name == r.Baseline }) {
		return nil, fmt.Errorf("--baseline %s is not among the variants compared (%s): the ratios need it", r.Baseline, variantNames(variants))
	}
	return variants, nil
}

func variantNames(vs []Variant) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	return strings.Join(names, ", ")
}

// Bench builds the workload, the policy and the bounds, and assembles the
// bench of variants. It checks everything before anything starts: the
// workload's outside programs must be there, and the bounds' classes in
// the policy.
func (r BenchRequest) Bench(ctx context.Context, variants []Variant) (Bench, error) {
	mix, err := r.mix()
	if err != nil {
		return Bench{}, err
	}
	pol, err := r.policy(ctx, mix)
	if err != nil {
		return Bench{}, err
	}
	var bounds []verify.Bound
	if r.Bound != "" {
		if bounds, err = verify.ParseBounds(r.Bound, "inference"); err != nil {
			return Bench{}, err
		}
		for _, bd := range bounds {
			if _, ok := pol.Class(bd.Class); !ok {
				return Bench{}, fmt.Errorf("bound for unknown class %q (classes: %v)", bd.Class, pol.ClassNames())
			}
		}
	}
	return Bench{
		Variants: variants, Workload: mix, Policy: pol, Bounds: bounds,
		Warmup: r.Warmup, Duration: r.Duration, Repeats: r.Repeats, EnableTimeout: r.EnableTimeout,
	}, nil
}

// mix is the workload, its outside programs found.
func (r BenchRequest) mix() (Mix, error) {
	var mix Mix
	if r.Workload == WorkloadDefault {
		if r.Compute >= r.Period || r.Duration < 10*r.Period {
			return Mix{}, fmt.Errorf("need compute < period and a duration of at least 10 periods (got compute %s, period %s, duration %s)", r.Compute, r.Period, r.Duration)
		}
		mix = Mix{
			Periodic: []Periodic{{Comm: "infer", Period: r.Period, Compute: r.Compute}},
			Hogs:     []Hogs{{Comm: "hog", Threads: r.Hogs}},
		}
		if r.Programs.Cyclictest != "none" {
			if _, err := exec.LookPath(r.Programs.Cyclictest); err != nil {
				r.warn(fmt.Sprintf("%s not found: the outside view is left out (install rt-tests; in the VM add it with --add /usr/bin/cyclictest)", r.Programs.Cyclictest))
			} else {
				mix.Cyclictest = []Cyclictest{{Interval: r.Period, Threads: 1, Limit: DefaultCyclictestLimit}}
			}
		}
	} else {
		var err error
		if mix, err = LoadWorkload(r.Workload, runtime.NumCPU()); err != nil {
			return Mix{}, err
		}
	}
	if err := mix.CheckTasks(); err != nil {
		return Mix{}, err
	}
	if !mix.HasLane() {
		return Mix{}, fmt.Errorf("workload %s has no periodic task, no cyclictest and no decode server: the bench measures a lane", r.Workload)
	}
	return mix, r.Programs.find(&mix)
}

func (r BenchRequest) warn(msg string) {
	if r.Warn != nil {
		r.Warn(msg)
	}
}

// find gives each of mix's generators without a path of its own the
// program of p, and checks each is there: a workload that runs a program
// that is not is refused, not run without it.
func (p Programs) find(mix *Mix) error {
	for _, o := range []struct {
		paths          []*string
		name, pkg, def string
	}{
		{pathsOf(mix.Cyclictest, func(c *Cyclictest) *string { return &c.Path }), "cyclictest", "rt-tests", p.Cyclictest},
		{pathsOf(mix.StressNg, func(s *StressNg) *string { return &s.Path }), "stress-ng", "stress-ng", p.StressNg},
		{pathsOf(mix.Hackbench, func(h *Hackbench) *string { return &h.Path }), "hackbench", "rt-tests", p.Hackbench},
		{pathsOf(mix.PerfBench, func(b *PerfBench) *string { return &b.Path }), "perf", "linux-perf", p.Perf},
		{pathsOf(mix.Sysbench, func(s *Sysbench) *string { return &s.Path }), "sysbench", "sysbench", p.Sysbench},
		{pathsOf(mix.RtApp, func(r *RtApp) *string { return &r.Path }), "rt-app", "rt-app", p.RtApp},
	} {
		for _, path := range o.paths {
			if *path == "" {
				*path = o.def
			}
			if _, err := exec.LookPath(*path); err != nil {
				return fmt.Errorf("the workload runs %s, but %s is not found: install %s (in the VM: --add /usr/bin/%s, or --judges) or give --%s PATH", o.name, *path, o.pkg, o.name, o.name)
			}
		}
	}
	return nil
}

// pathsOf returns a pointer to each generator's program path.
func pathsOf[T any](gens []T, path func(*T) *string) []*string {
	out := make([]*string, len(gens))
	for i := range gens {
		out[i] = path(&gens[i])
	}
	return out
}

// policy is hotlane's policy for mix: the file given, else the built-in
// policy with the comms given or else mix's lane comms.
func (r BenchRequest) policy(ctx context.Context, mix Mix) (*policy.Policy, error) {
	if r.PolicyPath != "" {
		if len(r.InferenceComms) > 0 {
			return nil, errors.New("--policy and --inference-comm both given: put the comms in the policy file")
		}
		return policy.Load(ctx, r.PolicyPath)
	}
	comms := r.InferenceComms
	if len(comms) == 0 {
		comms = mix.LaneComms()
	}
	pol := policy.Default(comms...)
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	return pol, nil
}
