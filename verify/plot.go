package verify

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/internal/svgplot"
	"github.com/hotlane/hotlane/report"
)

// kindFill is the colour of each kind of CPU time in the timeline, and
// whether a label on it must be white to be read.
func kindFill(kind string) (fill string, dark bool) {
	i := -1
	switch kind {
	case KindFair:
		i = 0
	case KindRTDL:
		i = 1
	case KindSchedExt:
		i = 2
	case KindIRQ:
		i = 3
	case KindSoftirq:
		i = 4
	case KindTask:
		i = 7
	case KindIdle:
		return svgplot.LightGrey, false
	case KindUncovered:
		return svgplot.White, false
	}
	if i < 0 {
		return svgplot.White, false
	}
	c, _ := svgplot.Color(i)
	return c, i <= 2
}

// The task's own bars.
var (
	waitFill, _ = svgplot.Color(5)
	boundColor  = "#c00000"
)

// timelineKinds are the kinds in the legend's order.
var timelineKinds = []string{KindRTDL, KindFair, KindSchedExt, KindTask, KindIRQ, KindSoftirq, KindIdle, KindUncovered}

// WritePlot draws the violation v as an SVG timeline: the waiting task's
// track (its timer's delivery, its wait and the way back out of its sleep
// call, with the wake-up and switch-in marked), its CPU's track (the
// explanation's parts, coloured by kind, laid out as PartOrder says), and
// the bound as a line where it ran out.
func WritePlot(w io.Writer, v Violation) error {
	tl := newTimeline(v)
	title := fmt.Sprintf("%s[%d] (%s) waited %s for cpu %d", v.Comm, v.PID, v.Class, report.Duration(v.Latency), v.CPU)
	sub := v.waited()
	if v.Bound > 0 {
		sub += fmt.Sprintf("; bound %s on the %s view", report.Duration(v.Bound), v.View)
	}
	if v.Why != nil {
		sub += ". Where it went: " + v.Why.String()
	}
	const width = 980
	subLines := wrap(sub, int((width-90)/svgplot.TextWidth("x", 12)))
	p := svgplot.New(width, 310+15*len(subLines), title)
	p.Left, p.Right, p.Top, p.Bottom = 170, 190, 65+15*float64(len(subLines)), 90
	for i, line := range subLines {
		p.Text(70, 44+float64(i)*15, svgplot.Text{Color: "#444"}, line)
	}
	pw, ph := p.Inner()

	first, last := tl.first(), max(tl.end, tl.crossed)
	pad := (last - first) / 50
	xa := svgplot.LinearAxis{Lo: float64(first - pad), Hi: float64(last + pad), From: p.Left, To: p.Left + pw}
	x := func(t time.Duration) float64 { return xa.At(float64(t)) }

	// The time axis, from the first moment drawn.
	rel := svgplot.LinearAxis{Lo: float64(-pad), Hi: float64(last - first + pad), From: p.Left, To: p.Left + pw}
	for _, tick := range rel.Ticks(8) {
		px := rel.At(tick)
		p.Line(px, p.Top, px, p.Top+ph, svgplot.Stroke{Color: "#eee"})
		label := "0"
		if tick != 0 {
			label = "+" + report.Duration(time.Duration(tick))
		}
		p.Text(px, p.Top+ph+16, svgplot.Text{Anchor: "middle"}, label)
	}
	p.Text(p.Left+pw/2, p.Top+ph+34, svgplot.Text{Anchor: "middle"}, "time from the first moment drawn")

	rows := []string{fmt.Sprintf("%s[%d]", v.Comm, v.PID), fmt.Sprintf("cpu %d", v.CPU)}
	hasCb := v.Why != nil && v.Why.ExtCallbacks > 0
	if hasCb {
		rows = append(rows, fmt.Sprintf("cpu %d sched_ext callbacks", v.CPU))
	}
	rowH := ph / float64(len(rows))
	barH := min(rowH*0.55, 46)
	barY := func(row int) float64 { return p.Top + float64(row)*rowH + (rowH-barH)/2 }
	for i, name := range rows {
		p.Text(p.Left-10, barY(i)+barH/2+4, svgplot.Text{Anchor: "end"}, name)
	}
	// Labels go on last, over the bound's line.
	var labels []func()
	bar := func(row int, start, dur time.Duration, fill, stroke, label, title string, dark bool) {
		x0, x1 := x(start), x(start+dur)
		p.Rect(x0, barY(row), max(x1-x0, 0.5), barH, svgplot.Fill{Color: fill, Stroke: stroke, Title: title})
		if label == "" {
			return
		}
		for _, l := range []string{label, strings.Fields(label)[0]} {
			if svgplot.TextWidth(l, 11) <= x1-x0-6 {
				color := "black"
				if dark {
					color = "white"
				}
				labels = append(labels, func() {
					p.Text((x0+x1)/2, barY(row)+barH/2+4, svgplot.Text{Anchor: "middle", Size: 11, Color: color, Halo: fill}, l)
				})
				return
			}
		}
	}

	// The task's row.
	if v.Caused {
		bar(0, tl.cause, v.TimerDelivery, svgplot.LightGrey, "#666", "timer delivery "+report.Duration(v.TimerDelivery), "from the timer's expiry to the wake-up", false)
	}
	bar(0, tl.wake, v.Latency, waitFill, "", "waiting for a CPU "+report.Duration(v.Latency), "from the wake-up to the switch-in", false)
	if v.Resume > 0 {
		bar(0, tl.switchIn, v.Resume, svgplot.White, "#666", "return "+report.Duration(v.Resume), "from the switch-in to the sleep call's return", false)
	}
	mark := func(t time.Duration, label string, above bool) {
		y := barY(0)
		p.Marker(x(t), y, 9, "black")
		ly := y - 12
		if !above {
			ly = y + barH + 16
		}
		p.Text(x(t), ly, svgplot.Text{Anchor: "middle", Size: 11}, label)
	}
	if v.Caused {
		mark(tl.cause, "timer expiry", true)
	}
	mark(tl.wake, "wake-up", !v.Caused || x(tl.wake)-x(tl.cause) > 80)
	mark(tl.switchIn, "switch-in", true)

	// The CPU's rows.
	kinds := map[string]bool{}
	for _, part := range tl.parts {
		fill, dark := kindFill(part.kind)
		kinds[part.kind] = true
		stroke := ""
		if part.kind == KindUncovered {
			stroke = "#666"
		}
		label := part.Name() + " " + report.Duration(part.dur)
		if part.task != nil {
			label = fmt.Sprintf("%s %s %s", part.Name(), part.task.kindAndClass(), report.Duration(part.dur))
		}
		bar(1, part.start, part.dur, fill, stroke, label, label, dark)
	}
	if v.Why == nil {
		p.Text(p.Left+4, barY(1)+barH/2+4, svgplot.Text{Color: "#666"}, "not explained (verify --no-explain)")
	}
	if hasCb {
		cb := v.Why.ExtCallbacks
		bar(2, tl.switchIn-cb, cb, svgplot.LightGrey, "#666", "callbacks "+report.Duration(cb), "the CPU's time in sched_ext callbacks, inside the parts above", false)
	}

	// The bound.
	if tl.crossed > 0 {
		bx := x(tl.crossed)
		p.Line(bx, p.Top-6, bx, p.Top+ph, svgplot.Stroke{Color: boundColor, Width: 2, Dash: "5 3"})
		p.Text(bx+4, p.Top-8, svgplot.Text{Size: 11, Color: boundColor}, "bound "+report.Duration(v.Bound)+" ran out")
	}

	for _, label := range labels {
		label()
	}

	// The legend: the task's bars, the kinds present, the bound.
	i := 0
	p.LegendBox(i, waitFill, "waiting for a CPU")
	i++
	if v.Caused {
		p.LegendBox(i, svgplot.LightGrey, "timer delivery")
		i++
	}
	for _, k := range timelineKinds {
		if kinds[k] {
			fill, _ := kindFill(k)
			p.LegendBox(i, fill, "cpu: "+k)
			i++
		}
	}
	if tl.crossed > 0 {
		lx, ly := float64(p.Width)-p.Right+14, p.Top+10+float64(i)*20
		p.Line(lx+12, ly-8, lx+12, ly+8, svgplot.Stroke{Color: boundColor, Width: 2, Dash: "5 3"})
		p.Text(lx+30, ly+4, svgplot.Text{}, "bound")
	}

	var notes []string
	if v.Why != nil {
		notes = append(notes, "The cpu row: "+PartOrder+".")
		if v.Why.Migrated {
			notes = append(notes, fmt.Sprintf("The task last ran on cpu %d.", v.Why.FromCPU))
		}
		if v.Why.SchedExtBypassed {
			notes = append(notes, "sched_ext was in bypass mode at some time in this window.")
		}
		if v.Why.SchedExtExited {
			notes = append(notes, "sched_ext exited during the wait.")
		}
	}
	ny := p.Top + ph + 56
	for _, line := range wrap(strings.Join(notes, " "), int((float64(p.Width)-40)/svgplot.TextWidth("x", 11))) {
		p.Text(20, ny, svgplot.Text{Size: 11, Color: "#444"}, line)
		ny += 14
	}
	return p.Finish(w)
}

// wrap breaks s into lines of at most width characters, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// ErrNoViolation is returned for a picture of a run without violations.
var ErrNoViolation = errors.New("no violation to draw")

// WritePlotFile draws the run's worst violation (WritePlot) to path, all
// or nothing, readable by its owner alone (it names tasks), and notes it
// for the report. Without a violation it writes nothing and returns
// ErrNoViolation.
func (r *Result) WritePlotFile(path string) error {
	if len(r.Worst) == 0 {
		return ErrNoViolation
	}
	if err := safefile.Write(path, safefile.OwnerOnly, func(w io.Writer) error { return WritePlot(w, r.Worst[0]) }); err != nil {
		return err
	}
	r.Plot = path
	return nil
}
