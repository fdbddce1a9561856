package xdp

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hotlane/hotlane/internal/cliargs"
)

// A Request is what a probe xdp command line asks for, as given:
// Validate checks it, Config builds the policy and Options say what the
// run reports. Its errors name the command's flags, for they are what
// the user has to change.
type Request struct {
	Interface string
	// The drop policy: the rules as written (PolicyFromFlags), or a
	// policy file.
	Drop, AllowUDPPorts, DropEtherTypes, PolicyFile string
	// Mode is the attach mode as written (ParseMode).
	Mode     string
	Replace  bool
	Duration time.Duration
	Interval time.Duration
	// Args are the arguments left after the flags: none are taken.
	Args []string
	// Progress, if set, receives a line every Interval; Log the line
	// that says where the program is attached and what it does, which
	// is said even without progress lines.
	Progress io.Writer
	Log      io.Writer
}

// Validate checks what needs no file: no arguments left over, an
// interface named.
func (r Request) Validate() error {
	if err := cliargs.None(r.Args); err != nil {
		return err
	}
	if r.Interface == "" {
		return errors.New("--iface is required; see `ip link` for the interfaces")
	}
	return nil
}

// Config reads the policy and the mode into the probe's configuration.
func (r Request) Config() (Config, error) {
	pol, err := PolicyFromFlags(r.Drop, r.AllowUDPPorts, r.DropEtherTypes, r.PolicyFile)
	if err != nil {
		return Config{}, err
	}
	m, err := ParseMode(r.Mode)
	if err != nil {
		return Config{}, err
	}
	return Config{Interface: r.Interface, Policy: pol, Mode: m, Replace: r.Replace}, nil
}

// Options are how long to count and what to say meanwhile about cfg's
// run.
func (r Request) Options(cfg Config) Options {
	opts := Options{Duration: r.Duration, Progress: r.Progress, Interval: r.Interval}
	if r.Log == nil {
		return opts
	}
	log := r.Log
	opts.Attached = func(a *Attachment) {
		fmt.Fprintf(log, "hotlane: XDP attached to %s in %s; policy: %s; counting until %s\n", a.Interface, attachedHow(a), cfg.Policy, r.until())
	}
	return opts
}

// attachedHow says which mode a got, and why not driver mode when it
// fell back.
func attachedHow(a *Attachment) string {
	how := a.Mode.String() + " mode"
	if a.DriverModeError != nil {
		how += " (driver mode unavailable: " + a.DriverModeError.Error() + ")"
	}
	return how
}

// until says what ends the count.
func (r Request) until() string {
	if r.Duration > 0 {
		return r.Duration.Round(time.Millisecond).String() + " or Ctrl-C"
	}
	return "Ctrl-C"
}
