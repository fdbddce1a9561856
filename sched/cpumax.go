package sched

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Quota is a cgroup whose cpu.max limits its CPU time.
type Quota struct {
	Cgroup string // its directory
	Max    string // cpu.max as written: "QUOTA PERIOD" in µs
}

// CPUQuotas lists the cgroups under root, the cgroup v2 mount
// (policy.CgroupRoot), whose cpu.max sets a quota.
// sched_ext leaves bandwidth limits to the BPF scheduler
// (ops.cgroup_set_bandwidth, 6.17 on), and hotlane does not enforce them:
// while it runs, the tasks it schedules may use more CPU than cpu.max
// allows, which the user should hear about before relying on it. A
// missing or unreadable hierarchy is no quota; cgroups that vanish during
// the walk are skipped.
func CPUQuotas(root string) []Quota {
	var quotas []Quota
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() && path != root {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || d.Name() != "cpu.max" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		max := strings.TrimSpace(string(data))
		if f := strings.Fields(max); len(f) > 0 && f[0] != "max" {
			quotas = append(quotas, Quota{Cgroup: filepath.Dir(path), Max: max})
		}
		return nil
	})
	return quotas
}

// QuotaNote says which cgroups' quotas a run will not enforce, the first
// few by name, or "" for none.
func QuotaNote(quotas []Quota) string {
	if len(quotas) == 0 {
		return ""
	}
	const shown = 3
	var list []string
	for _, q := range quotas[:min(len(quotas), shown)] {
		list = append(list, fmt.Sprintf("%s (%s)", q.Cgroup, q.Max))
	}
	more := ""
	if len(quotas) > shown {
		more = fmt.Sprintf(" and %d more", len(quotas)-shown)
	}
	n := fmt.Sprintf("%d cgroups set a quota", len(quotas))
	if len(quotas) == 1 {
		n = "1 cgroup sets a quota"
	}
	return fmt.Sprintf("cpu.max is not enforced for the tasks hotlane schedules: %s their tasks may exceed while it runs: %s%s",
		n, strings.Join(list, ", "), more)
}
