package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits shared with bpf/include/classify.bpf.h.
const (
	MaxDeviceSets   = 8  // HL_MAX_DEVSETS: distinct device/idle pairs in a policy
	MaxDeviceRanges = 32 // HL_MAX_DEV_RANGES: device number ranges in all

	// MaxIdle bounds a device matcher's idle time; longer is "never".
	MaxIdle = 24 * time.Hour
	MinIdle = time.Millisecond

	maxMajor = 1<<12 - 1 // the kernel's dev_t: 12 bits of major,
	maxMinor = 1<<20 - 1 // 20 of minor (MINORBITS)
)

// DeviceRange is a range of device numbers in one device set, as the BPF
// classifier compares them with an inode's i_rdev. Its layout is that of
//
//	struct hl_dev_range { __u32 lo; __u32 hi; __u32 devset; __u32 block; };
type DeviceRange struct {
	Lo, Hi uint32 // the kernel's dev_t: major << 20 | minor
	DevSet uint32 // index into Table.DeviceSetIdle
	Block  uint32 // 1 for block devices, 0 for character devices
}

// kernelDev encodes a device number as the kernel's dev_t (MKDEV).
func kernelDev(major, minor uint32) uint32 { return major<<20 | minor }

// checkDevice returns what is wrong with a device matcher's value, or "".
// A value is a path glob (it starts with "/") or a character-device number
// range: "MAJOR:MINOR", "MAJOR:FIRST-LAST" or "MAJOR:*".
func checkDevice(field, v string) string {
	if strings.HasPrefix(v, "/") {
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Sprintf("%s %q contains a NUL byte", field, v)
		}
		if _, err := filepath.Match(v, ""); err != nil {
			return fmt.Sprintf("%s %q is not a valid glob: %v", field, v, err)
		}
		return ""
	}
	if _, msg := parseDeviceNumbers(field, v); msg != "" {
		return msg
	}
	return ""
}

// parseDeviceNumbers parses "MAJOR:MINOR", "MAJOR:FIRST-LAST" or "MAJOR:*"
// into one character-device range.
func parseDeviceNumbers(field, v string) (DeviceRange, string) {
	usage := fmt.Sprintf(`%s %q is neither a path glob nor a device number; write e.g. "/dev/nvidia*", "195:0", "226:128-255" or "195:*"`, field, v)
	majorText, minors, ok := strings.Cut(v, ":")
	if !ok {
		return DeviceRange{}, usage
	}
	major, err := strconv.ParseUint(majorText, 10, 32)
	if err != nil {
		return DeviceRange{}, usage
	}
	if major > maxMajor {
		return DeviceRange{}, fmt.Sprintf("%s %q: major %d is above the kernel's limit of %d", field, v, major, maxMajor)
	}
	lo, hi := uint64(0), uint64(maxMinor)
	if minors != "*" {
		first, last, isRange := strings.Cut(minors, "-")
		if lo, err = strconv.ParseUint(first, 10, 32); err != nil {
			return DeviceRange{}, usage
		}
		hi = lo
		if isRange {
			if hi, err = strconv.ParseUint(last, 10, 32); err != nil {
				return DeviceRange{}, usage
			}
		}
		if hi > maxMinor {
			return DeviceRange{}, fmt.Sprintf("%s %q: minor %d is above the kernel's limit of %d", field, v, hi, maxMinor)
		}
		if lo > hi {
			return DeviceRange{}, fmt.Sprintf("%s %q: the range runs backwards; write the smaller minor first", field, v)
		}
	}
	return DeviceRange{Lo: kernelDev(uint32(major), uint32(lo)), Hi: kernelDev(uint32(major), uint32(hi))}, ""
}

// resolveDevice returns the device ranges v names: its number range, or
// the device nodes its glob matches now, merged into ranges. A glob is
// resolved once, at Compile: a device created later matches only if it
// reuses a number, so naming devices by number suits hot-plugged ones.
func resolveDevice(field, v string) ([]DeviceRange, string, error) {
	if !strings.HasPrefix(v, "/") {
		r, msg := parseDeviceNumbers(field, v)
		if msg != "" {
			return nil, msg, nil
		}
		return []DeviceRange{r}, "", nil
	}
	paths, err := filepath.Glob(v)
	if err != nil {
		return nil, fmt.Sprintf("%s %q: %v", field, v, err), err
	}
	var devs []DeviceRange // one per device, Lo == Hi
	for _, p := range paths {
		fi, err := os.Stat(p) // through symlinks such as /dev/dri/by-path/*
		if err != nil || fi.Mode()&os.ModeDevice == 0 {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		d := kernelDev(unix.Major(st.Rdev), unix.Minor(st.Rdev))
		r := DeviceRange{Lo: d, Hi: d}
		if fi.Mode()&os.ModeCharDevice == 0 {
			r.Block = 1
		}
		devs = append(devs, r)
	}
	if len(devs) == 0 {
		return nil, fmt.Sprintf(`%s %q matches no device node now (%d paths); check the path, or name the devices by number (e.g. "195:*") to match devices that appear later`, field, v, len(paths)), errNoDevice
	}
	return mergeDevices(devs), "", nil
}

var errNoDevice = errors.New("no device matches")

// mergeDevices sorts single devices and joins neighbours of one kind and
// major into ranges.
func mergeDevices(devs []DeviceRange) []DeviceRange {
	slices.SortFunc(devs, func(a, b DeviceRange) int {
		if a.Block != b.Block {
			return int(a.Block) - int(b.Block)
		}
		return int(int64(a.Lo) - int64(b.Lo))
	})
	devs = slices.Compact(devs)
	var out []DeviceRange
	for _, d := range devs {
		if n := len(out); n > 0 && out[n-1].Block == d.Block && out[n-1].Hi+1 == d.Lo && out[n-1].Hi>>20 == d.Lo>>20 {
			out[n-1].Hi = d.Hi
			continue
		}
		out = append(out, d)
	}
	return out
}
