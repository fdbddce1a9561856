package loader

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// KtimeNow reads the clock bpf_ktime_get_ns stamps events with
// (CLOCK_MONOTONIC), in nanoseconds: what user space compares BPF
// timestamps with, or hands a BPF program as a starting point.
func KtimeNow() (uint64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("read CLOCK_MONOTONIC: %w", err)
	}
	return uint64(ts.Nano()), nil
}
