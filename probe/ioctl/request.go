package ioctl

import (
	"fmt"
	"io"
	"time"

	"github.com/hotlane/hotlane/internal/cliargs"
)

// A Request is what a probe ioctl command line asks for, as given:
// Validate checks it, Config and Options assemble what Run takes. Its
// errors name the command's flags, for they are what the user has to
// change.
type Request struct {
	// Duration of the run; DurationGiven says the user chose it rather
	// than leaving the default.
	Duration      time.Duration
	DurationGiven bool
	// Served says the metrics are served while it runs: without a
	// duration given that is a service, run until stopped.
	Served bool
	// The probe's filters and settings, as Config has them.
	PID             int
	Comm            string
	Dev             string
	StreamSlow      bool
	Slow            time.Duration
	Hook            string
	RingBufferBytes int
	Wakeups         bool
	MeasureCost     bool
	Limits          Limits
	// Args are the arguments left after the flags: none are taken.
	Args []string
	// Log, if set, receives the progress lines, the slow calls and the
	// line that says the probe is attached.
	Log io.Writer
}

// Validate checks the arguments left over; the filters are checked as
// the probe attaches, where their devices and processes are looked up.
func (r Request) Validate() error {
	return cliargs.None(r.Args)
}

// Config is the probe r asks for.
func (r Request) Config() Config {
	return Config{
		Hook: Hook(r.Hook), PID: r.PID, Comm: r.Comm, Dev: r.Dev,
		StreamSlow: r.StreamSlow, Slow: r.Slow, RingBufferBytes: r.RingBufferBytes, MeasureCost: r.MeasureCost, Wakeups: r.Wakeups,
		Limits: r.Limits,
	}
}

// Options are how long to run and what to say meanwhile: a progress
// line a tenth of the run apart (at least a second; every 5 seconds for
// a run until stopped), each slow call, and the hook attached.
func (r Request) Options() RunOptions {
	opts := RunOptions{Duration: r.Duration}
	if r.Served && !r.DurationGiven {
		opts.Duration = 0 // a service: until stopped
	}
	if r.Log == nil {
		return opts
	}
	log := r.Log
	opts.Progress = log
	opts.ProgressInterval = max(opts.Duration/10, time.Second)
	if opts.Duration == 0 {
		opts.ProgressInterval = 5 * time.Second
	}
	opts.OnSlow = func(s SlowCall) { fmt.Fprintf(log, "slow: %s\n", s) }
	opts.Attached = func(p *Probe) {
		fmt.Fprintf(log, "hotlane probe ioctl: attached (%s: %s); Ctrl-C to stop\n", p.Hook, p.HookDetail)
	}
	return opts
}
