package vm

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// stallMarker begins the kernel's report of an RCU stall, on a CPU or of
// a task blocked in a read-side critical section.
const stallMarker = "detected stall"

// stallReportLines is how much of the kernel's log a stall report takes
// along: the report itself, the stack of each task or CPU it names, and
// what came next.
const stallReportLines = 120

// kernelStallReport returns the kernel's log from its first RCU stall
// report on, or "" if there was none. The console shows only the
// report's first lines (loglevel=4); the tasks' stacks, which say where a
// blocked task waits, are printed at a lower level and reach only the log
// buffer.
func kernelStallReport() (string, error) {
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_SIZE_BUFFER, nil)
	if err != nil {
		return "", fmt.Errorf("size of the kernel's log: %w", err)
	}
	buf := make([]byte, n)
	n, err = unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil {
		return "", fmt.Errorf("read the kernel's log: %w", err)
	}
	return stallReport(string(buf[:n]), stallReportLines), nil
}

// stallReport returns at most max lines of log from the first line that
// reports an RCU stall, or "" if none does.
func stallReport(log string, max int) string {
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if strings.Contains(l, "rcu") && strings.Contains(l, stallMarker) {
			end := min(len(lines), i+max)
			return strings.TrimRight(strings.Join(lines[i:end], "\n"), "\n")
		}
	}
	return ""
}
