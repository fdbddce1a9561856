package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hugeOneLine is a policy of at most size bytes on one line, almost all
// of it matchers: far over MaxRules.
func hugeOneLine(size int) []byte {
	head, tail := `{"classes": [{"name": "a", "match": [`, `{"comm": "x"}]}, {"name": "normal"}]}`
	const matcher = `{"comm": "x"}, `
	n := (size - len(head) - len(tail)) / len(matcher)
	return []byte(head + strings.Repeat(matcher, n) + tail)
}

// A 1 MiB one-line policy of matchers is refused for its matchers, well
// within a deadline that parsing checks: counting a position for every
// key once made this take half a minute.
func TestLoadHugePolicyIsRefusedQuickly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.json")
	data := hugeOneLine(maxFileSize)
	if len(data) > maxFileSize || len(data) < maxFileSize-100 {
		t.Fatalf("test policy is %d bytes, want just under %d", len(data), maxFileSize)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Load(ctx, path)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("parsing a 1 MiB policy was still going after 5 s: %v", err)
	}
	if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), "at most 32 are supported") {
		t.Fatalf("Load(1 MiB of matchers): %v, want the matcher cap", err)
	}
}

// Parsing stops with the context's error when the context is done.
func TestParseContextStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ParseContext(ctx, "p.json", hugeOneLine(64<<10))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("ParseContext with a cancelled context: %v, want context.Canceled", err)
	}
}

// A FIFO or a device given as the policy is refused at once (opening a
// FIFO for reading would wait for a writer), and so is a file over the
// size cap, naming the cap.
func TestLoadRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "policy.json")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "named pipe", os.DevNull: "character device"} {
		_, err := Load(context.Background(), path)
		if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s): %v, want ErrInvalidPolicy saying %q", path, err, want)
		}
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, maxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), big); !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), "1 MiB cap") {
		t.Errorf("Load(1 MiB + 1): %v, want the cap named", err)
	}
}
