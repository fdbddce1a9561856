package verify

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hotlane/hotlane/report"
)

// Options describe one verification run.
type Options struct {
	Tracer TracerConfig
	// Bounds to check at the end; each bound's tightest limit also sets
	// its class's violation threshold.
	Bounds []Bound
	// Duration of the run; it also ends when ctx is done. Zero: until
	// ctx is done (a service scraped by Prometheus).
	Duration time.Duration
	// Progress, if set, receives a line every ProgressInterval.
	Progress         io.Writer
	ProgressInterval time.Duration
	// Intervals, if set, receives every Interval one line per class: that
	// interval's run-queue waits (the wait view), as runqlat's interval
	// mode prints a histogram per interval.
	Intervals io.Writer
	Interval  time.Duration
	// Violations, if set, receives each streamed violation as a line,
	// at most ViolationLinesPerSecond a second (0: the default), with a
	// line for what each second left out.
	Violations              io.Writer
	ViolationLinesPerSecond int
	// OnViolation, if set, is a command (an argument vector, run without
	// a shell) started for a violation with its figures in the
	// environment (ViolationEnv): at most OnViolationPerSecond a second of
	// the violations' clock (0: DefaultActionsPerSecond) and one at a
	// time; the violations it is not started for are counted. Its output
	// goes to ActionOutput (nil: standard error). Run waits for the last
	// one to end; ctx ending kills it.
	OnViolation          []string
	OnViolationPerSecond int
	ActionOutput         io.Writer
	// StopOnViolation ends the run at the first violation, which fails
	// it, whatever the bounds' clauses say.
	StopOnViolation bool
	// Live, if set, is called with the tracer once it is attached (a
	// metrics endpoint reads it meanwhile); Run calls the function it
	// returns before it closes the tracer, whatever the outcome.
	Live func(*Tracer) (stop func())
}

// ClassVerdicts are the verdicts of one class's bound, or of the bound
// on the selected tasks.
type ClassVerdicts struct {
	Class    string    `json:"class"`
	View     View      `json:"view"`
	Verdicts []Verdict `json:"verdicts"`
	Selected bool      `json:"selected,omitempty"`
	// Covers says which tasks the bound covered (Bound.Covers).
	Covers string `json:"covers,omitempty"`
}

// bound is the bound these are the verdicts of, without its clauses.
func (cv ClassVerdicts) bound() Bound {
	return Bound{Class: cv.Class, View: cv.View, Selected: cv.Selected}
}

// Result is what a verification run found.
type Result struct {
	report.Header
	Snapshot *Snapshot       `json:"snapshot"`
	Bounds   []ClassVerdicts `json:"bounds"`
	// Pass: the run measured its whole duration and every bound held.
	Pass bool `json:"pass"`
	// Verdict is Pass in one word, or that a signal cut the run short.
	Verdict    report.Verdict `json:"verdict"`
	Violations uint64         `json:"violations_streamed"`
	// ViolationsNotPrinted were streamed but over the line rate limit.
	ViolationsNotPrinted uint64               `json:"violations_not_printed"`
	Cost                 []report.ProgramCost `json:"cost,omitempty"`
	CostError            string               `json:"cost_error,omitempty"`
	// Causes adds up, per class, where the violations' waits went (with
	// TracerConfig.Explain); Worst are the longest violations, at most
	// KeptViolations, longest first.
	Causes []CauseSummary `json:"causes,omitempty"`
	Worst  []Violation    `json:"violations,omitempty"`
	// StoppedBy is the violation that ended the run
	// (Options.StopOnViolation).
	StoppedBy *Violation `json:"stopped_by,omitempty"`
	// Actions says what became of Options.OnViolation.
	Actions *ActionCounts `json:"on_violation,omitempty"`
	// Trace and Plot are the pictures of the worst violations written
	// (WriteTraceFile, WritePlotFile).
	Trace *TraceFile `json:"trace,omitempty"`
	Plot  string     `json:"plot,omitempty"`
	// CallbacksTimed is how many sched_ext callbacks the explanations
	// timed; CallbacksNote says why none were.
	CallbacksTimed int    `json:"sched_ext_callbacks_timed"`
	CallbacksNote  string `json:"sched_ext_callbacks_note,omitempty"`
	// BypassNote says why explanations could not tell sched_ext's bypass
	// mode, on a kernel with sched_ext.
	BypassNote string `json:"sched_ext_bypass_note,omitempty"`
	// Unmeasured are the classes a bound names that no sample reached:
	// the bound was checked against nothing, which is a mistake in the
	// policy or the filters, not a latency that failed.
	Unmeasured []string `json:"unmeasured_classes,omitempty"`
	// UnmeasuredSelection describes the selected tasks when a bound
	// covers them (Bound.Selected) and none of them waited.
	UnmeasuredSelection string `json:"unmeasured_selection,omitempty"`
}

