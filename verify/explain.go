package verify

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/internal/cstr"
	"github.com/hotlane/hotlane/report"
)

// Kinds of CPU time in an Explanation, named as in its JSON. A task's kind
// is its scheduling class at the switch that gave it the CPU.
const (
	KindIdle      = "idle"      // the idle task: nothing to run, or a CPU still waking
	KindFair      = "fair"      // the kernel's fair class (EEVDF)
	KindSchedExt  = "sched_ext" // chosen by the sched_ext BPF scheduler
	KindRTDL      = "rt_dl"     // realtime or deadline priority, PI boosts included
	KindTask      = "task"      // a task whose class the tracer could not tell
	KindIRQ       = "irq"       // hardirq handlers
	KindSoftirq   = "softirq"   // softirqs, in ksoftirqd or on interrupt exit
	KindUncovered = "uncovered" // older than the CPU's kept history
)

// segKinds are the kinds of enum seg_kind, in its order.
var segKinds = [...]string{KindIdle, KindFair, KindSchedExt, KindRTDL, KindTask}

// Explanation says where a violation's wait went: what the CPU that ended
// it did from the wake-up (or preemption), or from the timer's expiry if
// that came first, to the switch-in. The parts add up to that Window, but
// for the irq time of the oldest task's run, which is shared out in
// proportion to its overlap with the window.
type Explanation struct {
	// Window is the time explained: the wait, or the felt wait up to the
	// switch-in when a timer woke the task late (the delivery is then in
	// the parts too).
	Window time.Duration `json:"window_ns"`
	// Parts is the wait split by kind, largest first; zero parts are left
	// out.
	Parts Parts `json:"parts"`
	// Tasks are the tasks that had the CPU meanwhile, longest first (at
	// most three; their irq time is in the irq and softirq parts).
	Tasks []BlamedTask `json:"tasks,omitempty"`
	// Cause is the largest part's kind.
	Cause string `json:"cause"`
	// FromCPU is where the task last ran (-1: not seen), Migrated says
	// it was not this CPU.
	FromCPU  int  `json:"from_cpu"`
	Migrated bool `json:"migrated"`
	// SchedExtExited says the task began waiting in the sched_ext class
	// and got the CPU outside it: the BPF scheduler was unloaded or
	// ejected meanwhile. SchedExtKnown says whether the class could be
	// told at all (the kernel must list ext_sched_class in kallsyms).
	SchedExtExited bool `json:"sched_ext_exited"`
	SchedExtKnown  bool `json:"sched_ext_known"`
	// SchedExtBypassed says sched_ext was in bypass mode at some time
	// during the wait: the kernel had set the BPF scheduler aside (while
	// enabling or disabling it, suspending, or after a stall) and ran
	// every task from one FIFO. BypassKnown says whether bypass mode was
	// watched at all (Tracer.BypassNote says why not).
	SchedExtBypassed bool `json:"sched_ext_bypassed"`
	BypassKnown      bool `json:"sched_ext_bypass_known"`
	// ExtCallbacks is the CPU's time in the sched_ext scheduler's
	// callbacks meanwhile, inside the parts above (a callback runs in a
	// task's or an interrupt's time); zero where they were not timed
	// (Tracer.CallbacksNote says why).
	ExtCallbacks time.Duration `json:"sched_ext_callbacks_ns"`
}

// Part is some of a wait's time, of one kind.
type Part struct {
	Kind string        `json:"kind"`
	Time time.Duration `json:"ns"`
}

// BlamedTask is a task that ran while a violation's task waited.
type BlamedTask struct {
	PID  uint32 `json:"pid"`
	Comm string `json:"comm"`
	// Class is its hotlane class, Kind its scheduling class.
	Class string        `json:"class"`
	Kind  string        `json:"kind"`
	Time  time.Duration `json:"ns"`
}

// Flags of struct explanation.
const (
	exDone     = 1
	exMigrated = 2
	exExtKnown = 4
	exExtLeft  = 8
	exBypass   = 16
	exBypassOK = 32
)

// explanationOf turns the BPF side's record into an Explanation, or nil
// if the tracer did not work one out.
func explanationOf(r *bpf.RunqlatExplanation, classes []string) *Explanation {
	if r.Flags&exDone == 0 {
		return nil
	}
	e := &Explanation{
		FromCPU:          -1,
		Migrated:         r.Flags&exMigrated != 0,
		SchedExtKnown:    r.Flags&exExtKnown != 0,
		SchedExtExited:   r.Flags&exExtLeft != 0,
		SchedExtBypassed: r.Flags&exBypass != 0,
		BypassKnown:      r.Flags&exBypassOK != 0,
		ExtCallbacks:     time.Duration(r.ExtCbNs),
	}
	if r.FromCpu != ^uint32(0) {
		e.FromCPU = int(r.FromCpu)
	}
	// One part per kind of enum seg_kind: a different count of kinds
	// would not compile here.
	var byKind [len(segKinds)]uint64 = r.Ns
	for i, ns := range byKind {
		e.add(segKinds[i], time.Duration(ns))
	}
	e.add(KindIRQ, time.Duration(r.IrqNs))
	e.add(KindSoftirq, time.Duration(r.SoftirqNs))
	e.add(KindUncovered, time.Duration(r.UncoveredNs))
	sort.SliceStable(e.Parts, func(i, j int) bool { return e.Parts[i].Time > e.Parts[j].Time })
	if len(e.Parts) > 0 {
		e.Cause = e.Parts[0].Kind
	}
	for _, b := range r.Top {
		if b.Ns == 0 {
			continue
		}
		t := BlamedTask{PID: b.Pid, Comm: cstr.String(b.Comm[:]), Time: time.Duration(b.Ns), Kind: KindTask}
		if int(b.Kind) < len(segKinds) {
			t.Kind = segKinds[b.Kind]
		}
		if int(b.ClassId) < len(classes) {
			t.Class = classes[b.ClassId]
		}
		e.Tasks = append(e.Tasks, t)
	}
	sort.SliceStable(e.Tasks, func(i, j int) bool { return e.Tasks[i].Time > e.Tasks[j].Time })
	return e
}

