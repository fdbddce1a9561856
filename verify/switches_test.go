package verify

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseContextSwitches(t *testing.T) {
	stat := "cpu  1 2 3 4 5 6 7 0 0 0\ncpu0 1 2 3 4 5 6 7 0 0 0\nintr 12 0 0\nctxt 987654321\nbtime 1700000000\nprocesses 42\n"
	n, err := parseContextSwitches([]byte(stat), "stat")
	if err != nil || n != 987654321 {
		t.Fatalf("parse: %d, %v; want 987654321", n, err)
	}
	for _, bad := range []string{"cpu 1 2 3\nbtime 1\n", "ctxt many\n"} {
		if _, err := parseContextSwitches([]byte(bad), "stat"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// /proc/stat's intr line holds a count per interrupt: thousands of
	// fields on a large machine, before ctxt.
	long := "intr " + strings.Repeat("0 ", 200000) + "\nctxt 5\n"
	if n, err := parseContextSwitches([]byte(long), "stat"); err != nil || n != 5 {
		t.Errorf("after a long intr line: %d, %v; want 5", n, err)
	}
}

// writeCtxt writes a /proc/stat holding only a ctxt line.
func writeCtxt(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.WriteFile(path, []byte("cpu  0 0 0 0\nctxt "+strconv.Itoa(n)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSwitchAudit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")

	// The kernel made 1000 switches while the tracer ran, it saw 700.
	writeCtxt(t, path, 5000)
	var a switchAudit
	a.start(path, 40)
	writeCtxt(t, path, 6000)
	made, ok := a.made(path)
	if !ok || made != 1000 {
		t.Fatalf("made %d, %v; want 1000", made, ok)
	}
	// One switch per CPU (4 here) may be in flight.
	if got := a.unseen(made, 740, 4); got != 296 {
		t.Errorf("unseen %d, want 296", got)
	}
	// A later reading that errs further on the side of seen does not
	// take back what was counted.
	if got := a.unseen(made, 1100, 4); got != 296 {
		t.Errorf("unseen after a reading of more seen than made: %d, want 296 still", got)
	}
	var fresh switchAudit
	fresh.start(path, 0)
	if got := fresh.unseen(3, 0, 4); got != 0 {
		t.Errorf("3 unseen on 4 CPUs: %d counted, want 0 (in flight)", got)
	}

	// Stopped, the kernel's count is the one at the stop.
	writeCtxt(t, path, 6000)
	a.stop(path)
	writeCtxt(t, path, 9000)
	if made, ok := a.made(path); !ok || made != 1000 {
		t.Errorf("after stop: made %d, %v; want 1000", made, ok)
	}

	// No /proc/stat to read: no audit, rather than a made-up figure.
	var none switchAudit
	none.start(filepath.Join(t.TempDir(), "missing"), 0)
	if _, ok := none.made(path); ok {
		t.Error("an audit that could not start reports a count")
	}
}
