package sched_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/topology"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/vm/vmtest"
	"github.com/hotlane/hotlane/workloads"
)

// scaleTopology is the guest of TestVMScale: two sockets of eight CPUs,
// each its own LLC and NUMA node, the shape the scheduler failed to load
// on (it ran past the verifier's limit in its loops over CPUs).
var scaleTopology = vm.Topology{Sockets: 2, Cores: 8, Threads: 1, Nodes: 2}

// topologyEnv passes the topology the guest was booted with to its tests.
const topologyEnv = "HOTLANE_TEST_TOPOLOGY"

// TestVMScale boots a guest with more CPUs than any other test, in two
// sockets and two nodes, and runs there the tests that depend on the
// machine's size: the guest sees the shape asked for, every program
// verifies within budget, and the scheduler loads, runs a saturated
// machine and unloads.
func TestVMScale(t *testing.T) {
	vmtest.RunGuestTests(t, vmtest.Options{
		Run:      "^TestGuest(Topology|ClocksourceIsTSC|VerifierComplexity|LoadUnload|ScaleSaturated)$",
		Topology: &scaleTopology, Memory: "4G", MultiThreadedTCG: true,
		Env:     []string{topologyEnv + "=" + scaleTopology.String()},
		Timeout: 15 * time.Minute,
	})
}

// The guest sees the LLCs and nodes it was booted with, and the scheduler
// the same.
func TestGuestTopology(t *testing.T) {
	vmtest.RequireGuest(t)
	spec := os.Getenv(topologyEnv)
	if spec == "" {
		t.Skip(topologyEnv + " is not set: this boot asked for no topology")
	}
	want, err := vm.ParseTopology(spec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := topology.Read(topology.SysfsRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("asked for %s; the guest has %s", want, got)
	if len(got.CPUs) != want.CPUs() || len(got.LLCs) != want.Sockets || len(got.Nodes) != want.Nodes ||
		len(got.Cores) != want.Sockets*want.Cores {
		t.Errorf("the guest's topology does not match %s", want)
	}
	perNode := want.CPUs() / want.Nodes
	for n, cpus := range got.Nodes {
		if len(cpus) != perNode || cpus[0] != n*perNode {
			t.Errorf("node %d has CPUs %s; want %d from %d", n, topology.FormatList(cpus), perNode, n*perNode)
		}
	}
}

// The guest keeps time with the TSC, as the machines it stands for do.
// Without tsc=reliable the two-socket guest fell back to the HPET, and
// every timestamp the kernel, the tracer and the scheduler took was an
// emulated device access.
func TestGuestClocksourceIsTSC(t *testing.T) {
	vmtest.RequireGuest(t)
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil {
		t.Fatal(err)
	}
	if cs := strings.TrimSpace(string(b)); cs != "tsc" {
		t.Errorf("the guest's clocksource is %q, not tsc", cs)
	}
}

// The whole machine saturated: lane tasks spinning on half the CPUs beside
// twice as many normal hogs as CPUs. The scheduler stays enabled, both
// classes get work done, and it unloads cleanly.
func TestGuestScaleSaturated(t *testing.T) {
	vmtest.RequireGuest(t)
	s := load(t, policy.Default("spin"), sched.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := runtime.NumCPU()
	res, err := workloads.Mix{Hogs: []workloads.Hogs{
		{Comm: "spinner", Threads: n / 2},
		{Comm: "hog", Threads: 2 * n},
	}}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info, exited, err := s.Exited(); err != nil || exited {
		t.Fatalf("scheduler exited on a saturated %d-CPU machine: %v %v\n%s", n, info, err, info.Dump)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d CPUs: classes %+v, preempt kicks %d, guard turns %d; hog work %v",
		n, st.Classes, st.PreemptKicks, st.GuardDispatches, res.HogWork)
	for i, w := range res.HogWork {
		if w == 0 {
			t.Errorf("hog group %d did no work", i)
		}
	}
	info, err := s.Close()
	if err != nil || info.IsError() {
		t.Fatalf("unload: %v %v", info, err)
	}
	waitState(t, "disabled", hangDeadline)
}