// KeptViolations is how many of the longest violations a Result keeps.
const KeptViolations = 100

// Thresholds turns bounds into per-class streaming thresholds, the
// tightest limit of each class's clauses, and the view each compares. A
// bound on the selected tasks applies to every one of classes (the
// filters leave only selected tasks in them); a class's own bound, if it
// has one, says which view it compares.
func Thresholds(bounds []Bound, classes []string) (map[string]time.Duration, map[string]View) {
	th, views := map[string]time.Duration{}, map[string]View{}
	apply := func(b Bound, class string) {
		if b.View != "" {
			views[class] = b.View
		}
		for _, c := range b.Clauses {
			if cur, ok := th[class]; !ok || c.Limit < cur {
				th[class] = c.Limit
			}
		}
	}
	for _, b := range bounds {
		if b.Selected {
			for _, class := range classes {
				apply(b, class)
			}
		}
	}
	for _, b := range bounds { // after, so that a class's own view wins
		if !b.Selected {
			apply(b, b.Class)
		}
	}
	return th, views
}

// Run attaches the tracer, measures for the duration and checks the
// bounds. Classes named in bounds must exist in the policy.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Duration < 0 {
		return nil, fmt.Errorf("%w: duration %s must not be negative", ErrBadTracerConfig, opts.Duration)
	}
	if (len(opts.OnViolation) > 0 || opts.StopOnViolation) && len(opts.Bounds) == 0 && len(opts.Tracer.Thresholds) == 0 {
		return nil, fmt.Errorf("%w: acting on violations needs a bound: without one there are none", ErrBadBound)
	}
	selection := opts.Tracer.Selection()
	for _, b := range opts.Bounds {
		if b.Selected && selection == "" {
			return nil, fmt.Errorf("%w: a bound on the selected tasks, but the tracer selects every task (set a filter)", ErrBadBound)
		}
		if !b.Selected && opts.Tracer.Table != nil && indexOf(opts.Tracer.Table.Names, b.Class) < 0 {
			return nil, fmt.Errorf("%w: bound for unknown class %q (the policy's classes: %v)", ErrBadBound, b.Class, opts.Tracer.Table.Names)
		}
	}
	if opts.Tracer.Thresholds == nil && opts.Tracer.Table != nil {
		opts.Tracer.Thresholds, opts.Tracer.ThresholdViews = Thresholds(opts.Bounds, opts.Tracer.Table.Names)
	}
	attaching := time.Now()
	t, err := Attach(opts.Tracer)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	started := time.Now()
	// The window starts now, not at the command's start: on a loaded
	// machine loading and attaching takes seconds (20 on an 8-vCPU guest
	// under the judges), and a script that starts its workload alongside
	// must know which part was measured.
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "verify: attached in %s (%s); measuring from now\n",
			started.Sub(attaching).Round(time.Millisecond), t.Hook)
	}
	if opts.Live != nil {
		defer opts.Live(t)()
	}

	// A command run for a violation may outlive the window, not a signal.
	signals := ctx
	win := report.StartWindow(ctx, opts.Duration)
	defer win.Stop()
	ctx = win.Context()
	var (
		streamed  uint64
		printer   *ViolationPrinter
		causes    CauseSummaries
		worst     = worstViolations{n: KeptViolations}
		act       *actions
		stoppedBy *Violation
	)
	if len(opts.OnViolation) > 0 {
		act = newActions(signals, opts.OnViolation, opts.OnViolationPerSecond, opts.ActionOutput)
	}
	if opts.Violations != nil {
		printer = &ViolationPrinter{W: opts.Violations, PerSecond: opts.ViolationLinesPerSecond}
		if printer.PerSecond <= 0 {
			printer.PerSecond = DefaultViolationLinesPerSecond
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- t.ReadViolations(ctx, func(v Violation) {
			v.Bound, v.View = opts.Tracer.Thresholds[v.Class], orFelt(opts.Tracer.ThresholdViews[v.Class])
			streamed++
			causes.Add(v)
			worst.add(v)
			if printer != nil {
				printer.Print(v)
			}
			// What the reader still finds after a stop was measured, and
			// is counted, but acted on no more.
			if stoppedBy != nil {
				return
			}
			if act != nil {
				act.run(v)
			}
			if opts.StopOnViolation {
				stoppedBy = &v
				win.Stop()
			}
		})
	}()
	var intervalC <-chan time.Time
	if opts.Intervals != nil && opts.Interval > 0 {
		tick := time.NewTicker(opts.Interval)
		defer tick.Stop()
		intervalC = tick.C
	}
	var progressC <-chan time.Time
	if opts.Progress != nil {
		interval := opts.ProgressInterval
		if interval <= 0 {
			interval = time.Second
		}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		progressC = tick.C
	}
	var lastInterval *Snapshot
	if intervalC != nil || progressC != nil {
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case now := <-intervalC:
				s, err := t.ClassSnapshot()
				if err != nil {
					return nil, err
				}
				writeInterval(opts.Intervals, now, s, lastInterval)
				lastInterval = s
			case <-progressC:
				if s, err := t.ClassSnapshot(); err == nil {
					of := opts.Duration.String()
					if opts.Duration == 0 {
						of = "until stopped"
					}
					fmt.Fprintf(opts.Progress, "verify: %s/%s: %d samples, %d switches, %d lost\n",
						s.Elapsed.Round(time.Second), of, s.Counters.Samples, s.Counters.Switches,
						s.Counters.losses().Total())
				}
			}
		}
	}
	<-ctx.Done()
	if err := <-done; err != nil {
		return nil, err
	}
	if err := t.Stop(); err != nil {
		return nil, err
	}
	snap, err := t.Snapshot()
	if err != nil {
		return nil, err
	}
	// The measurement is over: a command still running for a violation
	// (a perf snapshot, say) is waited for outside it.
	var acted ActionCounts
	if act != nil {
		acted = act.wait()
	}
	res := &Result{Header: report.NewHeader("verify", started), Snapshot: snap, Violations: streamed, Pass: true, Worst: worst.trim()}
	res.Finish(snap.Elapsed, snap.Counters.losses())
	res.Ended(win)
	if opts.Tracer.Explain {
		res.Causes = causes.Summaries()
		res.CallbacksTimed, res.CallbacksNote = t.CallbacksTimed, t.CallbacksNote
		res.BypassNote = t.BypassNote
	}
	if printer != nil {
		printer.Flush()
		res.ViolationsNotPrinted = printer.NotPrinted
	}
	if cost, err := t.Cost(); err != nil {
		res.CostError = err.Error()
	} else {
		res.Cost = cost
	}
	res.check(opts.Bounds, snap, selection)
	if act != nil {
		res.Actions = &acted
	}
	if stoppedBy != nil {
		res.StoppedBy, res.Pass = stoppedBy, false
	}
	res.Verdict = report.Judge(res.Interrupted, res.Pass)
	res.Pass = res.Verdict == report.VerdictPass
	return res, nil
}

