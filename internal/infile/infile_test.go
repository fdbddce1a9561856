package infile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A regular file within the cap is read; a FIFO, a device and a
// directory are refused at once (a FIFO without a writer would block an
// open for reading); a file over the cap is refused naming the cap.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, []byte(`{"a": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := Read("policy", small, 1<<10); err != nil || string(data) != `{"a": 1}` {
		t.Errorf("Read(small) = %q, %v", data, err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, 2<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read("policy", big, 1<<10); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1 KiB cap") {
		t.Errorf("Read(2 KiB file, cap 1 KiB): %v, want ErrTooLarge naming the cap", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "named pipe", os.DevNull: "character device", dir: "directory"} {
		if _, err := Read("workload", path, 1<<10); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) {
			t.Errorf("Read(%s): %v, want ErrNotRegular saying %q", path, err, want)
		}
		if err := Check("workload", path, 1<<10); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Check(%s): %v, want ErrNotRegular", path, err)
		}
	}
	if _, err := Read("policy", filepath.Join(dir, "missing"), 1<<10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read(missing): %v, want ErrNotExist", err)
	}
}
