package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hotlane/hotlane/internal/infile"
	"github.com/hotlane/hotlane/policy"
)

// bigPrealloc is the kernel memory a request may preallocate before the
// command says how much, even when quiet: the default per-task table
// (about 16 MiB) stays below it.
const bigPrealloc = 64 << 20

// A Request is what a verify command line asks for, as given: Validate
// checks how its parts go together, Options loads the policy and
// assembles what Run takes. Its errors name the command's flags, for they
// are what the user has to change.
type Request struct {
	// PolicyPath is the policy file; "" is the built-in policy with
	// InferenceComms as its inference comm prefixes.
	PolicyPath     string
	InferenceComms []string
	// Bound is the bound as written; "" checks none.
	Bound string
	// Duration of the run; DurationGiven says the user chose it rather
	// than leaving the default.
	Duration      time.Duration
	DurationGiven bool
	// Served says the metrics are served while it runs: without a
	// duration given that is a service, run until stopped.
	Served bool
	// The tracer's filters and settings; TopTasks above 0 keeps a
	// histogram per task, for at most MaxTasks tasks.
	PID             int
	TIDs            []uint32
	Comm            string
	TopTasks        int
	MaxTasks        int
	Hook            string
	RingBufferBytes int
	NoExplain       bool
	ExtCallbacks    bool
	WaitOnly        bool
	// OnViolation asks to run Args, the command after --, for each
	// violation, at most OnViolationPerSecond a second.
	OnViolation          bool
	Args                 []string
	OnViolationPerSecond int
	StopOnViolation      bool
	// ViolationFlags are the flags given that act on violations (trace,
	// plot, on-violation, stop-on-violation): each needs a bound.
	ViolationFlags []string
	// Log, if set, receives the progress and violation lines, at most
	// ViolationLinesPerSecond of the latter.
	Log                     io.Writer
	ViolationLinesPerSecond int
	// Intervals, if set, receives a line per class every Interval.
	Interval  time.Duration
	Intervals io.Writer
}

// Validate checks what can be checked before the policy is loaded: the
// command to run on violations and the arguments left over.
func (r Request) Validate() error {
	switch {
	case r.OnViolation && len(r.Args) == 0:
		return errors.New("--on-violation needs the command after --, e.g. --on-violation -- logger -t hotlane violation")
	case r.OnViolation:
		if _, err := exec.LookPath(r.Args[0]); err != nil {
			return fmt.Errorf("--on-violation: %w", err)
		}
	case len(r.Args) > 0:
		return fmt.Errorf("unexpected argument %q (a command to run on each violation goes after --on-violation --)", r.Args[0])
	}
	return nil
}

// duration is how long the run lasts: a served run without a duration
// given is a service, until stopped.
func (r Request) duration() time.Duration {
	if r.Served && !r.DurationGiven {
		return 0
	}
	return r.Duration
}

// Options loads and compiles the policy, parses the bound against it and
// assembles the options Run takes.
func (r Request) Options(ctx context.Context) (Options, error) {
	p, err := r.policy(ctx)
	if err != nil {
		return Options{}, err
	}
	table, err := p.Compile("")
	if err != nil {
		return Options{}, err
	}
	tracer := TracerConfig{
		Table: table, FilterTGID: uint32(r.PID), FilterTIDs: r.TIDs, FilterComm: r.Comm,
		PerTask: r.TopTasks > 0, MaxTasks: r.MaxTasks, Hook: r.Hook, RingBufferBytes: r.RingBufferBytes,
		MeasureCost: true, ExtCallbacks: r.ExtCallbacks, WaitOnly: r.WaitOnly,
	}
	var bounds []Bound
	if r.Bound != "" {
		if bounds, err = ParseBoundsFor(r.Bound, ClasslessTarget(tracer, table.Names[0])); err != nil {
			return Options{}, err
		}
	}
	tracer.Explain = len(bounds) > 0 && !r.NoExplain
	for _, f := range r.ViolationFlags {
		if len(bounds) == 0 {
			return Options{}, fmt.Errorf("--%s needs --bound: a violation is a wait over it", f)
		}
	}
	opts := Options{Tracer: tracer, Bounds: bounds, Duration: r.duration(),
		OnViolation: r.actionArgs(), OnViolationPerSecond: r.OnViolationPerSecond, StopOnViolation: r.StopOnViolation,
		Interval: r.Interval, Intervals: r.Intervals}
	if r.Interval == 0 {
		opts.Intervals = nil
	}
	if r.Log != nil {
		opts.Progress, opts.Violations = r.Log, r.Log
		opts.ProgressInterval = max(opts.Duration/10, time.Second)
		opts.ViolationLinesPerSecond = r.ViolationLinesPerSecond
	}
	// A service's progress is for its log, read long after.
	if r.Served && opts.Duration == 0 {
		opts.ProgressInterval = time.Minute
	}
	return opts, nil
}

