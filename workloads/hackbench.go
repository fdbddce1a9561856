package workloads

import (
	"context"
	"fmt"
	"strconv"
)

// Hackbench runs rt-tests' hackbench as background load: groups of
// processes passing small messages over pipes, each group Fds senders and
// Fds receivers, so the machine sees thousands of short wake-ups a second
// competing with the lane's. An outside program; what it does is load, not
// counted: its throughput is not part of the bench's background figure.
type Hackbench struct {
	// Path is the program; empty means "hackbench" in $PATH.
	Path string `json:"path,omitempty"`
	// Groups and Fds are hackbench's --groups and --fds: 2 x Fds
	// processes a group.
	Groups int `json:"groups"`
	Fds    int `json:"fds"`
}

// Defaults: one group of four senders and four receivers. hackbench's own
// (ten groups of 20) would be 400 processes, more than a 2-CPU VM under
// emulation can switch between and still run anything else.
const (
	DefaultHackbenchGroups = 1
	DefaultHackbenchFds    = 4
)

// hackbenchLoops is the messages each sender sends each receiver in one
// run: about 10 s on a 2026 host CPU, minutes under emulation. Run starts
// hackbench again when it finishes. (Much larger counts overflow inside
// hackbench 2.4: 1<<30 ends at once.)
const hackbenchLoops = 10_000_000

func (h Hackbench) program() string {
	if h.Path == "" {
		return "hackbench"
	}
	return h.Path
}

// Args are hackbench's arguments.
func (h Hackbench) Args() []string {
	return []string{"--pipe", "--groups", strconv.Itoa(h.Groups), "--fds", strconv.Itoa(h.Fds), "--loops", strconv.Itoa(hackbenchLoops)}
}

func (h Hackbench) validate() error {
	if h.Groups < 1 || h.Fds < 1 || 2*h.Groups*h.Fds > MaxThreads {
		return fmt.Errorf("hackbench groups %d and fds %d must be at least 1, with 2 x groups x fds at most %d processes", h.Groups, h.Fds, MaxThreads)
	}
	return nil
}

// Run runs hackbench until ctx is done, starting it again whenever it
// finishes its loops. hackbench failing (it could not start its groups,
// or was killed) is an error: the load the run was meant to have was not
// there.
func (h Hackbench) Run(ctx context.Context) error {
	if err := h.validate(); err != nil {
		return err
	}
	_, err := repeatRuns(ctx, "hackbench", append([]string{h.program()}, h.Args()...), nil)
	return err
}
