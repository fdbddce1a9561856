package sched_test

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// structOpsCosts reads the BPF run-time statistics of every struct_ops
// program loaded now, keyed by callback (the name after its first '_':
// simple_enqueue and hl_enqueue are both "enqueue"). Statistics count only
// while BPF_ENABLE_STATS is held.
func structOpsCosts(t *testing.T) map[string]report.ProgramCost {
	t.Helper()
	out := map[string]report.ProgramCost{}
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, unix.ENOENT) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded meanwhile
		}
		info, err := p.Info()
		if err == nil && info.Type == ebpf.StructOps {
			if st, err := p.Stats(); err == nil {
				_, callback, _ := strings.Cut(info.Name, "_")
				out[callback] = report.ProgramCost{Program: info.Name, Runs: st.RunCount, Total: st.Runtime}
			}
		}
		p.Close()
	}
}

// What each callback costs, hotlane's beside the upstream scx_simple's,
// under the same workload in the same boot (issue goal: hotlane at most
// 2x scx_simple's mean per callback). A benchmark more than a test: the
// figures are logged; it fails only if a scheduler's callbacks never ran.
func TestGuestCallbackCostBesideScxSimple(t *testing.T) {
	vmtest.RequireGuest(t)
	const run = 4 * time.Second
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("BPF_ENABLE_STATS: %v", err)
	}
	defer stats.Close()

	simple := exec.Command(vm.ScxSimpleGuestPath)
	if err := simple.Start(); err != nil {
		t.Fatal(err)
	}
	waitState(t, "enabled", 30*time.Second)
	latencyUnder(t, run)
	simpleCosts := structOpsCosts(t)
	simple.Process.Signal(syscall.SIGINT)
	simple.Wait()
	waitState(t, "disabled", 5*time.Second)

	s := load(t, policy.Default("infer"), sched.Config{MeasureCost: true})
	latencyUnder(t, run)
	costs, err := s.Cost()
	if err != nil {
		t.Fatal(err)
	}
	hotlaneCosts := map[string]report.ProgramCost{}
	for _, c := range costs {
		_, callback, _ := strings.Cut(c.Program, "_")
		hotlaneCosts[callback] = c
	}

	t.Logf("%-12s %14s %14s %9s", "callback", "hotlane/run", "scx_simple/run", "ratio")
	for _, cb := range []string{"select_cpu", "enqueue", "dispatch", "running", "stopping", "enable"} {
		h, sc := hotlaneCosts[cb], simpleCosts[cb]
		ratio := 0.0
		if sc.PerRun() > 0 {
			ratio = float64(h.PerRun()) / float64(sc.PerRun())
		}
		t.Logf("%-12s %14v %14v %8.2fx  (runs %d / %d)", cb, h.PerRun(), sc.PerRun(), ratio, h.Runs, sc.Runs)
	}
	all, allSimple := report.TotalCost(costs), report.TotalCost(mapValues(simpleCosts))
	t.Logf("%-12s %14v %14v", "all", all.PerRun(), allSimple.PerRun())
	for _, cb := range []string{"enqueue", "dispatch", "running", "stopping"} {
		if hotlaneCosts[cb].Runs == 0 || simpleCosts[cb].Runs == 0 {
			t.Errorf("%s: hotlane ran %d times, scx_simple %d: nothing to compare", cb, hotlaneCosts[cb].Runs, simpleCosts[cb].Runs)
		}
	}
}

func mapValues(m map[string]report.ProgramCost) []report.ProgramCost {
	var out []report.ProgramCost
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// What device matchers cost: the fentry hook's BPF run time per ioctl on a
// device of the policy and on another device, and the time of the ioctl
// call itself with no scheduler, with the default policy (no hooks) and
// with a device policy, all in one boot; then the lane's callbacks under
// the same load with and without a device matcher in the policy. A
// benchmark: the figures are logged; it fails only if the hook missed an
// ioctl.
func TestGuestDeviceHookCost(t *testing.T) {
	vmtest.RequireGuest(t)
	const n = 20000
	ioctls := func(path string) time.Duration {
		t.Helper()
		fd, err := unix.Open(path, unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		start := time.Now()
		for range n {
			unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TCGETS, 0)
		}
		return time.Since(start) / n
	}
	byName := func(s *sched.Scheduler) map[string]report.ProgramCost {
		t.Helper()
		costs, err := s.Cost()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]report.ProgramCost{}
		for _, c := range costs {
			out[c.Program] = c
		}
		return out
	}
	sub := func(a, b report.ProgramCost) report.ProgramCost {
		return report.ProgramCost{Program: a.Program, Runs: a.Runs - b.Runs, Total: a.Total - b.Total}
	}

	bare := ioctls("/dev/full")
	s := load(t, policy.Default("infer"), sched.Config{MeasureCost: true})
	plain := ioctls("/dev/full")
	plainCallbacks := byName(s)
	latencyUnder(t, 4*time.Second)
	plainLane := byName(s)
	s.Close()
	waitState(t, "disabled", 5*time.Second)

	p, err := policy.Parse("device-policy", []byte(`{"classes": [
		{"name": "inference", "high_priority": true, "preempt": true, "match": [{"comm_prefix": "infer"}, {"device": "/dev/full", "idle": "30s"}]},
		{"name": "normal"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s = load(t, p, sched.Config{MeasureCost: true})
	c0 := byName(s)
	hooked := ioctls("/dev/full")
	c1 := byName(s)
	other := ioctls("/dev/null")
	c2 := byName(s)
	latencyUnder(t, 4*time.Second)
	c3 := byName(s)

	match, miss := sub(c1["hl_device_ioctl"], c0["hl_device_ioctl"]), sub(c2["hl_device_ioctl"], c1["hl_device_ioctl"])
	t.Logf("hl_device_ioctl per ioctl: %v on a device of the policy (%d runs), %v on another (%d runs)", match.PerRun(), match.Runs, miss.PerRun(), miss.Runs)
	t.Logf("ioctl(TCGETS) on /dev/full per call: %v without a scheduler, %v with the default policy, %v with a device policy (%.2fx); /dev/null %v",
		bare, plain, hooked, float64(hooked)/float64(plain), other)
	if match.Runs < n || miss.Runs < n {
		t.Errorf("the ioctl hook ran %d and %d times for %d ioctls each", match.Runs, miss.Runs, n)
	}
	t.Logf("%-12s %16s %16s %9s", "callback", "default policy", "device policy", "ratio")
	for _, cb := range []string{"select_cpu", "enqueue", "dispatch", "tick", "running", "stopping"} {
		name := "hl_" + cb
		a, b := sub(plainLane[name], plainCallbacks[name]), sub(c3[name], c2[name])
		ratio := 0.0
		if a.PerRun() > 0 {
			ratio = float64(b.PerRun()) / float64(a.PerRun())
		}
		t.Logf("%-12s %16v %16v %8.2fx  (runs %d / %d)", cb, a.PerRun(), b.PerRun(), ratio, a.Runs, b.Runs)
	}
}