// Cases is the run for a CI system: a case per bound clause, each an
// error when a signal cut the run short.
func (r *Result) Cases(suite string, took time.Duration) []report.Case {
	return report.InterruptedCases(r.Header, suite, Cases(suite, r.Bounds, took), took)
}

// check checks the bounds against snap, whose tasks are those selection
// describes ("" for every task).
func (r *Result) check(bounds []Bound, snap *Snapshot, selection string) {
	for _, b := range bounds {
		h := snap.class(b.Class, b.View)
		if b.Selected {
			h = snap.all(b.View)
		}
		switch {
		case h.Count() > 0:
		case b.Selected:
			r.UnmeasuredSelection = selection
		default:
			r.Unmeasured = append(r.Unmeasured, b.Class)
		}
		cv := ClassVerdicts{Class: b.Class, View: b.View, Selected: b.Selected, Covers: b.Covers(selection), Verdicts: b.Check(h)}
		for _, v := range cv.Verdicts {
			r.Pass = r.Pass && v.Pass
		}
		r.Bounds = append(r.Bounds, cv)
	}
}

func (s *Snapshot) class(name string, v View) *Histogram {
	for _, c := range s.Classes {
		if c.Class == name {
			return c.View(v)
		}
	}
	return &Histogram{}
}

// all is view v of every class's waits together: those of every task the
// tracer's filters selected.
func (s *Snapshot) all(v View) *Histogram {
	h := &Histogram{}
	for _, c := range s.Classes {
		h.Merge(c.View(v))
	}
	return h
}

