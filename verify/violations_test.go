package verify

import (
	"strings"
	"testing"
	"time"
)

// A flood prints PerSecond lines in each second of the violations' own
// clock, then one line per second with the rest per class; nothing is
// lost from the count, and a quiet second prints everything.
func TestViolationPrinterLimitsEachSecond(t *testing.T) {
	var b strings.Builder
	p := &ViolationPrinter{W: &b, PerSecond: 3}
	at := 5 * time.Second
	for i := range 10 { // second 5: 10 violations, 7 over the limit
		class := "inference"
		if i%2 == 1 {
			class = "normal"
		}
		p.Print(Violation{At: at + time.Duration(i)*time.Millisecond, Class: class, Comm: "w", Latency: time.Millisecond})
	}
	p.Print(Violation{At: 6*time.Second + time.Millisecond, Class: "inference", Comm: "late", Latency: 2 * time.Millisecond})
	p.Print(Violation{At: 7 * time.Second, Class: "normal", Comm: "later", Latency: 3 * time.Millisecond})
	p.Flush()

	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{"violation: inference w", "violation: normal w", "violation: inference w",
		"violation: 7 more in that second not printed (over 3 a second: inference 3, normal 4)",
		"violation: inference late", "violation: normal later"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to start %q", i, lines[i], w)
		}
	}
	if p.Printed != 5 || p.NotPrinted != 7 || p.Printed+p.NotPrinted != 12 {
		t.Errorf("printed %d, not printed %d; want 5 and 7 of 12", p.Printed, p.NotPrinted)
	}
	// Flush again: nothing held, nothing written.
	n := b.Len()
	p.Flush()
	if b.Len() != n {
		t.Errorf("a second Flush wrote %q", b.String()[n:])
	}
}
