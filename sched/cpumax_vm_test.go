package sched_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// cpu.max holds a cgroup to its quota under hotlane as under EEVDF: six
// spinning threads, free to use both CPUs, in a child of a cgroup whose
// cpu.max is 20 ms per 100 ms (a fifth of one CPU). The quota is the
// parent's, so only the walk up the task's cgroups finds it; there are
// more threads than CPUs, so some are queued when the quota runs out. They
// get 0.5-1.3x the quota (charged at ticks, a period runs over by up to a
// tick per CPU and pays it back in the next), and once the quota is
// lifted, more than twice it: the held tasks are let go.
func TestGuestCPUMax(t *testing.T) {
	vmtest.RequireGuest(t)
	const (
		quota  = 20 * time.Millisecond
		period = 100 * time.Millisecond
		run    = 3 * time.Second
	)
	spin := startSpinner(t, spinnerSpec{threads: 6, cpu: -1})
	parent := quotaCgroup(t, "hotlane-quota", spin.Process.Pid)
	setCPUMax(t, parent, strconv.Itoa(int(quota/time.Microsecond))+" "+strconv.Itoa(int(period/time.Microsecond)))
	// share is the spinners' CPU time over d, as a multiple of the quota.
	share := func(scheduler string, d time.Duration) float64 {
		time.Sleep(500 * time.Millisecond) // settled under this scheduler and quota
		u0 := spinUse(t, spin.Process.Pid)
		time.Sleep(d)
		u1 := spinUse(t, spin.Process.Pid)
		got := float64(u1.ran-u0.ran) / float64(d) / (float64(quota) / float64(period))
		t.Logf("%s: the spinners got %.2fx the quota (%v in %v)", scheduler, got, (u1.ran - u0.ran).Round(time.Millisecond), d)
		return got
	}
	share("EEVDF", run)
	s := load(t, policy.Default("infer"), sched.Config{Timeout: sched.DefaultTimeout})
	if !s.EnforcesCPUMax() {
		t.Skipf("object %s does not take cpu.max from the kernel (only 7.1+'s does)", s.Object)
	}
	before, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got := share("hotlane", run); got < 0.5 || got > 1.3 {
		t.Errorf("under hotlane the spinners got %.2fx their cgroup's quota, not 0.5-1.3x", got)
	}
	after, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	t.Logf("hotlane: %d tasks held for their quota", d.Throttled)
	if d.Throttled == 0 {
		t.Errorf("no task was held for its quota (throttled %d)", d.Throttled)
	}
	setCPUMax(t, parent, "max")
	if got := share("hotlane, quota lifted", time.Second); got < 2 {
		t.Errorf("with the quota lifted the spinners got %.2fx it, not more than 2x: still held", got)
	}
	if got := readSysfs(t, "state"); got != "enabled" {
		t.Errorf("sched_ext state %q after the quota test, want enabled", got)
	}
}

// A quota set while the scheduler keeps MaxQuotas is counted as not
// enforced, one for each, and the scheduler stays enabled; a quota set
// once cgroups with quotas are gone is kept again. MaxQuotas + 3 children
// of one cgroup each get a cpu.max (no task runs in them); then three of
// the kept ones are removed and the three left out get a new quota.
func TestGuestCPUMaxTableFull(t *testing.T) {
	vmtest.RequireGuest(t)
	const over = 3
	s := load(t, policy.Default("infer"), sched.Config{Timeout: sched.DefaultTimeout})
	if !s.EnforcesCPUMax() {
		t.Skipf("object %s does not take cpu.max from the kernel (only 7.1+'s does)", s.Object)
	}
	parent := newCgroup(t, "/sys/fs/cgroup", "hotlane-quotas", "cpu")
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
		t.Fatalf("enable the cpu controller below %s: %v", parent, err)
	}
	var children []string
	t.Cleanup(func() { // before the parent's removal
		for _, c := range children {
			os.Remove(c)
		}
	})
	before, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for i := range sched.MaxQuotas + over {
		dir := filepath.Join(parent, fmt.Sprintf("q%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		children = append(children, dir)
		setCPUMax(t, dir, "50000 100000")
	}
	full, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got := full.Sub(before).QuotasUnenforced; got != over {
		t.Errorf("%d cgroups with quotas, %d kept: %d counted unenforced, want %d", sched.MaxQuotas+over, sched.MaxQuotas, got, over)
	}
	for _, dir := range children[:over] {
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel takes a removed cgroup offline (ops.cgroup_exit) a
	// moment later, from a work queue.
	waitNoDying(t, parent)
	for _, dir := range children[sched.MaxQuotas:] {
		setCPUMax(t, dir, "60000 100000")
	}
	after, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Sub(full).QuotasUnenforced; got != 0 {
		t.Errorf("quotas set after %d cgroups with quotas went: %d counted unenforced, want none", over, got)
	}
	if info, exited, err := s.Exited(); err != nil || exited {
		t.Fatalf("the scheduler ended: %v (%v)", info, err)
	}
}

// waitNoDying waits until no cgroup below dir is still being removed.
func waitNoDying(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.stat"))
		if err != nil {
			t.Fatal(err)
		}
		var dying string
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "nr_dying_descendants" {
				dying = f[1]
			}
		}
		if dying == "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s cgroups still being removed after 30 s", dir, dying)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// quotaCgroup makes a cgroup name with the cpu controller on, and a child
// of it holding process pid; it returns the parent's directory.
func quotaCgroup(t *testing.T, name string, pid int) string {
	t.Helper()
	parent := newCgroup(t, "/sys/fs/cgroup", name, "cpu")
	moveToCgroup(t, newCgroup(t, parent, "inner", "cpu"), pid)
	return parent
}

func setCPUMax(t *testing.T, dir, max string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(max), 0o644); err != nil {
		t.Fatalf("cpu.max = %s: %v", max, err)
	}
}
