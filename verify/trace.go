package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/report"
)

// DefaultTraceViolations is how many violations a trace holds unless told
// otherwise: the worst, enough to see a pattern, few enough to look at.
const DefaultTraceViolations = 20

// HowToOpenTrace says how to look at a trace file.
const HowToOpenTrace = "open it in https://ui.perfetto.dev or chrome://tracing " +
	"(Debian's perfetto package has no trace processor)"

// The trace's tracks. Each waiting task is its own thread (pid its tgid,
// tid its pid); the CPUs are threads of a made-up process whose pid and
// tids no task can have (the kernel's pids stay below 2^22), and a track
// that needs a second lane, because two violations overlap on it, gets
// a made-up tid too.
const (
	cpuTracksPID = 1 << 30
	// cpuSubTracks: per CPU, what it ran, its sched_ext callbacks, and
	// sched_ext's bypass mode.
	cpuSubTracks   = 3
	cpuRunTrack    = 0
	cpuCbTrack     = 1
	cpuBypassTrack = 2
	firstExtraTID  = cpuTracksPID + 1<<20
)

// traceEvent is one event of the Chrome JSON trace event format.
type traceEvent struct {
	Name  string         `json:"name"`
	Cat   string         `json:"cat,omitempty"`
	Ph    string         `json:"ph"`
	TS    *usec          `json:"ts,omitempty"`
	Dur   *usec          `json:"dur,omitempty"`
	PID   int            `json:"pid"`
	TID   int            `json:"tid"`
	Scope string         `json:"s,omitempty"`
	Args  map[string]any `json:"args,omitempty"`
}

// Phases of the events a trace holds.
const (
	phSlice    = "X" // a complete event: ts and dur
	phInstant  = "i" // a moment on a thread (s "t")
	phCounter  = "C" // a counter's values from ts on
	phMetadata = "M" // names and order of processes and threads
)

// usec is a time written in microseconds, as the format wants, to the
// nanosecond: three decimals, never a float's rounding.
type usec time.Duration

func at(d time.Duration) *usec { u := usec(d); return &u }

// MarshalJSON writes u as a decimal number of microseconds.
func (u usec) MarshalJSON() ([]byte, error) {
	ns := int64(u)
	sign := ""
	if ns < 0 {
		sign, ns = "-", -ns
	}
	return fmt.Appendf(nil, "%s%d.%03d", sign, ns/1000, ns%1000), nil
}

// traceDoc is the JSON object form of a trace.
type traceDoc struct {
	TraceEvents     []traceEvent      `json:"traceEvents"`
	DisplayTimeUnit string            `json:"displayTimeUnit"`
	OtherData       map[string]string `json:"otherData"`
}

