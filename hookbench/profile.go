package hookbench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/report"
)

// ProgramCost is one of hotlane's own programs, measured the two ways a
// program can be measured without touching the traced code: the kernel's
// run-time statistics and fentry/fexit on the program.
type ProgramCost struct {
	Program        string             `json:"program"`
	Stats          report.ProgramCost `json:"stats"`
	Outside        report.ProgramCost `json:"outside"`
	OutsideRefused string             `json:"outside_refused,omitempty"`
}

// profiler is fentry and fexit on one program, with their own map.
type profiler struct {
	maps  bpf.ProgprofMaps
	progs []*ebpf.Program // fentry, fexit
	links []link.Link
}

// attachProfiler loads progprof.bpf.c pointed at target, whose function
// (its name in the object it came from) is fn, and attaches it.
func attachProfiler(target *ebpf.Program, fn string) (_ *profiler, err error) {
	spec, err := bpf.LoadProgprof()
	if err != nil {
		return nil, fmt.Errorf("profiler object: %w", err)
	}
	var specs bpf.ProgprofProgramSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("profiler object: %w", err)
	}
	progs := []*ebpf.ProgramSpec{specs.ProfEnter, specs.ProfExit}
	for _, ps := range progs {
		ps.AttachTarget, ps.AttachTo = target, fn
	}
	p := &profiler{}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	err = spec.LoadAndAssign(&p.maps, nil)
	if err == nil {
		p.progs, err = loader.LoadPrograms(spec, ebpf.CollectionOptions{MapReplacements: loader.MapsByName(&p.maps)}, progs...)
	}
	if err != nil {
		// The reason is the same for either program, so the message
		// does not name the one that failed.
		perr := &profileError{err: err, msg: strings.NewReplacer("program prof_enter: ", "", "program prof_exit: ", "").Replace(err.Error())}
		return nil, fmt.Errorf("load fentry/fexit on the program: %w", perr)
	}
	for i, prog := range p.progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			return nil, fmt.Errorf("attach %s on the program: %w", progs[i].Name, err)
		}
		p.links = append(p.links, l)
	}
	return p, nil
}

// profileError is a load error with the program's name taken out; errors.Is
// still finds the errno.
type profileError struct {
	err error
	msg string
}

func (e *profileError) Error() string { return e.msg }
func (e *profileError) Unwrap() error { return e.err }

// cost is what the profiler has timed so far.
func (p *profiler) cost() (runs, totalNs uint64, err error) {
	var perCPU []bpf.ProgprofProf
	if err := p.maps.Prof.Lookup(uint32(0), &perCPU); err != nil {
		return 0, 0, fmt.Errorf("read profile: %w", err)
	}
	for _, c := range perCPU {
		runs += c.Runs
		totalNs += c.TotalNs
	}
	return runs, totalNs, nil
}

func (p *profiler) Close() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	loader.ClosePrograms(p.progs...)
	p.maps.Close()
	return errors.Join(errs...)
}

// Profile measures programs, keyed by their function names, while drive
// runs: once with the kernel's run-time statistics on, once with fentry
// and fexit on every program. drive is called twice and should make the
// same load both times.
func Profile(ctx context.Context, programs map[string]*ebpf.Program, drive func(context.Context) error) ([]ProgramCost, error) {
	names := slices.Sorted(maps.Keys(programs))
	out := make([]ProgramCost, len(names))
	for i, n := range names {
		out[i].Program = n
	}

	st, err := loader.EnableRunTimeStats()
	if err != nil {
		return nil, err
	}
	before, err := loader.Costs(programs, names...)
	if err != nil {
		st.Close()
		return nil, err
	}
	err = drive(ctx)
	after, cerr := loader.Costs(programs, names...)
	st.Close()
	if err = errors.Join(err, cerr); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Stats = report.ProgramCost{Program: names[i], Runs: after[i].Runs - before[i].Runs, Total: after[i].Total - before[i].Total}
	}

	profs := make([]*profiler, len(names))
	defer func() {
		for _, p := range profs {
			if p != nil {
				p.Close()
			}
		}
	}()
	for i, n := range names {
		out[i].Outside.Program = n
		if profs[i], err = attachProfiler(programs[n], n); err != nil {
			out[i].OutsideRefused = refusal(err)
		}
	}
	if err := drive(ctx); err != nil {
		return nil, err
	}
	for i, p := range profs {
		if p == nil {
			continue
		}
		runs, total, err := p.cost()
		if err != nil {
			return nil, err
		}
		out[i].Outside.Runs, out[i].Outside.Total = runs, time.Duration(total)
	}
	return out, nil
}
