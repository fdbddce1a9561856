package vm

import (
	"strings"
	"testing"
)

func TestStallReport(t *testing.T) {
	log := strings.Join([]string{
		"<6>[    1.0] sched_ext: BPF scheduler \"hotlane\" enabled",
		"<3>[  366.0] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
		"<3>[  366.0] rcu: \tTasks blocked on level-0 rcu_node (CPUs 0-1): P43/1:b..l",
		"<6>[  366.0] task:khugepaged      state:R  running task",
		"<6>[  366.0] Call Trace:",
		"<6>[  366.0]  khugepaged+0x2ed/0x800",
		"",
	}, "\n")
	got := stallReport(log, 4)
	want := strings.Join(strings.Split(log, "\n")[1:5], "\n")
	if got != want {
		t.Errorf("stallReport(log, 4) =\n%s\nwant\n%s", got, want)
	}
	if got := stallReport(log, 100); !strings.HasSuffix(got, "khugepaged+0x2ed/0x800") {
		t.Errorf("stallReport(log, 100) does not run to the log's end:\n%s", got)
	}
	if got := stallReport("<6>[ 1.0] rcu: Preemptible hierarchical RCU implementation.\n", 10); got != "" {
		t.Errorf("a log without a stall gave %q", got)
	}
	self := "<3>[ 9.0] rcu: INFO: rcu_preempt self-detected stall on CPU\n<3>[ 9.0] rcu: \t1-....: (8382 ticks this GP)"
	if got := stallReport(self, 10); got != self {
		t.Errorf("a CPU's self-detected stall gave %q", got)
	}
}
