package verify

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/report"
)

const (
	us = time.Microsecond
	ms = time.Millisecond
)

// parsedEvent is a trace event as a reader of the format sees it, its
// times turned back into nanoseconds.
type parsedEvent struct {
	Name, Cat, Ph, Scope string
	PID, TID             int
	TS, Dur              time.Duration
	HasTS, HasDur        bool
	Args                 map[string]any
}

// parsedTrace is a trace file read back and checked against the Trace
// Event Format: the JSON object form, known phases, times in
// microseconds to the nanosecond, integer pid and tid, every thread
// named, and no two slices of one thread overlapping.
type parsedTrace struct {
	events []parsedEvent
	// threads names each (pid, tid) track.
	threads map[[2]int]string
}

func parseTrace(t *testing.T, data []byte) parsedTrace {
	t.Helper()
	var doc struct {
		TraceEvents     []map[string]json.RawMessage `json:"traceEvents"`
		DisplayTimeUnit string                       `json:"displayTimeUnit"`
		OtherData       map[string]string            `json:"otherData"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("the trace is not the JSON object form of the format: %v\n%.2000s", err, data)
	}
	if doc.DisplayTimeUnit != "ns" && doc.DisplayTimeUnit != "ms" {
		t.Errorf("displayTimeUnit %q: the format knows ms and ns", doc.DisplayTimeUnit)
	}
	pt := parsedTrace{threads: map[[2]int]string{}}
	for i, raw := range doc.TraceEvents {
		var e parsedEvent
		for key, val := range raw {
			var err error
			switch key {
			case "name":
				err = json.Unmarshal(val, &e.Name)
			case "cat":
				err = json.Unmarshal(val, &e.Cat)
			case "ph":
				err = json.Unmarshal(val, &e.Ph)
			case "s":
				err = json.Unmarshal(val, &e.Scope)
			case "pid":
				err = json.Unmarshal(val, &e.PID)
			case "tid":
				err = json.Unmarshal(val, &e.TID)
			case "ts":
				e.TS, err = microseconds(val)
				e.HasTS = true
			case "dur":
				e.Dur, err = microseconds(val)
				e.HasDur = true
			case "args":
				err = json.Unmarshal(val, &e.Args)
			default:
				err = fmt.Errorf("unknown field")
			}
			if err != nil {
				t.Fatalf("event %d: %s %s: %v", i, key, val, err)
			}
		}
		switch e.Ph {
		case phSlice:
			if !e.HasTS || !e.HasDur || e.Dur < 0 {
				t.Errorf("slice %q: ts %v dur %v: a complete event needs both, dur not negative", e.Name, e.TS, e.Dur)
			}
		case phInstant:
			if !e.HasTS || e.Scope != "t" {
				t.Errorf("instant %q: ts %v, scope %q: want a thread-scoped moment", e.Name, e.TS, e.Scope)
			}
		case phCounter:
			if !e.HasTS || len(e.Args) == 0 {
				t.Errorf("counter %q without ts or values", e.Name)
			}
		case phMetadata:
			if e.Name == "thread_name" {
				pt.threads[[2]int{e.PID, e.TID}], _ = e.Args["name"].(string)
			}
		default:
			t.Errorf("event %q: phase %q is none the trace writes", e.Name, e.Ph)
		}
		if e.Name == "" {
			t.Errorf("event %d has no name", i)
		}
		pt.events = append(pt.events, e)
	}
	slicesOf := map[[2]int][]parsedEvent{}
	for _, e := range pt.events {
		if e.Ph != phSlice && e.Ph != phInstant {
			continue
		}
		track := [2]int{e.PID, e.TID}
		if pt.threads[track] == "" {
			t.Errorf("%s %q on pid %d tid %d, a track with no thread_name", e.Ph, e.Name, e.PID, e.TID)
		}
		if e.Ph == phSlice {
			slicesOf[track] = append(slicesOf[track], e)
		}
	}
	for track, ss := range slicesOf {
		sort.Slice(ss, func(i, j int) bool { return ss[i].TS < ss[j].TS })
		for i := 1; i < len(ss); i++ {
			if prev := ss[i-1]; prev.TS+prev.Dur > ss[i].TS {
				t.Errorf("track %q: %q [%v, +%v] overlaps %q at %v", pt.threads[track], prev.Name, prev.TS, prev.Dur, ss[i].Name, ss[i].TS)
			}
		}
	}
	return pt
}

// microseconds reads a JSON number of microseconds, as nanoseconds: at
// most three decimals, so that no nanosecond is lost to a float.
func microseconds(raw json.RawMessage) (time.Duration, error) {
	s := string(raw)
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 3 {
		return 0, fmt.Errorf("%s: more than nanosecond precision", s)
	}
	frac += strings.Repeat("0", 3-len(frac))
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, err
	}
	if strings.HasPrefix(whole, "-") {
		f = -f
	}
	return time.Duration(w*1000 + f), nil
}

// of returns the events of the violation ranked rank.
func (pt parsedTrace) of(rank int) []parsedEvent {
	var out []parsedEvent
	for _, e := range pt.events {
		if r, ok := e.Args["violation"].(float64); ok && int(r) == rank {
			out = append(out, e)
		}
	}
	return out
}

// checkAgainst checks the events of the violation ranked rank against v:
// its wait on the task's own track, its moments, and its CPU's slices
// adding up, kind by kind and task by task, to the explanation's figures.
func (pt parsedTrace) checkAgainst(t *testing.T, rank int, v Violation) {
	t.Helper()
	switchIn := v.At - v.Resume
	wake := switchIn - v.Latency
	var waits int
	byKind := map[string]time.Duration{}
	byTask := map[uint32]time.Duration{}
	instants := map[string]time.Duration{}
	for _, e := range pt.of(rank) {
		switch {
		case e.Ph == phSlice && e.Cat == "wait":
			waits++
			if e.PID != int(v.TGID) || e.TID != int(v.PID) {
				t.Errorf("violation %d: its wait is on pid %d tid %d, not the task's own track (%d, %d)", rank, e.PID, e.TID, v.TGID, v.PID)
			}
			if e.TS != wake || e.Dur != v.Latency {
				t.Errorf("violation %d: wait slice at %v for %v, want the wake-up %v for the wait %v", rank, e.TS, e.Dur, wake, v.Latency)
			}
		case e.Ph == phSlice && e.PID == cpuTracksPID && strings.HasPrefix(pt.threads[[2]int{e.PID, e.TID}], fmt.Sprintf("cpu %d", v.CPU)) &&
			!strings.Contains(pt.threads[[2]int{e.PID, e.TID}], "sched_ext"):
			byKind[e.Cat] += e.Dur
			if pid, ok := e.Args["pid"].(float64); ok {
				byTask[uint32(pid)] += e.Dur
			}
			if e.TS < switchIn-max(v.Latency, v.Felt-v.Resume) || e.TS+e.Dur > switchIn {
				t.Errorf("violation %d: cpu slice %q [%v, +%v] outside the explained window, which ends at the switch-in %v", rank, e.Name, e.TS, e.Dur, switchIn)
			}
		case e.Ph == phInstant:
			instants[e.Name] = e.TS
		}
	}
	if waits != 1 {
		t.Errorf("violation %d: %d wait slices, want 1", rank, waits)
	}
	if instants["wake-up"] != wake || instants[fmt.Sprintf("switch-in on cpu %d", v.CPU)] != switchIn {
		t.Errorf("violation %d: instants %v, want the wake-up at %v and the switch-in at %v", rank, instants, wake, switchIn)
	}
	if v.Why == nil {
		if len(byKind) > 0 {
			t.Errorf("violation %d has no explanation, yet cpu slices %v", rank, byKind)
		}
		return
	}
	for _, p := range v.Why.Parts {
		if byKind[p.Kind] != p.Time {
			t.Errorf("violation %d: the cpu's %s slices add up to %v, the explanation says %v", rank, p.Kind, byKind[p.Kind], p.Time)
		}
		delete(byKind, p.Kind)
	}
	if len(byKind) > 0 {
		t.Errorf("violation %d: cpu slices of kinds the explanation lacks: %v", rank, byKind)
	}
	for _, task := range v.Why.Tasks {
		if byTask[task.PID] != task.Time {
			t.Errorf("violation %d: %s[%d]'s slices add up to %v, the explanation says %v", rank, task.Comm, task.PID, byTask[task.PID], task.Time)
		}
	}
}

// testViolations are the cases a trace must draw: a timer wake-up late
// to its return, two waits on one CPU at once, one that migrated under a
// sched_ext scheduler in bypass mode, and one without explanation.
func testViolations() []Violation {
	base := 1000 * time.Second
	rt := &Explanation{Window: 20 * ms,
		Parts: Parts{{KindRTDL, 19 * ms}, {KindFair, 700 * us}, {KindIRQ, 200 * us}, {KindUncovered, 100 * us}}, Cause: KindRTDL,
		Tasks: []BlamedTask{{PID: 42, Comm: "hl-rthog", Class: "normal", Kind: KindRTDL, Time: 19 * ms}, {PID: 43, Comm: "kworker/1:0", Class: "normal", Kind: KindFair, Time: 500 * us}}}
	return []Violation{
		{At: base + 20*ms + 30*us, Latency: 20*ms - 123, PID: 7, TGID: 5, Comm: "infer-victim", Class: "inference", CPU: 1,
			Caused: true, Felt: 20*ms + 330*us - 123, TimerDelivery: 300 * us, Resume: 30 * us, Bound: 5 * ms, View: ViewFelt, Why: rt},
		// Waiting at once on cpu 1 with the one before: its own lane.
		{At: base + 15*ms, Latency: 12 * ms, PID: 8, TGID: 5, Comm: "infer-2", Class: "inference", CPU: 1, Felt: 12 * ms, Bound: 5 * ms, View: ViewWait,
			Why: &Explanation{Window: 12 * ms, Parts: Parts{{KindRTDL, 12 * ms}}, Cause: KindRTDL,
				Tasks: []BlamedTask{{PID: 42, Comm: "hl-rthog", Class: "normal", Kind: KindRTDL, Time: 12 * ms}}}},
		{At: base + 2*time.Second, Latency: 9 * ms, PID: 9, TGID: 9, Comm: "infer-3", Class: "inference", CPU: 0, Felt: 9 * ms, Bound: 5 * ms, View: ViewFelt,
			Why: &Explanation{Window: 9 * ms, Parts: Parts{{KindSchedExt, 6 * ms}, {KindSoftirq, 3 * ms}}, Cause: KindSchedExt,
				FromCPU: 1, Migrated: true, SchedExtBypassed: true, BypassKnown: true, SchedExtExited: true, ExtCallbacks: 2 * ms,
				// A task named with more time than its kind has: laid no longer.
				Tasks: []BlamedTask{{PID: 50, Comm: "odd", Kind: KindSchedExt, Time: 7 * ms}}}},
		{At: base + 3*time.Second, Latency: 6 * ms, PID: 10, TGID: 10, Comm: "bare", Class: "inference", CPU: 0, Felt: 6 * ms, PrevComm: "x", PrevPID: 3},
	}
}

func TestTraceFollowsTheFormat(t *testing.T) {
	vs := testViolations()
	var b bytes.Buffer
	if err := WriteTrace(&b, vs, 0); err != nil {
		t.Fatal(err)
	}
	pt := parseTrace(t, b.Bytes())
	for i, v := range vs {
		if i == 2 {
			continue // its named task is capped: checked below
		}
		pt.checkAgainst(t, i+1, v)
	}
	names := map[string]bool{}
	for _, name := range pt.threads {
		names[name] = true
	}
	for _, want := range []string{"infer-victim", "infer-2", "cpu 1", "cpu 1 (2)", "cpu 0", "cpu 0 sched_ext callbacks", "cpu 0 sched_ext bypass"} {
		if !names[want] {
			t.Errorf("no track %q among %v", want, names)
		}
	}
	// The timer wake-up: delivery, then the wait, then the way out, end
	// to end on its track; the bound ran out 5ms after the expiry.
	v := vs[0]
	ev := map[string]parsedEvent{}
	for _, e := range pt.of(1) {
		ev[e.Name] = e
	}
	expiry := v.At - v.Felt
	if d := ev["timer delivery"]; d.TS != expiry || d.Dur != v.TimerDelivery {
		t.Errorf("timer delivery at %v for %v, want %v for %v", d.TS, d.Dur, expiry, v.TimerDelivery)
	}
	if r := ev["back out of the sleep call"]; r.TS != v.At-v.Resume || r.Dur != v.Resume {
		t.Errorf("resume at %v for %v, want %v for %v", r.TS, r.Dur, v.At-v.Resume, v.Resume)
	}
	if b := ev["bound "+report.Duration(5*ms)+" exceeded"]; b.TS != expiry+5*ms {
		t.Errorf("the bound ran out at %v, want %v (the felt view starts at the expiry)", b.TS, expiry+5*ms)
	}
	if ev["hl-rthog[42]"].Args["class"] != "normal" || ev["hl-rthog[42]"].Cat != KindRTDL {
		t.Errorf("the hog's slice: %+v", ev["hl-rthog[42]"])
	}
	// The wait view: the bound ran out 5ms after the wake-up.
	for _, e := range pt.of(2) {
		if e.Name == "bound "+report.Duration(5*ms)+" exceeded" && e.TS != vs[1].At-vs[1].Latency+5*ms {
			t.Errorf("wait view: the bound ran out at %v, want 5ms after the wake-up", e.TS)
		}
	}
	// Capped: the sched_ext part is 6ms whatever the named task had.
	var ext, odd, cb time.Duration
	var bypass, exited bool
	for _, e := range pt.of(3) {
		switch {
		case e.Cat == KindSchedExt:
			ext += e.Dur
			if e.Name == "odd[50]" {
				odd += e.Dur
			}
		case e.Cat == "sched_ext_callbacks":
			cb += e.Dur
		case e.Cat == "bypass":
			bypass = true
		case e.Name == "sched_ext exited during the wait":
			exited = true
		}
	}
	if ext != 6*ms || odd != 6*ms || cb != 2*ms || !bypass || !exited {
		t.Errorf("sched_ext %v (odd %v), callbacks %v, bypass %v, exited %v; want 6ms, 6ms, 2ms, both", ext, odd, cb, bypass, exited)
	}
	// The bound as a counter: up over the view, down after.
	var counter []parsedEvent
	for _, e := range pt.events {
		if e.Ph == phCounter && e.PID == 5 && strings.Contains(e.Name, "infer-victim") {
			counter = append(counter, e)
		}
	}
	if len(counter) != 2 || counter[0].Args["bound"] != 5000.0 || counter[1].Args["bound"] != 0.0 || counter[0].TS != expiry || counter[1].TS != v.At {
		t.Errorf("bound counter %+v, want 5000us from the expiry to the end of the felt wait", counter)
	}

	// --trace-max: the worst first.
	b.Reset()
	if err := WriteTrace(&b, vs, 1); err != nil {
		t.Fatal(err)
	}
	one := parseTrace(t, b.Bytes())
	if len(one.of(1)) == 0 || len(one.of(2)) > 0 {
		t.Errorf("a trace of at most 1 violation has the second's events, or not the first's")
	}
}

// The file is written through safefile, readable by its owner only, and
// the report names it and says how to open it.
func TestTraceFileAndReport(t *testing.T) {
	dir := t.TempDir()
	r := &Result{Snapshot: &Snapshot{}, Worst: testViolations()}
	path := filepath.Join(dir, "trace.json")
	if err := r.WriteTraceFile(path, 3); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("trace file: %v, mode %v; want 0600", err, fi.Mode())
	}
	data, _ := os.ReadFile(path)
	parseTrace(t, data)
	if err := r.WritePlotFile(filepath.Join(dir, "worst.svg")); err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"trace of the 3 worst violations: " + path, "ui.perfetto.dev", "chrome://tracing", "timeline of the worst violation: " + filepath.Join(dir, "worst.svg")} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	none := &Result{}
	if err := none.WritePlotFile(filepath.Join(dir, "none.svg")); err != ErrNoViolation {
		t.Errorf("plot without violations: %v, want ErrNoViolation", err)
	}
	if err := none.WriteTraceFile(filepath.Join(dir, "none.json"), 0); err != ErrNoViolation {
		t.Errorf("trace without violations: %v, want ErrNoViolation", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("files %v: a picture without violations was written", entries)
	}
}

// The SVG timeline draws the task's bars and marks, one bar per laid
// part of the CPU, and the bound, and is well-formed.
func TestPlotOfAViolation(t *testing.T) {
	for i, v := range testViolations() {
		var b bytes.Buffer
		if err := WritePlot(&b, v); err != nil {
			t.Fatal(err)
		}
		svg := b.String()
		dec := xml.NewDecoder(strings.NewReader(svg))
		rects := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("violation %d: not well-formed: %v", i, err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
				rects++
			}
		}
		tl := newTimeline(v)
		want := 2 + len(tl.parts) + 1 // background, legend box for the wait, parts, the wait's bar
		if !strings.Contains(svg, ">wake-up<") || !strings.Contains(svg, ">switch-in<") || !strings.Contains(svg, v.Comm) {
			t.Errorf("violation %d: the task, its wake-up or its switch-in not drawn", i)
		}
		if rects < want {
			t.Errorf("violation %d: %d rects, want at least %d (one per part)", i, rects, want)
		}
		if v.Bound > 0 && !strings.Contains(svg, "bound "+report.Duration(5*ms)+" ran out") {
			t.Errorf("violation %d: the bound is not drawn", i)
		}
	}
}

// The parts are laid end to end up to the switch-in, the uncovered part
// first, each named task no longer than its kind.
func TestLayParts(t *testing.T) {
	e := testViolations()[0].Why
	end := 100 * ms
	laid := layParts(e, end)
	var names []string
	at := laid[0].start
	for _, p := range laid {
		if p.start != at {
			t.Errorf("%s starts at %v, want %v (end to end)", p.Name(), p.start, at)
		}
		at += p.dur
		names = append(names, p.Name())
	}
	if at != end {
		t.Errorf("the parts end at %v, want the switch-in %v", at, end)
	}
	want := "uncovered (older than the CPU's kept history),hl-rthog[42],kworker/1:0[43],other fair tasks,hardirq"
	if strings.Join(names, ",") != want {
		t.Errorf("order %v, want %v", names, want)
	}
}
