package hookbench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hotlane/hotlane/internal/cliargs"
)

// A Request is what a bench hooks command line asks for, as given:
// Config checks it and assembles the bench, Run runs it. Its errors name
// the command's flags, for they are what the user has to change.
type Request struct {
	// Hooks are the kinds to measure, comma-separated; "" is all.
	Hooks  string
	Calls  int
	Rounds int
	// Own asks also for hotlane's own programs, loaded OwnFor per
	// measure.
	Own    bool
	OwnFor time.Duration
	// Args are the arguments left after the flags: none are taken.
	Args []string
	// Progress, if set, is told what the bench measures as it goes.
	Progress io.Writer
}

// Config checks the arguments and the kinds, and assembles the bench of
// hooks.
func (r Request) Config() (Config, error) {
	if err := cliargs.None(r.Args); err != nil {
		return Config{}, err
	}
	var names []string
	if r.Hooks != "" {
		names = strings.Split(r.Hooks, ",")
	}
	kinds, err := ParseKinds(names)
	if err != nil {
		return Config{}, fmt.Errorf("--hooks: %w", err)
	}
	return Config{Kinds: kinds, Calls: r.Calls, Rounds: r.Rounds, Progress: r.Progress}, nil
}

// Run measures the hooks of cfg (from Config) and, if asked, hotlane's
// own programs.
func (r Request) Run(ctx context.Context, cfg Config) (*Report, error) {
	rep, err := Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if !r.Own {
		return rep, nil
	}
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, "hooks: hotlane's own programs, %s per measure\n", r.OwnFor)
	}
	if rep.Programs, err = ProfileOwn(ctx, r.OwnFor); err != nil {
		return nil, err
	}
	rep.ProgramsLoad = OwnLoad(r.OwnFor)
	return rep, nil
}
