package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A flag counts as given in either spelling: -d 2s is --duration 2s.
func TestFlagGivenInEitherSpelling(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--duration", "2s"}, true},
		{[]string{"-d", "2s"}, true},
		{[]string{"--pid", "1"}, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		durationFlag(fs, "duration", time.Second, 0, 0, "")
		intFlag(fs, "pid", 0, 0, maxPID, "")
		if code, done := parseFlags(fs, c.args); done {
			t.Fatalf("%v: parse exit %d", c.args, code)
		}
		if got := flagGiven(fs, "duration"); got != c.want {
			t.Errorf("%v: flagGiven(duration) = %v, want %v", c.args, got, c.want)
		}
	}
}

// verify --listen with a duration is a check, not a service: it prints
// its report when the duration is over and exits, whichever spelling of
// --duration is used (-d was once not seen, and the run went on until
// killed).
func TestVerifyListenWithDurationExits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	bin := hotlaneBinary(t)
	for _, dur := range [][]string{{"-d", "2s"}, {"--duration", "2s"}} {
		// Generous: the run is 2 s; a run that ignores its duration
		// lasts until this kills it.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, append([]string{"verify", "--listen", "127.0.0.1:0", "--top", "0", "--no-histograms"}, dur...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		killed := ctx.Err() != nil
		cancel()
		if killed {
			t.Errorf("verify --listen %v did not exit by itself; killed:\n%s", dur, stderr.String())
			continue
		}
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Fatal(err)
		}
		if err != nil {
			t.Errorf("verify --listen %v: %v\n%s", dur, err, stderr.String())
		}
		if !strings.Contains(stdout.String(), "run-queue latency over ") {
			t.Errorf("verify --listen %v: no report:\n%s", dur, stdout.String())
		}
	}
}
