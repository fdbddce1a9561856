package sched

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hotlane/hotlane/internal/cliargs"
	"github.com/hotlane/hotlane/policy"
)

// A RunRequest is what a run command line asks for, as given: Validate
// checks how its parts go together, Policy loads the policy, and Config
// and Options assemble what RunWithRestarts takes. Its errors name the
// command's flags, for they are what the user has to change.
type RunRequest struct {
	// PolicyPath is the policy file; "" is the built-in policy with
	// InferenceComms as its inference comm prefixes.
	PolicyPath     string
	InferenceComms []string
	// CheckPolicy, if set, is a policy file to check and describe instead
	// of running anything; the other policy flags do not apply then.
	CheckPolicy string
	// Args are the arguments left after the flags: none are taken.
	Args            []string
	Partial         bool
	Timeout         time.Duration
	Starvation      time.Duration
	DebugErrorAfter uint64
	MeasureCost     bool
	// StatsInterval between stats lines, when there is somewhere to write
	// them.
	StatsInterval time.Duration
	// Restarts is how many times an error exit loads the scheduler again.
	Restarts int
	// Progress, if set, is told what a slow load is doing.
	Progress io.Writer
}

// Validate checks what can be checked before any file is read: the
// arguments left over, and that the comms are not given beside a policy
// file, which has its own. With CheckPolicy the policy flags are not
// used, so they cannot conflict.
func (r RunRequest) Validate() error {
	if err := cliargs.None(r.Args); err != nil {
		return err
	}
	if r.CheckPolicy == "" && r.PolicyPath != "" && len(r.InferenceComms) > 0 {
		return errors.New("--inference-comm applies to the built-in policy; put the comms in the policy file instead")
	}
	return nil
}

// CheckedPolicy loads the CheckPolicy file and compiles it as a run would,
// so that what passes here also loads.
func (r RunRequest) CheckedPolicy(ctx context.Context) (*policy.Policy, error) {
	p, err := policy.Load(ctx, r.CheckPolicy)
	if err != nil {
		return nil, err
	}
	if _, err := p.Compile(""); err != nil {
		return nil, err
	}
	return p, nil
}

// Policy loads the policy file, or takes the built-in policy with the
// comms, and compiles it.
func (r RunRequest) Policy(ctx context.Context) (*policy.Policy, *policy.Table, error) {
	p, err := r.policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	table, err := p.Compile("")
	if err != nil {
		return nil, nil, err
	}
	return p, table, nil
}

func (r RunRequest) policy(ctx context.Context) (*policy.Policy, error) {
	if r.PolicyPath == "" {
		return policy.Default(r.InferenceComms...), nil
	}
	return policy.Load(ctx, r.PolicyPath)
}

// Config is what Load takes to run table as r asks.
func (r RunRequest) Config(table *policy.Table) Config {
	return Config{
		Table: table, Partial: r.Partial, Timeout: r.Timeout, Starvation: r.Starvation,
		DebugErrorAfter: r.DebugErrorAfter, MeasureCost: r.MeasureCost, Progress: r.Progress,
	}
}

// Options are the run options that write the stats lines to text and
// JSON, either of which may be nil; with neither the stats are not read
// at all.
func (r RunRequest) Options(text, json io.Writer) RunOptions {
	opts := RunOptions{StatsInterval: r.StatsInterval, Text: text, JSON: json}
	if text == nil && json == nil {
		opts.StatsInterval = 0
	}
	return opts
}

// Mode names which tasks the scheduler takes: "partial" (those that chose
// SCHED_EXT) or "full" (every normal task).
func (r RunRequest) Mode() string {
	if r.Partial {
		return "partial"
	}
	return "full"
}

// StarvationBound says what the starvation guard of cfg bounds on this
// kernel, whose tick the bound depends on.
func StarvationBound(cfg Config) string {
	tick, err := Tick()
	if err != nil {
		return "the starvation bound is unknown (no scheduler tick)"
	}
	return cfg.Bound(tick).String()
}

// RunError is err, which ended RunWithRestarts after used restarts, with
// those restarts said: the failure may be a reload's, not the first load's.
func (r RunRequest) RunError(err error, used int) error {
	if used > 0 {
		return fmt.Errorf("after %d restarts: %w", used, err)
	}
	return err
}

// GaveUp reports whether info, the last exit after used restarts, is an
// error exit that r's restarts ran out on, rather than one r allowed none
// for.
func (r RunRequest) GaveUp(info ExitInfo, used int) bool {
	return info.IsError() && r.Restarts > 0 && used == r.Restarts
}