func (r Request) policy(ctx context.Context) (*policy.Policy, error) {
	if r.PolicyPath == "" {
		return policy.Default(r.InferenceComms...), nil
	}
	return policy.Load(ctx, r.PolicyPath)
}

// actionArgs is the command to run on violations, if one was asked for.
func (r Request) actionArgs() []string {
	if !r.OnViolation {
		return nil
	}
	return r.Args
}

// ClasslessNote says what the bound's parts without CLASS: check, for
// opts made from r; "" when it has none.
func (r Request) ClasslessNote(opts Options) string {
	if !HasClasslessPart(r.Bound) || len(opts.Bounds) == 0 {
		return ""
	}
	classless := ClasslessTarget(opts.Tracer, opts.Tracer.Table.Names[0])
	what := Bound{Class: classless.Class, Selected: classless.Selected}.Covers(opts.Tracer.Selection())
	if !classless.Selected {
		what += " (the policy's first)"
	}
	return "the bound's clauses without CLASS: check " + what
}

// CheckTargets checks that the process and threads to trace exist, and
// that there are not more threads than the tracer can filter on.
func (r Request) CheckTargets() error {
	if r.PID > 0 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", r.PID)); err != nil {
			return fmt.Errorf("--pid %d: no such process", r.PID)
		}
	}
	for _, tid := range r.TIDs {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", tid)); err != nil {
			return fmt.Errorf("--tid %d: no such thread", tid)
		}
	}
	if len(r.TIDs) > MaxFilterTIDs {
		return fmt.Errorf("--tid given %d times: at most %d threads", len(r.TIDs), MaxFilterTIDs)
	}
	return nil
}

// PreallocNote says how much kernel memory the per-task table takes when
// that is bigPrealloc or more; "" otherwise. A preallocated table's
// memory is taken at load, used or not.
func (r Request) PreallocNote() (string, error) {
	if r.TopTasks <= 0 {
		return "", nil
	}
	bytes, err := TaskTableBytes(r.MaxTasks)
	if err != nil || bytes < bigPrealloc {
		return "", err
	}
	return fmt.Sprintf("--max-tasks %d preallocates about %s of kernel memory for the per-task table (--top 0: none)", r.MaxTasks, infile.Size(bytes>>20<<20)), nil
}

// Unchecked is an error when a run that was not interrupted checked a
// bound against nothing: none of its tasks waited in d. That is a
// mistake in the policy or the filters, not a latency that failed.
func (res *Result) Unchecked(d time.Duration) error {
	if res.Interrupted {
		// Cut short, a class may not have had its samples yet.
		return nil
	}
	if res.UnmeasuredSelection != "" {
		return fmt.Errorf("none of the selected tasks (%s) waited for a CPU in %s, so the bound was checked against nothing: "+
			"check the filters (--pid, --tid, --comm)", res.UnmeasuredSelection, d)
	}
	if len(res.Unmeasured) > 0 {
		return fmt.Errorf("no task of class %s waited for a CPU in %s, so the bound was checked against nothing: "+
			"check which tasks the policy puts in it (--policy, --inference-comm) and the filters (--pid, --comm)",
			strings.Join(res.Unmeasured, ", "), d)
	}
	return nil
}
