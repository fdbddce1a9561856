package verify

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hotlane/hotlane/bpf"
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

// A record decodes to what binary.Read, field by field, makes of the same
// bytes; one too short is an error that says so.
func TestDecodeViolationMatchesBinaryRead(t *testing.T) {
	var want bpf.RunqlatViolation
	want.AtNs, want.LatencyNs, want.Pid, want.Tgid, want.ClassId, want.Cpu = 1e9, 5e6, 42, 41, 1, 3
	want.PrevPid, want.Caused, want.FeltNs, want.DeliveryNs, want.ResumeNs = 7, 1, 6e6, 2e3, 9e3
	copy(want.Comm[:], []int8{'i', 'n', 'f', 'e', 'r'})
	want.Why.Flags = exDone | exMigrated
	want.Why.FromCpu = 2
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, &want); err != nil {
		t.Fatal(err)
	}
	raw := append(buf.Bytes(), 0, 0, 0, 0, 0, 0, 0, 0) // bytes past the struct are not read
	var got bpf.RunqlatViolation
	if err := decodeViolation(raw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-binary.Read +decodeViolation):\n%s", diff)
	}
	if err := decodeViolation(raw[:buf.Len()-1], &got); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a short record: %v, want an error naming its size", err)
	}
}

func BenchmarkDecodeViolation(b *testing.B) {
	raw := make([]byte, binary.Size(bpf.RunqlatViolation{}))
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			var v bpf.RunqlatViolation
			if err := decodeViolation(raw, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("binary.Read", func(b *testing.B) {
		for b.Loop() {
			var v bpf.RunqlatViolation
			if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
