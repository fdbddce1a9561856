package sched

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MaxQuotas is how many cgroups with a cpu.max quota the scheduler keeps
// (HL_QUOTA_MAX in sched_quota.bpf.h). A quota set while that many are
// kept is not enforced: its cgroup runs unlimited, and
// Stats.QuotasUnenforced counts it.
const MaxQuotas = 4096

// Quota is a cgroup whose cpu.max limits its CPU time.
type Quota struct {
	Cgroup string // its directory
	Max    string // cpu.max as written: "QUOTA PERIOD" in µs
}

// CPUQuotas lists the cgroups under root, the cgroup v2 mount
// (policy.CgroupRoot), whose cpu.max sets a quota. sched_ext does not
// apply cpu.max to the tasks a BPF scheduler runs; from 6.17 it passes
// the limits on, as ops.cgroup_set_bandwidth, for the scheduler to
// enforce, which hotlane does on 7.1 and later (EnforcesCPUMax). On older
// kernels those tasks may use more CPU than cpu.max allows while it runs,
// which the user should hear about. Only the branches where the cpu controller is
// enabled are walked (a cgroup has a cpu.max when its parent's
// cgroup.subtree_control holds "cpu"). A missing or unreadable hierarchy
// is no quota; cgroups that vanish during the walk are skipped. Quotas of
// a v1 cpu hierarchy (cpu.cfs_quota_us, hybrid hosts) are not looked at.
func CPUQuotas(root string) []Quota {
	var quotas []Quota
	var walk func(dir string)
	walk = func(dir string) {
		if !enables(dir, "cpu") {
			return
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			child := filepath.Join(dir, e.Name())
			if data, err := os.ReadFile(filepath.Join(child, "cpu.max")); err == nil {
				max := strings.TrimSpace(string(data))
				if f := strings.Fields(max); len(f) > 0 && f[0] != "max" {
					quotas = append(quotas, Quota{Cgroup: child, Max: max})
				}
			}
			walk(child)
		}
	}
	walk(root)
	return quotas
}

// enables reports whether the cgroup at dir enables controller for its
// children.
func enables(dir, controller string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	return err == nil && slices.Contains(strings.Fields(string(data)), controller)
}

// EnforcesCPUMax reports whether the loaded scheduler enforces cgroup
// cpu.max quotas: its object for 7.1 and later does
// (bpf/include/sched_quota.bpf.h); the kernels the older objects run on
// pass cpu.max on from 6.17 at the earliest, and those objects do not
// take it.
func (s *Scheduler) EnforcesCPUMax() bool { return s.Object == newestObject }

// QuotaNote says which cgroups' quotas a run enforces, or will not, the
// first few by name, or "" for none.
func QuotaNote(quotas []Quota, enforced bool) string {
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
	if enforced {
		return fmt.Sprintf("cpu.max is enforced (to within a tick per CPU in each period): %s: %s%s", n, strings.Join(list, ", "), more)
	}
	return fmt.Sprintf("cpu.max is not enforced for the tasks hotlane schedules: %s their tasks may exceed while it runs: %s%s",
		n, strings.Join(list, ", "), more)
}