func (e *Explanation) add(kind string, d time.Duration) {
	if d > 0 {
		e.Parts = append(e.Parts, Part{Kind: kind, Time: d})
	}
}

// Parts is a wait split by kind.
type Parts []Part

// Of returns the time of one kind.
func (ps Parts) Of(kind string) time.Duration {
	for _, p := range ps {
		if p.Kind == kind {
			return p.Time
		}
	}
	return 0
}

// String is the explanation in one line: the parts, the tasks, and what
// else is worth knowing.
func (e *Explanation) String() string {
	var parts []string
	for _, p := range e.Parts {
		parts = append(parts, p.Kind+" "+report.Duration(p.Time))
	}
	s := strings.Join(parts, ", ")
	if len(e.Tasks) > 0 {
		var ts []string
		for _, t := range e.Tasks {
			ts = append(ts, fmt.Sprintf("%s[%d] %s %s", t.Comm, t.PID, t.kindAndClass(), report.Duration(t.Time)))
		}
		s += "; ran: " + strings.Join(ts, ", ")
	}
	if e.ExtCallbacks > 0 {
		s += "; of that, sched_ext callbacks " + report.Duration(e.ExtCallbacks)
	}
	if e.Migrated {
		s += fmt.Sprintf("; migrated from cpu %d", e.FromCPU)
	}
	if e.SchedExtExited {
		s += "; sched_ext exited during the wait"
	}
	if e.SchedExtBypassed {
		s += "; sched_ext was bypassing the BPF scheduler"
	}
	return s
}

func (t BlamedTask) kindAndClass() string {
	if t.Class == "" {
		return t.Kind
	}
	return t.Kind + "/" + t.Class
}

// CauseSummary adds up the explanations of one class's violations.
type CauseSummary struct {
	Class      string `json:"class"`
	Violations uint64 `json:"violations"`
	// Explained is how many had an explanation; Parts and Tasks add up
	// theirs, largest first.
	Explained uint64        `json:"explained"`
	Wait      time.Duration `json:"wait_ns"`
	// Window adds up the explained windows (Explanation.Window): the
	// parts' shares are of it, not of Wait, which leaves out the timers'
	// delivery.
	Window time.Duration `json:"window_ns"`
	Parts  Parts         `json:"parts"`
	// ByCause counts violations by their largest part.
	ByCause map[string]uint64 `json:"by_cause"`
	// Tasks are the tasks named most, by the time they ran in these
	// violations (tasks of one comm and kind together), at most ten.
	Tasks []BlamedTask `json:"tasks,omitempty"`
	// SchedExtExited counts violations during which sched_ext exited;
	// Migrated those whose task last ran elsewhere.
	SchedExtExited uint64 `json:"sched_ext_exited"`
	Migrated       uint64 `json:"migrated"`
	// SchedExtBypassed counts violations that overlapped sched_ext's
	// bypass mode.
	SchedExtBypassed uint64 `json:"sched_ext_bypassed"`
	// ExtCallbacks adds up their time in sched_ext callbacks (inside
	// Parts).
	ExtCallbacks time.Duration `json:"sched_ext_callbacks_ns"`
}

// CauseSummaries adds violations up per class.
type CauseSummaries struct {
	classes map[string]*causeAcc
}

type causeAcc struct {
	s     CauseSummary
	parts map[string]time.Duration
	tasks map[[2]string]*BlamedTask
}

