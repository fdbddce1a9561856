package dma

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hotlane/hotlane/internal/cliargs"
)

// A Request is what a probe dma command line asks for, as given:
// Validate checks it, Options and RunOptions assemble what Run takes. Its
// errors name the command's flags, for they are what the user has to
// change.
type Request struct {
	Duration time.Duration
	Interval time.Duration
	// Hooks, Latency and Events are as Options has them; Start checks
	// them, against the kernel.
	Hooks   string
	Latency string
	Events  []string
	// Args are the arguments left after the flags: none are taken.
	Args []string
	// Progress, if set, gets the counts so far every Interval.
	Progress io.Writer
	// Log, if set, is told which hooks the probe attached: said even
	// when Progress is not, for it is what the counts mean.
	Log io.Writer
}

// Validate checks the arguments left over; Start checks the rest,
// against the kernel.
func (r Request) Validate() error {
	return cliargs.None(r.Args)
}

// Options are the probe r asks for.
func (r Request) Options() Options {
	return Options{Hooks: r.Hooks, Latency: r.Latency, Events: r.Events}
}

// RunOptions are how long to count and what to say meanwhile.
func (r Request) RunOptions() RunOptions {
	ro := RunOptions{Duration: r.Duration, Interval: r.Interval, Progress: r.Progress}
	if r.Log == nil {
		return ro
	}
	log, until := r.Log, r.until()
	ro.Started = func(p *Probe) {
		lat := "not measured"
		if l := p.LatencyHooks(); len(l) > 0 {
			lat = strings.Join(l, ", ")
		}
		fmt.Fprintf(log, "hotlane probe dma: attached %s (map latency: %s); %s\n", strings.Join(p.Hooks(), ", "), lat, until)
	}
	return ro
}

// until says what ends the run.
func (r Request) until() string {
	if r.Duration > 0 {
		return fmt.Sprintf("stopping after %s or Ctrl-C", r.Duration)
	}
	return "Ctrl-C to stop"
}
