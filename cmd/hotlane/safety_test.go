package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/workloads"
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

// A signal before --duration is over is no verdict: verify, the probes
// and the bench write their reports marked INTERRUPTED (text, JSON,
// JUnit) and exit 3, whatever the bound would have said. (A signal is the
// normal end without a duration: TestDurationZeroRunsUntilSignal.)
func TestSignalBeforeDurationIsInterrupted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer and probes: needs root")
	}
	bin := hotlaneBinary(t)
	dir := t.TempDir()
	junit := filepath.Join(dir, "early.xml")
	for _, c := range []struct {
		name  string
		args  []string
		json  string // the JSON document's path; "-": standard output
		junit bool   // a command with a verdict and --junit
	}{
		{"verify", []string{"verify", "-d", "60s", "--bound", "normal:p99<=1s", "--top", "0", "--junit", junit, "--json", "-"}, "-", true},
		{"probe ioctl", []string{"probe", "ioctl", "-d", "60s", "--json", "-"}, "-", false},
		{"probe dma", []string{"probe", "dma", "-d", "60s", "--json", "-"}, "-", false},
		{"probe xdp", []string{"probe", "xdp", "--iface", "lo", "-d", "60s", "--json", "-"}, "-", false},
		{"bench", []string{"bench", "--schedulers", "eevdf", "--hogs", "0", "--cyclictest", "none", "--warmup", "0s",
			"-d", "60s", "--repeats", "1", "--bound", "", "--out", dir, "--junit", junit}, filepath.Join(dir, "report.json"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(junit)
			stdout, stderr, code, err := signalledRun(bin, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if code != exitInterrupted {
				t.Errorf("exit %d, want %d (interrupted)\nstderr:\n%s", code, exitInterrupted, stderr)
			}
			text := stdout + stderr
			if !strings.Contains(text, "INTERRUPTED after") {
				t.Errorf("the text report does not say INTERRUPTED:\n%s", text)
			}
			doc := []byte(stdout)
			if c.json != "-" {
				var err error
				if doc, err = os.ReadFile(c.json); err != nil {
					t.Fatal(err)
				}
			}
			var res struct {
				Interrupted bool    `json:"interrupted"`
				Verdict     *string `json:"verdict"`
				Pass        *bool   `json:"pass"`
			}
			if err := json.Unmarshal(doc, &res); err != nil {
				t.Fatalf("JSON: %v\n%s", err, doc)
			}
			if !res.Interrupted {
				t.Errorf("JSON: interrupted is false")
			}
			if c.junit && (res.Verdict == nil || *res.Verdict != "interrupted") { // verify and bench judge
				t.Errorf("JSON: verdict %v, want interrupted", res.Verdict)
			}
			if res.Pass != nil && *res.Pass {
				t.Errorf("JSON: pass is true for an interrupted run")
			}
			if !c.junit {
				return
			}
			data, err := os.ReadFile(junit)
			if err != nil {
				t.Fatal(err)
			}
			var suites struct {
				Failures int `xml:"failures,attr"`
				Errors   int `xml:"errors,attr"`
			}
			if err := xml.Unmarshal(data, &suites); err != nil {
				t.Fatal(err)
			}
			if suites.Errors == 0 || !strings.Contains(string(data), "INTERRUPTED") {
				t.Errorf("JUnit: %d errors, %d failures, want the interruption as an error:\n%s", suites.Errors, suites.Failures, data)
			}
		})
	}
}

// signalledRun runs hotlane with args, sends it SIGTERM after a moment in
// which it must not have ended by itself, and returns its output and exit
// code once it has ended (an error if it did not, within a minute).
func signalledRun(bin string, args ...string) (stdout, stderr string, code int, err error) {
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		return "", "", 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Not a timing: any moment before the run would end will do.
	select {
	case err := <-done:
		return out.String(), errOut.String(), 0, fmt.Errorf("hotlane %v ended by itself before the signal (%v):\n%s", args, err, errOut.String())
	case <-time.After(1500 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		return out.String(), errOut.String(), 0, fmt.Errorf("hotlane %v still runs a minute after SIGTERM:\n%s", args, errOut.String())
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return out.String(), errOut.String(), exitErr.ExitCode(), nil
	}
	return out.String(), errOut.String(), 0, err
}

// --listen with no host, or an unspecified one, warns that it listens on
// every interface, even with -q; a host does not. A --web-config that
// cannot serve (a FIFO, a missing file) is one clear line before
// anything is attached.
func TestListenFlags(t *testing.T) {
	bin := hotlaneBinary(t)
	const warning = "listens on every interface"
	for _, c := range []struct {
		addr string
		warn bool
	}{{":0", true}, {"0.0.0.0:0", true}, {"127.0.0.1:0", false}} {
		// Without root the probe fails after serving; the warning
		// comes first either way.
		_, stderr, _ := runCLI(t, bin, "probe", "dma", "--listen", c.addr, "-d", "200ms", "-q")
		if got := strings.Contains(stderr, warning); got != c.warn {
			t.Errorf("--listen %s: warning %v, want %v:\n%s", c.addr, got, c.warn, stderr)
		}
	}
	fifo := filepath.Join(t.TempDir(), "web.yml")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	wantOneErrorLine(t, bin, []string{"probe", "dma", "--listen", "127.0.0.1:0", "--web-config", fifo}, "named pipe")
	wantOneErrorLine(t, bin, []string{"verify", "--listen", "127.0.0.1:0", "--web-config", "/nonexistent/web.yml"}, "/nonexistent/web.yml")
}

// A FIFO given where a file is read (a policy, a workload) is refused at
// once with one line, instead of an open that waits for a writer forever.
func TestFIFOInputsRefusedAtOnce(t *testing.T) {
	bin := hotlaneBinary(t)
	fifo := filepath.Join(t.TempDir(), "input.json")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"verify", "--policy", fifo, "-d", "1s"},
		{"run", "--check-policy", fifo},
		{"bench", "--workload", fifo, "--out", t.TempDir()},
		{"bench", "--policy", fifo, "--out", t.TempDir()},
		{"workload", "--file", fifo, "-d", "1s"},
		{"probe", "xdp", "--iface", "lo", "--policy", fifo},
	} {
		// Generous: refusing takes milliseconds; the old open never
		// returned.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		hung := ctx.Err() != nil
		cancel()
		var exitErr *exec.ExitError
		switch {
		case hung:
			t.Errorf("hotlane %v: still waiting on the FIFO after a minute", args)
		case !errors.As(err, &exitErr) || exitErr.ExitCode() != exitError:
			t.Errorf("hotlane %v: %v, want exit %d", args, err, exitError)
		case strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 || !strings.Contains(stderr.String(), "named pipe"):
			t.Errorf("hotlane %v: stderr %q, want one line saying it is a named pipe", args, stderr.String())
		}
	}
}

// Intervals have floors: a nanosecond interval would spin a CPU. 0 still
// means none where it did.
func TestIntervalFloors(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--interval", "0"}, true},
		{[]string{"--interval", "100ms"}, true},
		{[]string{"--interval", "1ns"}, false},
		{[]string{"--interval", "99ms"}, false},
		{[]string{"--period", "1ns"}, false},
		{[]string{"--period", "100us"}, true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		optionalDurationFlag(fs, "interval", 100*time.Millisecond, "")
		durationFlag(fs, "period", 10*time.Millisecond, workloads.MinPeriod, 0, "")
		_, done := parseFlags(fs, c.args)
		if done == c.ok {
			t.Errorf("%v: accepted %v, want %v", c.args, !done, c.ok)
		}
	}
}
