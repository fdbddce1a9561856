package workloads_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// sysbench's threads test, one thread per CPU and nothing else to run,
// keeps every CPU of the 2-CPU guest busy under hotlane. Its threads do
// little but yield. A yield once looked to the scheduler like a lane
// preemption, which resumes the task at the end of its CPU's local queue:
// two threads that met in one CPU's local queue then took turns there for
// good, where no other CPU serves them, while the other CPU idled (each
// CPU was busy 46-55 % of the time, and sysbench did 0.11x EEVDF's work;
// now 95 %). /proc/stat counts a CPU busy for as long as it runs a task,
// however slowly the host runs the guest, so this asks what the scheduler
// did, not how fast. (On a guest of more CPUs than the host has cores,
// EEVDF's own CPUs idle a third of the time under this test.)
func TestGuestYieldersKeepEveryCPUBusy(t *testing.T) {
	vmtest.RequireGuest(t)
	if runtime.NumCPU() != 2 {
		t.Skipf("needs the 2-CPU guest of TestVM, this one has %d", runtime.NumCPU())
	}
	table, err := policy.Default("infer").Compile("")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sched.Load(sched.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cpus := runtime.NumCPU()
	before := busyTicks(t)
	out, err := exec.Command("/usr/bin/sysbench", "threads", "--threads="+strconv.Itoa(cpus), "--time=4", "run").CombinedOutput()
	if err != nil {
		t.Fatalf("sysbench: %v\n%s", err, out)
	}
	after := busyTicks(t)
	if info, exited, err := s.Exited(); err != nil || exited {
		t.Fatalf("the scheduler exited during the run: %v (%v)", info, err)
	}
	busy := float64(after.busy-before.busy) / float64(after.all-before.all)
	t.Logf("%d CPUs busy %.0f%% of the time under sysbench threads (%d threads)", cpus, 100*busy, cpus)
	if busy < 0.75 {
		t.Errorf("the CPUs were busy %.0f%% of the time while a yielding thread per CPU was runnable: want them all busy\n%s", 100*busy, out)
	}
}

// cpuTicks are the clock ticks of all CPUs together from /proc/stat:
// busy (user, nice, system, irq, softirq) and all (busy and idle, iowait).
type cpuTicks struct{ busy, all uint64 }

func busyTicks(t *testing.T) cpuTicks {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var user, nice, system, idle, iowait, irq, softirq uint64
	if _, err := fmt.Sscanf(line, "cpu %d %d %d %d %d %d %d", &user, &nice, &system, &idle, &iowait, &irq, &softirq); err != nil {
		t.Fatalf("/proc/stat %q: %v", line, err)
	}
	busy := user + nice + system + irq + softirq
	return cpuTicks{busy: busy, all: busy + idle + iowait}
}