// Add counts one violation.
func (c *CauseSummaries) Add(v Violation) {
	if c.classes == nil {
		c.classes = map[string]*causeAcc{}
	}
	a := c.classes[v.Class]
	if a == nil {
		a = &causeAcc{s: CauseSummary{Class: v.Class, ByCause: map[string]uint64{}},
			parts: map[string]time.Duration{}, tasks: map[[2]string]*BlamedTask{}}
		c.classes[v.Class] = a
	}
	a.s.Violations++
	e := v.Why
	if e == nil {
		return
	}
	a.s.Explained++
	a.s.Wait += v.Latency
	a.s.Window += max(e.Window, v.Latency)
	a.s.ByCause[e.Cause]++
	for _, p := range e.Parts {
		a.parts[p.Kind] += p.Time
	}
	for _, t := range e.Tasks {
		k := [2]string{t.Comm, t.Kind}
		if a.tasks[k] == nil {
			a.tasks[k] = &BlamedTask{Comm: t.Comm, Kind: t.Kind, Class: t.Class, PID: t.PID}
		}
		// A run that began before the trace has no class (it was not
		// worked out): the first of a comm's runs to have one names it.
		if a.tasks[k].Class == "" {
			a.tasks[k].Class = t.Class
		}
		a.tasks[k].Time += t.Time
	}
	a.s.ExtCallbacks += e.ExtCallbacks
	if e.SchedExtExited {
		a.s.SchedExtExited++
	}
	if e.SchedExtBypassed {
		a.s.SchedExtBypassed++
	}
	if e.Migrated {
		a.s.Migrated++
	}
}

// Summaries returns one summary per class, by class name.
func (c *CauseSummaries) Summaries() []CauseSummary {
	var out []CauseSummary
	for _, name := range slices.Sorted(maps.Keys(c.classes)) {
		a := c.classes[name]
		s := a.s
		s.Parts = nil
		for kind, d := range a.parts {
			s.Parts = append(s.Parts, Part{Kind: kind, Time: d})
		}
		sort.Slice(s.Parts, func(i, j int) bool {
			if s.Parts[i].Time != s.Parts[j].Time {
				return s.Parts[i].Time > s.Parts[j].Time
			}
			return s.Parts[i].Kind < s.Parts[j].Kind
		})
		s.Tasks = nil
		for _, t := range a.tasks {
			s.Tasks = append(s.Tasks, *t)
		}
		sort.Slice(s.Tasks, func(i, j int) bool {
			if s.Tasks[i].Time != s.Tasks[j].Time {
				return s.Tasks[i].Time > s.Tasks[j].Time
			}
			return s.Tasks[i].Comm < s.Tasks[j].Comm
		})
		if len(s.Tasks) > 10 {
			s.Tasks = s.Tasks[:10]
		}
		// The pid of a comm seen under several pids means nothing.
		for i := range s.Tasks {
			s.Tasks[i].PID = 0
		}
		out = append(out, s)
	}
	return out
}

// writeCauses writes the summaries, one paragraph a class.
func writeCauses(w io.Writer, sums []CauseSummary) {
	for _, s := range sums {
		if s.Explained == 0 {
			continue
		}
		fmt.Fprintf(w, "%s: %d violations, %s waited in all", s.Class, s.Violations, report.Duration(s.Wait))
		window := max(s.Window, s.Wait)
		if window > s.Wait {
			fmt.Fprintf(w, ", %s from their timers' expiry", report.Duration(window))
		}
		fmt.Fprint(w, ":")
		for _, p := range s.Parts {
			if share := 100 * float64(p.Time) / float64(window); share >= 0.5 {
				fmt.Fprintf(w, " %s %.0f%%", p.Kind, share)
			} else {
				fmt.Fprintf(w, " %s <1%%", p.Kind)
			}
		}
		fmt.Fprintln(w)
		var causes []string
		for _, k := range slices.Sorted(maps.Keys(s.ByCause)) {
			causes = append(causes, fmt.Sprintf("%s %d", k, s.ByCause[k]))
		}
		fmt.Fprintf(w, "  largest part: %s\n", strings.Join(causes, ", "))
		for _, t := range s.Tasks {
			fmt.Fprintf(w, "  ran meanwhile: %-16s %-18s %s\n", t.Comm, t.kindAndClass(), report.Duration(t.Time))
		}
		if s.Migrated > 0 {
			fmt.Fprintf(w, "  %d migrated to the CPU that ran them\n", s.Migrated)
		}
		if s.ExtCallbacks > 0 {
			fmt.Fprintf(w, "  of that, in sched_ext callbacks: %s (%.1f%%)\n", report.Duration(s.ExtCallbacks), 100*float64(s.ExtCallbacks)/float64(window))
		}
		if s.SchedExtExited > 0 {
			fmt.Fprintf(w, "  %d spanned sched_ext exiting\n", s.SchedExtExited)
		}
		if s.SchedExtBypassed > 0 {
			fmt.Fprintf(w, "  %d overlapped sched_ext's bypass mode (the BPF scheduler set aside)\n", s.SchedExtBypassed)
		}
	}
}

// worstViolations keeps the n longest violations it is given.
type worstViolations struct {
	n    int
	kept []Violation
}

func (w *worstViolations) add(v Violation) {
	w.kept = append(w.kept, v)
	if len(w.kept) >= 2*w.n {
		w.trim()
	}
}

// trim sorts the kept violations, longest first, and drops the excess.
func (w *worstViolations) trim() []Violation {
	sort.SliceStable(w.kept, func(i, j int) bool { return w.kept[i].Latency > w.kept[j].Latency })
	if len(w.kept) > w.n {
		w.kept = w.kept[:w.n]
	}
	return w.kept
}
