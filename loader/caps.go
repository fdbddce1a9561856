package loader

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Capability is one Linux capability hotlane needs.
type Capability struct {
	Name string
	Bit  uint
}

// NeededCapabilities returns the capabilities hotlane needs: CAP_BPF and
// CAP_PERFMON to load and attach tracing programs, CAP_SYS_ADMIN for
// struct_ops (sched_ext), BTF handles and mounting tracefs, and
// CAP_NET_ADMIN to attach XDP programs.
func NeededCapabilities() []Capability {
	return []Capability{
		{"CAP_BPF", unix.CAP_BPF},
		{"CAP_PERFMON", unix.CAP_PERFMON},
		{"CAP_SYS_ADMIN", unix.CAP_SYS_ADMIN},
		{"CAP_NET_ADMIN", unix.CAP_NET_ADMIN},
	}
}

// CapInfo is what Probe found about the process's privileges.
type CapInfo struct {
	// Effective is the effective capability mask in hex, as CapEff in
	// /proc/self/status shows it.
	Effective string `json:"effective"`
	// Have and Missing split NeededCapabilities by the effective mask.
	Have    []string `json:"have"`
	Missing []string `json:"missing,omitempty"`
}

// CapsFromMask splits NeededCapabilities by the effective mask eff.
func CapsFromMask(eff uint64) CapInfo {
	info := CapInfo{Effective: fmt.Sprintf("%016x", eff), Have: []string{}}
	for _, c := range NeededCapabilities() {
		if eff&(1<<c.Bit) != 0 {
			info.Have = append(info.Have, c.Name)
		} else {
			info.Missing = append(info.Missing, c.Name)
		}
	}
	return info
}

// has reports whether the capability called name is effective.
func (c CapInfo) has(name string) bool {
	for _, h := range c.Have {
		if h == name {
			return true
		}
	}
	return false
}

// canBPF reports whether the process may load tracing programs: CAP_BPF
// with CAP_PERFMON, or CAP_SYS_ADMIN which implies both.
func (c CapInfo) canBPF() bool {
	return c.has("CAP_SYS_ADMIN") || (c.has("CAP_BPF") && c.has("CAP_PERFMON"))
}

// ParseCapEff reads the CapEff line of a /proc/<pid>/status file.
func ParseCapEff(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("parse CapEff %q: %w", strings.TrimSpace(rest), err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read status: %w", err)
	}
	return 0, fmt.Errorf("no CapEff line in status")
}

// effectiveCaps returns the effective capability mask of this process from
// /proc/self/status, falling back to capget(2) when /proc is not mounted.
func effectiveCaps() (uint64, error) {
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		if eff, err := ParseCapEff(f); err == nil {
			return eff, nil
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, fmt.Errorf("capget: %w", err)
	}
	return uint64(data[1].Effective)<<32 | uint64(data[0].Effective), nil
}

// RequireCapabilities returns an error wrapping ErrMissingCapabilities that
// names every capability in names the process does not hold, so a command
// can fail before it half-attaches anything.
func RequireCapabilities(names ...string) error {
	eff, err := effectiveCaps()
	if err != nil {
		return err
	}
	info := CapsFromMask(eff)
	var missing []string
	for _, n := range names {
		if !info.has(n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; run as root or grant them (setcap %s+ep)", ErrMissingCapabilities,
			strings.Join(missing, ", "), strings.ToLower(strings.Join(missing, ",")))
	}
	return nil
}
