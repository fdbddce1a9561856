package ioctl

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// build32 compiles testdata/ioctl32 for GOARCH=386.
func build32(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ioctl32")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/ioctl32")
	cmd.Env = append(os.Environ(), "GOARCH=386", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the 32-bit generator: %v\n%s", err, b)
	}
	return out
}

// run32 starts the 32-bit generator, attaches the probe to it, lets it
// issue n TCGETS on a pty master and 3 failing TIOCGWINSZ on /dev/null,
// and returns what the probe saw.
func run32(t *testing.T, bin string, h Hook, n int) *Result {
	t.Helper()
	cmd := exec.Command(bin, strconv.Itoa(n))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	lines := bufio.NewReader(stdout)
	if l, err := lines.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("generator said %q, %v", l, err)
	}
	r, _ := measure(t, Config{Hook: h, PID: cmd.Process.Pid}, func() {
		io.WriteString(stdin, "go\n")
		if l, err := lines.ReadString('\n'); err != nil || l != "done\n" {
			t.Fatalf("generator said %q, %v", l, err)
		}
	})
	return r
}

// TestProbe32Bit checks that calls from a 32-bit process, which enter the
// kernel through the compat syscall table (ioctl is number 54 there), are
// counted exactly by the hooks that can see them, and that the classic
// syscall tracepoints indeed do not report them, as the hook's
// description says.
func TestProbe32Bit(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("builds a GOARCH=386 binary")
	}
	bin := build32(t)
	const n = 500
	want := []row{
		{"/dev/null", "TIOCGWINSZ", 3, map[string]uint64{"ENOTTY": 3}},
		{"/dev/ptmx", "TCGETS", n, nil},
	}
	for _, h := range []Hook{HookTpBTF, HookRawTP} {
		t.Run(string(h), func(t *testing.T) {
			r := run32(t, bin, h, n)
			if diff := cmp.Diff(want, sortRows(rows(r))); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
	t.Run(string(HookTracepoint), func(t *testing.T) {
		r := run32(t, bin, HookTracepoint, n)
		if got := rows(r); len(got) != 0 {
			t.Errorf("the syscall tracepoints reported 32-bit calls: %+v; fix the hook's description", got)
		}
		if !strings.Contains(r.HookDetail, "do not report 32-bit processes") {
			t.Errorf("hook detail %q does not warn about 32-bit processes", r.HookDetail)
		}
	})
}