// losses lists every way the tracer can lose data, counted or not.
func (c Counters) losses() report.Losses {
	return report.Losses{
		{What: "start stamp not stored", Count: c.StampFailures},
		{What: "violation ring buffer full", Count: c.RingbufDrops},
		{What: "samples not in the per-task table, which was full (class and CPU figures are complete; raise --max-tasks)", Count: c.TaskTableFull, Partial: true},
		{What: "waits not measured (the kernel did not report a switch that began or ended them)", Count: c.UnmeasuredWaits},
		{What: "waits whose start was not seen", Count: c.UnstampedWaits},
		{What: "context switches the kernel made that the sched_switch hook did not see (/proc/stat ctxt)", Count: c.UnseenSwitches},
		{What: "events skipped by the kernel (program busy on that CPU)", Count: c.SkippedRuns},
		{What: "device uses not noted for device matchers (task storage full; those tasks joined their class late)", Count: c.DeviceUsesLost},
	}
}

// Lost is the number of samples, per-task samples and violation records
// the tracer could not keep, and of events it did not see. An event may
// show in two kinds: a hook run the kernel skipped may also leave the
// wait it touched unmeasured.
func (c Counters) Lost() uint64 { return c.losses().Total() }

// TextOptions shape the text report.
type TextOptions struct {
	TopTasks   int  // tasks listed, by p99; 0 lists none
	Histograms bool // draw each class's histogram
	PerCPU     bool
	// HideTGID leaves this process's threads (the tracer's own, usually)
	// out of the top-tasks list; they stay in every other figure.
	HideTGID uint32
}

