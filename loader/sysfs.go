package loader

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// SchedExtSysfs is where a sched_ext kernel reports its state.
	SchedExtSysfs = "/sys/kernel/sched_ext"
	// TracefsPath is the standard tracefs mount point.
	TracefsPath = "/sys/kernel/tracing"
	// KernelBTFPath is where the running kernel exposes its BTF.
	KernelBTFPath = "/sys/kernel/btf/vmlinux"
)

// SchedExtStatus is what /sys/kernel/sched_ext says.
type SchedExtStatus struct {
	Present   bool
	State     string // enabled, disabled, enabling, disabling
	Ops       string // name of the running BPF scheduler, if any
	SwitchAll bool   // all tasks (not only SCHED_EXT ones) are on sched_ext
}

// ReadSchedExtStatus reads the sched_ext sysfs directory dir (normally
// SchedExtSysfs). A missing dir is not an error: it means no sched_ext.
func ReadSchedExtStatus(dir string) (SchedExtStatus, error) {
	var s SchedExtStatus
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return s, nil
	} else if err != nil {
		return s, fmt.Errorf("stat %s: %w", dir, err)
	}
	s.Present = true
	state, err := readTrimmed(filepath.Join(dir, "state"))
	if err != nil {
		return s, err
	}
	s.State = state
	// root/ops exists only while a BPF scheduler is loaded.
	if ops, err := readTrimmed(filepath.Join(dir, "root", "ops")); err == nil {
		s.Ops = ops
	} else if !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	if sw, err := readTrimmed(filepath.Join(dir, "switch_all")); err == nil {
		s.SwitchAll = sw == "1"
	}
	return s, nil
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// kconfig is the running kernel's build configuration, when the kernel
// publishes it. It is only used to explain why something is missing.
type kconfig struct {
	source string            // file it came from, "" if none was found
	values map[string]string // CONFIG_FOO -> "y", "m", "n" (not set), ...
}

// value returns the setting of opt ("y", "m", "n", ...) and whether it is
// known at all.
func (k kconfig) value(opt string) (string, bool) {
	if k.values == nil {
		return "", false
	}
	v, ok := k.values[opt]
	if !ok {
		// A config that is readable but lacks the option means the
		// option does not exist or is off.
		return "n", true
	}
	return v, true
}

// readKconfig reads /proc/config.gz or /boot/config-<release>; finding
// neither is not an error.
func readKconfig(release string) kconfig {
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if zr, err := gzip.NewReader(f); err == nil {
			if v, err := parseKconfig(zr); err == nil {
				return kconfig{source: "/proc/config.gz", values: v}
			}
		}
	}
	path := "/boot/config-" + release
	if f, err := os.Open(path); err == nil {
		defer f.Close()
		if v, err := parseKconfig(f); err == nil {
			return kconfig{source: path, values: v}
		}
	}
	return kconfig{}
}

// parseKconfig parses a kernel .config: "CONFIG_FOO=y" lines and
// "# CONFIG_FOO is not set" lines (recorded as "n").
func parseKconfig(r io.Reader) (map[string]string, error) {
	values := make(map[string]string)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			if name, ok := strings.CutSuffix(rest, " is not set"); ok && strings.HasPrefix(name, "CONFIG_") {
				values[name] = "n"
			}
			continue
		}
		if name, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(name, "CONFIG_") {
			values[name] = strings.Trim(v, `"`)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kernel config: %w", err)
	}
	return values, nil
}

// tracefsEvents returns a tracefs directory that has an events/
// subdirectory, or "" if none is mounted. A permission error is returned
// rather than taken for "not mounted".
func tracefsEvents() (string, error) {
	for _, dir := range []string{TracefsPath, "/sys/kernel/debug/tracing"} {
		fi, err := os.Stat(filepath.Join(dir, "events"))
		switch {
		case err == nil && fi.IsDir():
			return dir, nil
		case errors.Is(err, fs.ErrPermission):
			return "", fmt.Errorf("tracefs: %w", err)
		}
	}
	return "", nil
}

// EnsureTracefs finds a mounted tracefs (one with an events directory)
// and, if there is none and mount is true, mounts one at TracefsPath. It
// reports the directory ("" if there is none) and whether it mounted it;
// err says why there is none. Every tool that needs tracefs uses it.
func EnsureTracefs(mount bool) (dir string, mounted bool, err error) {
	if dir, err := tracefsEvents(); dir != "" || err != nil {
		return dir, false, err
	}
	if !mount {
		return "", false, nil
	}
	if err := unix.Mount("nodev", TracefsPath, "tracefs", 0, ""); err != nil {
		return "", false, fmt.Errorf("mount -t tracefs nodev %s: %w", TracefsPath, err)
	}
	if dir, err := tracefsEvents(); dir != "" || err != nil {
		return dir, true, err
	}
	return "", true, fmt.Errorf("mounted tracefs at %s but it has no events directory", TracefsPath)
}
