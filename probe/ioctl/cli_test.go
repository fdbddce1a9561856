package ioctl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotlane/hotlane/vm/vmtest"
)

// hotlaneCLI builds the hotlane binary (the Go build cache makes it
// cheap after the first time).
func hotlaneCLI(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the hotlane binary")
	}
	return vmtest.Hotlane(t)
}

// TestCLIBadInput runs `hotlane probe ioctl` with wrong flags: each must
// fail with exit status 2 and one line saying what is wrong.
func TestCLIBadInput(t *testing.T) {
	bin := hotlaneCLI(t)
	pidMax := 4194304
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		fmt.Sscan(string(b), &pidMax)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pid", fmt.Sprint(pidMax)}, fmt.Sprintf("pid %d: no such process", pidMax)},
		{[]string{"--dev", "/dev/no-such-gpu"}, "unknown device /dev/no-such-gpu: no such file or directory"},
		{[]string{"--dev", "4095:4095"}, "unknown device 4095:4095: no character or block device node under /dev has that number"},
		{[]string{"--hook", "kprobe"}, `unknown hook "kprobe"; use one of fentry, tracepoint, tp_btf, raw_tp`},
		{[]string{"--comm", "much-too-long-a-name"}, `comm "much-too-long-a-name" is 20 bytes`},
		{[]string{"--ringbuf-bytes", "3000"}, "ring buffer size 3000: use a power of two"},
		{[]string{"--duration", "-1s"}, `invalid value "-1s" for flag -duration: -1s is below the minimum 0s`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		cmd := exec.Command(bin, append([]string{"probe", "ioctl"}, c.args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if cmd.ProcessState.ExitCode() != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "hotlane probe ioctl: "+c.want) {
			t.Errorf("%v: exit %v, stderr:\n%s\nwant exit 2 and one line: hotlane probe ioctl: %s", c.args, err, stderr.String(), c.want)
		}
	}
}

// TestCLIUnprivileged runs the command as nobody: it must say which
// capabilities it lacks, in one line, before loading anything.
func TestCLIUnprivileged(t *testing.T) {
	requireRoot(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux) to drop privileges")
	}
	// nobody must be able to run the binary.
	dir, err := os.MkdirTemp("", "hotlane-cli")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "hotlane")
	if b, err := os.ReadFile(hotlaneCLI(t)); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy the binary: %v", err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "probe", "ioctl", "--duration", "1s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Run()
	const want = "hotlane probe ioctl: missing capabilities: CAP_BPF, CAP_PERFMON; run as root or grant them"
	if cmd.ProcessState.ExitCode() != 2 || !strings.HasPrefix(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want exit 2 and one line %q", cmd.ProcessState.ExitCode(), stderr.String(), want)
	}
}

// TestCLIRun runs the command on this process while it issues ioctls and
// reads back its JSON.
func TestCLIRun(t *testing.T) {
	requireRoot(t)
	bin := hotlaneCLI(t)
	g := newGenerator(t)
	out := filepath.Join(t.TempDir(), "ioctl.json")
	cmd := exec.Command(bin, "probe", "ioctl", "--pid", fmt.Sprint(os.Getpid()), "--duration", "3s", "--slow", "0", "--json", out)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Issue the calls once it says it is attached.
	stderrLines := bufio.NewReader(errPipe)
	first, err := stderrLines.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "hotlane probe ioctl: attached (") {
		t.Fatalf("first line %q, %v", first, err)
	}
	want := g.run(t, 30)
	rest, _ := io.ReadAll(stderrLines)
	stderr := first + string(rest)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	calls, errs := total(want)
	if r.Counters.Calls != calls || r.Counters.Errors != errs || len(r.Commands) != len(want) {
		t.Errorf("JSON: %d calls, %d errors, %d rows; want %d, %d, %d", r.Counters.Calls, r.Counters.Errors, len(r.Commands), calls, errs, len(want))
	}
	for _, s := range r.Commands {
		if s.Hist == nil || s.Hist.Count() != s.Calls {
			t.Errorf("%s %s: histogram does not hold its %d calls", s.Device, s.Command, s.Calls)
		}
	}
	if n := strings.Count(stderr, "slow: "); uint64(n) != calls {
		t.Errorf("%d slow lines on stderr, want %d", n, calls)
	}
	for _, s := range []string{"/dev/ptmx", g.ptsPath, "pipe", "EBADF", "lost events: none"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, stdout.String())
		}
	}
	requireNothingLoaded(t)
}