// WriteText writes the report for people.
func (r *Result) WriteText(w io.Writer, o TextOptions) error {
	s := r.Snapshot
	fmt.Fprintf(w, "run-queue latency over %s (hook %s; percentiles are bucket upper edges, <= 3.2%% high)\n\n",
		s.Elapsed.Round(time.Millisecond), s.Hook)
	switch s.FeltEnd {
	case FeltOff:
		fmt.Fprintln(w, "felt: the same as wait (no causes looked for);")
	case FeltToReturn:
		fmt.Fprintln(w, "felt: from the wake-up's cause where the kernel tells it (a timer's expiry, to the sleep call's return), else from the wake-up;")
	default:
		fmt.Fprintln(w, "felt: from the wake-up's cause where the kernel tells it (a timer's expiry), else from the wake-up;")
	}
	fmt.Fprintln(w, "wait: from the wake-up or preemption, as runqlat; timer: a timer's expiry to its wake-up, timer wake-ups only")
	t := report.Table{Header: append([]string{"class", "view"}, report.LatencyColumns()...)}
	for _, c := range s.Classes {
		t.Add(append([]string{c.Class, string(ViewFelt)}, report.Summarize(c.Felt).Cells()...)...)
		t.Add(append([]string{"", string(ViewWait)}, report.Summarize(c.Hist).Cells()...)...)
		if c.TimerDelivery.Count() > 0 {
			t.Add(append([]string{"", "timer"}, report.Summarize(c.TimerDelivery).Cells()...)...)
		}
	}
	if err := t.WriteText(w); err != nil {
		return err
	}
	if o.Histograms {
		for _, c := range s.Classes {
			if c.Hist.Count() == 0 {
				continue
			}
			fmt.Fprintf(w, "\n%s:\n", c.Class)
			if err := c.Hist.WriteText(w, 40); err != nil {
				return err
			}
		}
	}
	if o.PerCPU {
		fmt.Fprintln(w)
		t := report.Table{Header: append([]string{"cpu"}, report.LatencyColumns()...)}
		for _, c := range s.CPUs {
			t.Add(append([]string{fmt.Sprint(c.CPU)}, report.Summarize(c.Hist).Cells()...)...)
		}
		if err := t.WriteText(w); err != nil {
			return err
		}
	}
	var top []TaskLatency
	for _, tk := range s.Tasks {
		if len(top) < o.TopTasks && (o.HideTGID == 0 || tk.TGID != o.HideTGID) {
			top = append(top, tk)
		}
	}
	if len(top) > 0 {
		fmt.Fprintf(w, "\ntop %d threads by p99 of the wait:\n", len(top))
		t := report.Table{Header: append([]string{"tid", "comm", "class", "view"}, report.LatencyColumns()...)}
		for _, tk := range top {
			t.Add(append([]string{fmt.Sprint(tk.PID), tk.Comm, tk.Class, string(ViewFelt)}, report.Summarize(tk.Felt).Cells()...)...)
			t.Add(append([]string{"", "", "", string(ViewWait)}, report.Summarize(tk.Hist).Cells()...)...)
		}
		if err := t.WriteText(w); err != nil {
			return err
		}
	}

	fmt.Fprintln(w)
	for _, b := range r.Bounds {
		if b.Covers != "" {
			fmt.Fprintf(w, "bound covers: %s\n", b.Covers)
		}
		for _, v := range b.Verdicts {
			fmt.Fprintf(w, "%s %s\n", b.bound().Subject(), v)
		}
	}
	switch {
	case r.Interrupted:
		fmt.Fprintf(w, "verdict: %s\n", r.InterruptedNote())
	case len(r.Bounds) > 0:
		fmt.Fprintf(w, "verdict: %s\n", strings.ToUpper(string(report.Judge(false, r.Pass))))
	}
	if v := r.StoppedBy; v != nil {
		fmt.Fprintf(w, "stopped at the first violation (--stop-on-violation) after %s: %s %s pid %d %s on cpu %d\n",
			s.Elapsed.Round(time.Millisecond), v.Class, v.Comm, v.PID, v.waited(), v.CPU)
	}
	if len(r.Causes) > 0 {
		fmt.Fprintln(w, "\nwhere the violations' waits went (on the CPU that ended each):")
		writeCauses(w, r.Causes)
		for _, note := range []string{r.CallbacksNote, r.BypassNote} {
			if note != "" {
				fmt.Fprintf(w, "(%s)\n", note)
			}
		}
		fmt.Fprintln(w)
	}
	r.writePictures(w)

	secs := max(s.Elapsed.Seconds(), 1e-9) // a synthetic result may have none
	notPrinted := ""
	if r.ViolationsNotPrinted > 0 {
		notPrinted = fmt.Sprintf(" (%d of them over the line limit, counted, not printed)", r.ViolationsNotPrinted)
	}
	kernel := ""
	if s.Counters.KernelSwitches > 0 {
		kernel = fmt.Sprintf(" (the kernel counted %d)", s.Counters.KernelSwitches)
	}
	fmt.Fprintf(w, "events: %d wakeups, %d switches%s (%.0f/s), %d samples, %d violations streamed%s\n",
		s.Counters.Wakeups, s.Counters.Switches, kernel, float64(s.Counters.Wakeups+s.Counters.Switches)/secs, s.Counters.Samples, r.Violations, notPrinted)
	if r.CostError != "" {
		fmt.Fprintf(w, "tracer cost: unknown: %s\n", r.CostError)
	} else {
		if all := report.TotalCost(r.Cost); all.Runs > 0 {
			fmt.Fprintf(w, "tracer cost: %s per event, %.3f%% of one CPU\n",
				report.Duration(all.PerRun()), 100*all.Total.Seconds()/secs)
		}
	}
	if s.Counters.UnreportedSwitches > 0 {
		fmt.Fprintf(w, "note: the kernel did not report %d context switches to sched_switch probes; the traced waits they began or ended are counted below\n", s.Counters.UnreportedSwitches)
	}
	if s.Counters.ClassifyUncached > 0 {
		fmt.Fprintf(w, "note: %d classifications could not be cached (task storage busy or full)\n", s.Counters.ClassifyUncached)
	}
	return s.Counters.losses().WriteText(w)
}

