package workloads

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/internal/infile"
)

// Each generator is capped, and so is the whole workload: 200 hog
// entries of 1024 threads each are refused, not started.
func TestWorkloadTaskCap(t *testing.T) {
	hogs := func(entries, threads int) []byte {
		list := make([]string, entries)
		for i := range list {
			list[i] = fmt.Sprintf(`{"threads": %d}`, threads)
		}
		return []byte(`{"hogs": [` + strings.Join(list, ", ") + `]}`)
	}
	if _, err := ParseWorkload("w.json", hogs(200, MaxThreads), 2); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("204800 threads and processes in all; at most %d", MaxTasks)) {
		t.Errorf("200 x %d hog threads: %v, want the total refused", MaxThreads, err)
	}
	if _, err := ParseWorkload("w.json", hogs(4, MaxThreads), 2); err != nil {
		t.Errorf("4 x %d hog threads (the cap exactly): %v", MaxThreads, err)
	}
	// Outside programs' tasks count too.
	mixed := []byte(`{"hogs": [{"threads": 1024}, {"threads": 1024}, {"threads": 1024}, {"threads": 1}], "hackbench": [{"groups": 16, "fds": 32}]}`)
	if _, err := ParseWorkload("w.json", mixed, 2); err == nil || !strings.Contains(err.Error(), "4097 threads") {
		t.Errorf("3073 hog threads and 1024 hackbench tasks: %v, want the total refused", err)
	}
}

// A workload file is a regular file of at most MaxWorkloadSize bytes: a
// FIFO is refused at once, a huge file before it is read.
func TestLoadWorkloadFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "w.json")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWorkload(fifo, 2); !errors.Is(err, infile.ErrNotRegular) {
		t.Errorf("FIFO: %v, want ErrNotRegular", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxWorkloadSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWorkload(big, 2); !errors.Is(err, infile.ErrTooLarge) || !strings.Contains(err.Error(), "1 MiB cap") {
		t.Errorf("1 MiB + 1: %v, want ErrTooLarge naming the cap", err)
	}
	if _, err := LoadWorkload(filepath.Join("examples", "default.json"), 2); err != nil {
		t.Errorf("the default example: %v", err)
	}
}

// A periodic task's period has a floor: a shorter one spins its CPU.
func TestPeriodFloor(t *testing.T) {
	if _, err := ParseWorkload("w.json", []byte(`{"periodic": [{"rate_hz": 100000, "compute": "1us"}]}`), 2); err == nil || !strings.Contains(err.Error(), "rate_hz 100000") {
		t.Errorf("100 kHz: %v, want refused", err)
	}
	if err := (Periodic{Comm: "p", Period: 1}).validate(); err == nil || !strings.Contains(err.Error(), "below the minimum") {
		t.Errorf("1ns period: %v, want refused", err)
	}
}