// WriteTrace writes the first max violations of vs (the worst first, as
// Result.Worst keeps them; max <= 0: DefaultTraceViolations) in the
// Chrome JSON trace event format: per violation the waiting task's track
// (its timer's delivery, its wait, the way back out of its sleep call;
// the timer's expiry, wake-up, switch-in and the moment the bound ran
// out as instants; the bound as a counter) and its CPU's track (the
// explanation's parts laid out as PartOrder says, named tasks by name,
// kind and class), and, where they apply, the CPU's time in sched_ext
// callbacks and its bypass mode on tracks of their own.
func WriteTrace(w io.Writer, vs []Violation, max int) error {
	if max <= 0 {
		max = DefaultTraceViolations
	}
	vs = vs[:min(max, len(vs))]
	tb := &traceBuilder{lanes: map[trackKey][]trackLane{}, procs: map[int]bool{}, nextTID: firstExtraTID}
	// Lanes are handed out in time order, so that a track takes a second
	// lane only where two violations really overlap.
	order := make([]int, len(vs))
	tls := make([]timeline, len(vs))
	for i := range vs {
		order[i], tls[i] = i, newTimeline(vs[i])
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(tls[a].first() - tls[b].first()) })
	for _, i := range order {
		tb.add(i+1, tls[i])
	}
	doc := traceDoc{
		TraceEvents:     append(tb.meta, tb.events...),
		DisplayTimeUnit: "ns",
		OtherData: map[string]string{
			"producer":   "hotlane verify",
			"violations": fmt.Sprintf("the %d worst, by their wait (args.violation: 1 is the worst)", len(vs)),
			"clock":      "CLOCK_MONOTONIC",
			"cpu_parts":  PartOrder,
		},
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// WriteTraceFile writes WriteTrace's trace to path, all or nothing,
// readable by its owner alone: it names the machine's tasks.
func WriteTraceFile(path string, vs []Violation, max int) error {
	return safefile.Write(path, safefile.OwnerOnly, func(w io.Writer) error { return WriteTrace(w, vs, max) })
}

// WriteTraceFile writes the trace of the run's worst max violations to
// path (WriteTraceFile) and notes it for the report. Without a violation
// it writes nothing and returns ErrNoViolation.
func (r *Result) WriteTraceFile(path string, max int) error {
	if len(r.Worst) == 0 {
		return ErrNoViolation
	}
	if max <= 0 {
		max = DefaultTraceViolations
	}
	if err := WriteTraceFile(path, r.Worst, max); err != nil {
		return err
	}
	r.Trace = &TraceFile{Path: path, Violations: min(max, len(r.Worst))}
	return nil
}

// TraceFile is a trace a Result was written to.
type TraceFile struct {
	Path       string `json:"path"`
	Violations int    `json:"violations"`
}

// trackKey names a track: a thread's lane 0.
type trackKey struct {
	pid, tid int
	name     string
	sort     int
}

type trackLane struct {
	tid int
	end time.Duration
}

// traceBuilder collects a trace's events and hands out its tracks.
type traceBuilder struct {
	meta, events []traceEvent
	lanes        map[trackKey][]trackLane
	procs        map[int]bool
	nextTID      int
}

// track returns the tid of a lane of k free over [start, end], naming a
// new lane if none is.
func (tb *traceBuilder) track(k trackKey, start, end time.Duration) int {
	lanes := tb.lanes[k]
	for i := range lanes {
		if lanes[i].end <= start {
			lanes[i].end = end
			return lanes[i].tid
		}
	}
	tid, name := k.tid, k.name
	if len(lanes) > 0 {
		tid = tb.nextTID
		tb.nextTID++
		name = fmt.Sprintf("%s (%d)", k.name, len(lanes)+1)
	}
	tb.lanes[k] = append(lanes, trackLane{tid: tid, end: end})
	if !tb.procs[k.pid] {
		tb.procs[k.pid] = true
		proc, sort := fmt.Sprintf("process %d", k.pid), 1
		if k.pid == cpuTracksPID {
			proc, sort = "CPUs: what ran while a task waited", 0
		}
		tb.meta = append(tb.meta,
			traceEvent{Name: "process_name", Ph: phMetadata, PID: k.pid, Args: map[string]any{"name": proc}},
			traceEvent{Name: "process_sort_index", Ph: phMetadata, PID: k.pid, Args: map[string]any{"sort_index": sort}})
	}
	tb.meta = append(tb.meta,
		traceEvent{Name: "thread_name", Ph: phMetadata, PID: k.pid, TID: tid, Args: map[string]any{"name": name}},
		traceEvent{Name: "thread_sort_index", Ph: phMetadata, PID: k.pid, TID: tid, Args: map[string]any{"sort_index": k.sort}})
	return tid
}

func (tb *traceBuilder) slice(pid, tid int, name, cat string, start, dur time.Duration, args map[string]any) {
	tb.events = append(tb.events, traceEvent{Name: name, Cat: cat, Ph: phSlice, TS: at(start), Dur: at(dur), PID: pid, TID: tid, Args: args})
}

func (tb *traceBuilder) instant(pid, tid int, name string, when time.Duration, args map[string]any) {
	tb.events = append(tb.events, traceEvent{Name: name, Ph: phInstant, Scope: "t", TS: at(when), PID: pid, TID: tid, Args: args})
}

// cpuTrack is a CPU's sub-track's key.
func cpuTrack(cpu uint32, sub int, name string) trackKey {
	n := int(cpu)*cpuSubTracks + sub
	return trackKey{pid: cpuTracksPID, tid: cpuTracksPID + 1 + n, name: name, sort: n}
}

// add writes the events of the violation ranked rank (1: the worst).
func (tb *traceBuilder) add(rank int, tl timeline) {
	v := tl.v
	tgid, pid := int(v.TGID), int(v.PID)
	if tgid == 0 {
		tgid = pid
	}
	task := tb.track(trackKey{pid: tgid, tid: pid, name: v.Comm, sort: 0}, min(tl.cause, tl.wake, tl.viewStart), tl.end)
	id := map[string]any{"violation": rank}
	with := func(more map[string]any) map[string]any {
		m := map[string]any{"violation": rank}
		for k, x := range more {
			m[k] = x
		}
		return m
	}

	// The task.
	if v.Caused {
		tb.slice(tgid, task, "timer delivery", "delivery", tl.cause, v.TimerDelivery, id)
		tb.instant(tgid, task, "timer expiry", tl.cause, id)
	}
	wait := with(map[string]any{
		"comm": v.Comm, "pid": v.PID, "tgid": v.TGID, "class": v.Class, "cpu": v.CPU,
		"wait_ns": int64(v.Latency), "felt_ns": int64(v.Felt),
	})
	name := "waited " + report.Duration(v.Latency)
	if v.Bound > 0 {
		wait["bound_ns"], wait["view"] = int64(v.Bound), string(v.View)
		name += fmt.Sprintf(" (%s %s, bound %s)", v.View, report.Duration(v.Measured()), report.Duration(v.Bound))
	}
	if v.Why != nil {
		wait["explanation"], wait["cause"] = v.Why.String(), v.Why.Cause
		if v.Why.Migrated {
			wait["from_cpu"] = v.Why.FromCPU
		}
	} else {
		wait["ran_before"] = fmt.Sprintf("%s[%d]", v.PrevComm, v.PrevPID)
	}
	tb.slice(tgid, task, name, "wait", tl.wake, v.Latency, wait)
	tb.instant(tgid, task, "wake-up", tl.wake, id)
	tb.instant(tgid, task, "switch-in on cpu "+strconv.Itoa(int(v.CPU)), tl.switchIn, id)
	if v.Resume > 0 {
		tb.slice(tgid, task, "back out of the sleep call", "resume", tl.switchIn, v.Resume, id)
	}
	if tl.crossed > 0 && tl.crossed <= tl.viewEnd {
		tb.instant(tgid, task, "bound "+report.Duration(v.Bound)+" exceeded", tl.crossed, with(map[string]any{"view": string(v.View)}))
	}
	if v.Bound > 0 {
		counter := fmt.Sprintf("bound of %s[%d] (us)", v.Comm, v.PID)
		tb.events = append(tb.events,
			traceEvent{Name: counter, Ph: phCounter, TS: at(tl.viewStart), PID: tgid, Args: map[string]any{"bound": float64(v.Bound) / 1e3}},
			traceEvent{Name: counter, Ph: phCounter, TS: at(tl.viewEnd), PID: tgid, Args: map[string]any{"bound": 0}})
	}
	if v.Why != nil && v.Why.Migrated {
		tb.instant(tgid, task, fmt.Sprintf("last ran on cpu %d", v.Why.FromCPU), tl.wake, id)
	}

	// Its CPU.
	start := tl.switchIn
	if len(tl.parts) > 0 {
		start = tl.parts[0].start
	}
	cpuName := fmt.Sprintf("cpu %d", v.CPU)
	cpu := tb.track(cpuTrack(v.CPU, cpuRunTrack, cpuName), start, tl.switchIn)
	for _, p := range tl.parts {
		args := with(map[string]any{"kind": p.kind, "ns": int64(p.dur)})
		if p.task != nil {
			args["pid"], args["comm"], args["class"] = p.task.PID, p.task.Comm, p.task.Class
		}
		tb.slice(cpuTracksPID, cpu, p.Name(), p.kind, p.start, p.dur, args)
	}
	tb.instant(cpuTracksPID, cpu, fmt.Sprintf("switch-in: %s[%d]", v.Comm, v.PID), tl.switchIn, id)
	if v.Why == nil {
		return
	}
	if cb := v.Why.ExtCallbacks; cb > 0 {
		t := tb.track(cpuTrack(v.CPU, cpuCbTrack, cpuName+" sched_ext callbacks"), tl.switchIn-cb, tl.switchIn)
		tb.slice(cpuTracksPID, t, "sched_ext callbacks (inside the parts above)", "sched_ext_callbacks", tl.switchIn-cb, cb,
			with(map[string]any{"ns": int64(cb)}))
	}
	if v.Why.SchedExtBypassed {
		t := tb.track(cpuTrack(v.CPU, cpuBypassTrack, cpuName+" sched_ext bypass"), start, tl.switchIn)
		tb.slice(cpuTracksPID, t, "sched_ext bypass mode, at some time in this window", "bypass", start, tl.switchIn-start, id)
	}
	if v.Why.SchedExtExited {
		tb.instant(tgid, task, "sched_ext exited during the wait", tl.switchIn, id)
	}
}