// writePictures says what became of the violations: the command run for
// them, and where their pictures are and how to open them.
func (r *Result) writePictures(w io.Writer) {
	if a := r.Actions; a != nil {
		fmt.Fprintf(w, "on-violation: command started %d times, %d failed", a.Started, a.Failed)
		if a.FirstError != "" {
			fmt.Fprintf(w, " (first: %s)", a.FirstError)
		}
		fmt.Fprintf(w, "; %d violations not acted on (over the rate, or while it still ran)\n", a.NotStarted)
	}
	if t := r.Trace; t != nil {
		what := fmt.Sprintf("the %d worst violations", t.Violations)
		if t.Violations == 1 {
			what = "the worst violation"
		}
		fmt.Fprintf(w, "trace of %s: %s; %s\n", what, t.Path, HowToOpenTrace)
	}
	if r.Plot != "" {
		fmt.Fprintf(w, "timeline of the worst violation: %s (SVG: any web browser)\n", r.Plot)
	}
	if r.Actions != nil || r.Trace != nil || r.Plot != "" {
		fmt.Fprintln(w)
	}
}

// WriteJSON writes the report for machines.
func (r *Result) WriteJSON(w io.Writer) error {
	return report.WriteJSON(w, r)
}

// writeInterval writes one line per class: the waits recorded between the
// snapshots prev (nil: since the start) and s.
func writeInterval(w io.Writer, now time.Time, s, prev *Snapshot) {
	for _, c := range s.Classes {
		var before *Histogram
		if prev != nil {
			before = prev.class(c.Class, ViewWait)
		}
		d := c.Hist.Since(before)
		if d.Count() == 0 {
			fmt.Fprintf(w, "%s %-12s no waits\n", now.Format("15:04:05"), c.Class)
			continue
		}
		fmt.Fprintf(w, "%s %-12s %7d waits  p50 %-8s p99 %-8s max %s\n", now.Format("15:04:05"), c.Class, d.Count(),
			report.Duration(time.Duration(d.QuantileUpper(0.5))), report.Duration(time.Duration(d.QuantileUpper(0.99))),
			report.Duration(time.Duration(d.Max())))
	}
}
