package verify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// histOf is a histogram of the given waits, in ns.
func histOf(ns ...uint64) *Histogram {
	h := &Histogram{}
	for _, v := range ns {
		h.Record(v)
	}
	return h
}

// The class table has each class's felt and wait views, and the timer
// delivery where a timer woke something; the thread table both views. A
// view missing from a report (an older hotlane's JSON) reads as empty.
func TestTextShowsEachView(t *testing.T) {
	res := &Result{Snapshot: &Snapshot{Hook: HookTpBTF,
		Classes: []ClassLatency{
			{Class: "inference", Hist: histOf(1000, 2000), Felt: histOf(5000, 6000), TimerDelivery: histOf(4000)},
			{Class: "normal", Hist: histOf(3000)}, // no felt view, no timers
		},
		Tasks: []TaskLatency{{PID: 20, TGID: 20, Comm: "infer-a", Class: "inference", Hist: histOf(1000), Felt: histOf(5000)}},
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

// A bound on the selected tasks is checked against every class's waits
// together (the filters left only the selected tasks in them), and the
// text and JSON reports say which tasks each bound covered. None of them
// waiting is "checked against nothing", told apart from a class without
// samples.
func TestBoundOnSelectedTasks(t *testing.T) {
	snap := &Snapshot{Hook: HookTpBTF, Classes: []ClassLatency{
		{Class: "inference", Hist: histOf(1e6), Felt: histOf(3e6)},
		{Class: "normal", Hist: histOf(2e6), Felt: histOf(8e6)},
	}}
	bounds, err := ParseBoundsFor("max<=5ms;inference:max<=5ms", Target{Selected: true})
	if err != nil {
		t.Fatal(err)
	}
	res := &Result{Snapshot: snap, Pass: true}
	res.check(bounds, snap, "pid 1234")
	if res.Pass || len(res.Bounds) != 2 {
		t.Fatalf("result %+v, want FAIL with 2 bounds", res)
	}
	sel, inf := res.Bounds[0], res.Bounds[1]
	if v := sel.Verdicts[0]; v.Pass || v.Measured != 8*time.Millisecond || !sel.Selected {
		t.Errorf("the selected tasks' max<=5ms: %+v, want FAIL at normal's 8ms", sel)
	}
	if v := inf.Verdicts[0]; !v.Pass || v.Measured != 3*time.Millisecond {
		t.Errorf("inference:max<=5ms: %+v, want PASS at 3ms", inf)
	}
	if res.UnmeasuredSelection != "" || len(res.Unmeasured) != 0 {
		t.Errorf("unmeasured %q, %v with samples in every class", res.UnmeasuredSelection, res.Unmeasured)
	}

	var text strings.Builder
	if err := res.WriteText(&text, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"bound covers: the selected tasks (pid 1234), whatever their class\nselected tasks FAIL max<=5ms: max is 8ms, over 5ms\n",
		"bound covers: the selected tasks (pid 1234) of class inference\ninference PASS max<=5ms: max is 3ms, within 5ms\n",
		"verdict: FAIL\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var js strings.Builder
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Bounds []struct {
			Class    string `json:"class"`
			Selected bool   `json:"selected"`
			Covers   string `json:"covers"`
		} `json:"bounds"`
	}
	if err := json.Unmarshal([]byte(js.String()), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Bounds) != 2 || !doc.Bounds[0].Selected || doc.Bounds[0].Covers != "the selected tasks (pid 1234), whatever their class" ||
		doc.Bounds[1].Selected || doc.Bounds[1].Class != "inference" || doc.Bounds[1].Covers != "the selected tasks (pid 1234) of class inference" {
		t.Errorf("JSON bounds %+v", doc.Bounds)
	}

	empty := &Snapshot{Hook: HookTpBTF, Classes: []ClassLatency{{Class: "inference", Hist: histOf(), Felt: histOf()}, {Class: "normal", Hist: histOf(), Felt: histOf()}}}
	res = &Result{Snapshot: empty, Pass: true}
	res.check(bounds[:1], empty, "pid 1234")
	if res.Pass || res.UnmeasuredSelection != "pid 1234" || len(res.Unmeasured) != 0 {
		t.Errorf("no selected task waited: pass %v, unmeasured selection %q, classes %v; want FAIL, \"pid 1234\", none",
			res.Pass, res.UnmeasuredSelection, res.Unmeasured)
	}
}
