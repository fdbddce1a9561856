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
