package policy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CgroupRoot returns where the cgroup v2 hierarchy is mounted, the root that
// cgroup paths in a policy are relative to: DefaultCgroupRoot on most
// systems, but e.g. /sys/fs/cgroup/unified on hosts with the hybrid v1/v2
// layout, where /sys/fs/cgroup itself is a tmpfs of v1 hierarchies and
// resolving paths there would yield wrong ids.
func CgroupRoot() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("find the cgroup2 mount: %w", err)
	}
	return cgroup2Mount(data)
}

// cgroup2Mount picks the cgroup2 mount point from mountinfo text, preferring
// DefaultCgroupRoot when several are mounted.
func cgroup2Mount(mountinfo []byte) (string, error) {
	var found []string
	for line := range bytes.Lines(mountinfo) {
		// id parent major:minor root mountpoint options [optional...] - fstype source super-options
		pre, post, ok := strings.Cut(strings.TrimSpace(string(line)), " - ")
		fields := strings.Fields(pre)
		if !ok || len(fields) < 5 || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		found = append(found, unescapeMount(fields[4]))
	}
	switch {
	case len(found) == 0:
		return "", errors.New("no cgroup2 filesystem is mounted; mount one (mount -t cgroup2 none " + DefaultCgroupRoot + ") to use cgroup matchers")
	case contains(found, DefaultCgroupRoot):
		return DefaultCgroupRoot, nil
	}
	return found[0], nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
