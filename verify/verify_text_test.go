package verify

import (
	"strings"
	"testing"
)

// The tracer's own threads wait for CPUs too, but a user asking for the
// worst tasks wants theirs: HideTGID leaves one process out of the list,
// which still has TopTasks entries when there are enough others.
func TestTopTasksHideTheTracer(t *testing.T) {
	hist := func(ns uint64) *Histogram {
		h := &Histogram{}
		h.Record(ns)
		return h
	}
	res := &Result{Snapshot: &Snapshot{Hook: HookTpBTF, Tasks: []TaskLatency{
		{PID: 10, TGID: 10, Comm: "hotlane", Class: "normal", Hist: hist(9e6)},
		{PID: 11, TGID: 10, Comm: "hotlane", Class: "normal", Hist: hist(8e6)},
		{PID: 20, TGID: 20, Comm: "infer-a", Class: "inference", Hist: hist(7e6)},
		{PID: 30, TGID: 30, Comm: "infer-b", Class: "inference", Hist: hist(6e6)},
	}}}
	var b strings.Builder
	if err := res.WriteText(&b, TextOptions{TopTasks: 2, HideTGID: 10}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "hotlane") || !strings.Contains(out, "top 2 tasks") ||
		!strings.Contains(out, "infer-a") || !strings.Contains(out, "infer-b") {
		t.Errorf("top tasks with the tracer's process hidden:\n%s", out)
	}
	b.Reset()
	if err := res.WriteText(&b, TextOptions{TopTasks: 2}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "hotlane") || strings.Contains(b.String(), "infer-a") {
		t.Errorf("top tasks with nothing hidden:\n%s", b.String())
	}
}
