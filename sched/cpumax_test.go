package sched

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCPUQuotas(t *testing.T) {
	root := t.TempDir()
	for dir, max := range map[string]string{
		"":              "", // the root has no cpu.max
		"system.slice":  "max 100000\n",
		"limited":       "50000 100000\n",
		"limited/inner": "max 100000\n",
		"deep":          "max 100000\n",
		"deep/a":        "max 100000\n",
		"deep/a/b":      "20000 10000\n",
		// A quota below a cgroup that does not enable the cpu
		// controller for its children is a stale file the kernel
		// does not have: not walked.
		"off":   "max 100000\n",
		"off/x": "10000 100000\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if max != "" {
			if err := os.WriteFile(filepath.Join(root, dir, "cpu.max"), []byte(max), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, dir := range []string{"", "limited", "deep", "deep/a"} {
		if err := os.WriteFile(filepath.Join(root, dir, "cgroup.subtree_control"), []byte("cpuset cpu io memory\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "off", "cgroup.subtree_control"), []byte("memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []Quota{
		{Cgroup: filepath.Join(root, "deep/a/b"), Max: "20000 10000"},
		{Cgroup: filepath.Join(root, "limited"), Max: "50000 100000"},
	}
	if diff := cmp.Diff(want, CPUQuotas(root)); diff != "" {
		t.Errorf("quotas (-want +got):\n%s", diff)
	}
	if got := CPUQuotas(filepath.Join(root, "missing")); len(got) != 0 {
		t.Errorf("a missing hierarchy: %v, want none", got)
	}
}

func TestQuotaNote(t *testing.T) {
	if got := QuotaNote(nil, false); got != "" {
		t.Errorf("no quotas: %q, want nothing", got)
	}
	var qs []Quota
	for _, c := range []string{"a", "b", "c", "d", "e"} {
		qs = append(qs, Quota{Cgroup: "/sys/fs/cgroup/" + c, Max: "50000 100000"})
	}
	want := "cpu.max is not enforced for the tasks hotlane schedules: 5 cgroups set a quota their tasks may exceed while it runs: " +
		"/sys/fs/cgroup/a (50000 100000), /sys/fs/cgroup/b (50000 100000), /sys/fs/cgroup/c (50000 100000) and 2 more"
	if got := QuotaNote(qs, false); got != want {
		t.Errorf("note:\n got %q\nwant %q", got, want)
	}
	want = "cpu.max is not enforced for the tasks hotlane schedules: 1 cgroup sets a quota their tasks may exceed while it runs: /sys/fs/cgroup/a (50000 100000)"
	if got := QuotaNote(qs[:1], false); got != want {
		t.Errorf("note:\n got %q\nwant %q", got, want)
	}
	want = "cpu.max is enforced (to within a tick per CPU in each period): 1 cgroup sets a quota: /sys/fs/cgroup/a (50000 100000)"
	if got := QuotaNote(qs[:1], true); got != want {
		t.Errorf("note:\n got %q\nwant %q", got, want)
	}
}
