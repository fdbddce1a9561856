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
	if strings.Contains(out, "hotlane") || !strings.Contains(out, "top 2 threads") ||
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

// The class table has each class's felt and wait views, and the timer
// delivery where a timer woke something; the thread table both views. A
// view missing from a report (an older hotlane's JSON) reads as empty.
func TestTextShowsEachView(t *testing.T) {
	hist := func(ns ...uint64) *Histogram {
		h := &Histogram{}
		for _, v := range ns {
			h.Record(v)
		}
		return h
	}
	res := &Result{Snapshot: &Snapshot{Hook: HookTpBTF,
		Classes: []ClassLatency{
			{Class: "inference", Hist: hist(1000, 2000), Felt: hist(5000, 6000), TimerDelivery: hist(4000)},
			{Class: "normal", Hist: hist(3000)}, // no felt view, no timers
		},
		Tasks: []TaskLatency{{PID: 20, TGID: 20, Comm: "infer-a", Class: "inference", Hist: hist(1000), Felt: hist(5000)}},
	}}
	var b strings.Builder
	if err := res.WriteText(&b, TextOptions{TopTasks: 1}); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"inference felt 2 5.12µs", "wait 2 1.01µs", "timer 1 4.00µs",
		"normal felt 0 - - - - - wait 1 3.00µs",
		"20 infer-a inference felt 1 5.00µs", "wait 1 1.00µs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(out, "normal felt 0 - - - - - wait 1 3.00µs 3.00µs 3.00µs 3.00µs 3.00µs timer") {
		t.Errorf("a timer row for a class no timer woke:\n%s", b.String())
	}
}
