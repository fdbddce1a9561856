package workloads

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// ErrNoSamples is returned for a plot with nothing to draw.
var ErrNoSamples = errors.New("no samples to plot")

// plotColors are told apart in print and by most colour-blind readers.
var plotColors = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#999999"}

// plotColor is variant i's colour; past the palette, lines are dashed.
func plotColor(i int) (color, dash string) {
	color = plotColors[i%len(plotColors)]
	if i >= len(plotColors) {
		dash = ` stroke-dasharray="6 3"`
	}
	return color, dash
}

// percentileTicks are the tail plot's x ticks: -log10(1-q) and a label.
var percentileTicks = []struct {
	t     float64
	label string
}{{0, "min"}, {math.Log10(2), "p50"}, {1, "p90"}, {2, "p99"}, {3, "p99.9"}, {4, "p99.99"}, {5, "p99.999"}}

// svgPlot is the frame every plot shares.
type svgPlot struct {
	b                        strings.Builder
	width, height            int
	left, right, top, bottom float64
}

func newPlot(width, height int, title string) *svgPlot {
	p := &svgPlot{width: width, height: height, left: 70, right: 170, top: 40, bottom: 60}
	fmt.Fprintf(&p.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&p.b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&p.b, `<text x="%g" y="24" font-size="15">%s</text>`+"\n", p.left, xmlEscape(title))
	return p
}

func (p *svgPlot) finish(w io.Writer) error {
	p.b.WriteString("</svg>\n")
	_, err := io.WriteString(w, p.b.String())
	return err
}

// legend writes entry i of the legend on the right.
func (p *svgPlot) legend(i int, name string) {
	color, dash := plotColor(i)
	ly := p.top + 10 + float64(i)*20
	x := float64(p.width) - p.right + 14
	fmt.Fprintf(&p.b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="%s" stroke-width="3"%s/>`+"\n", x, ly, x+24, ly, color, dash)
	fmt.Fprintf(&p.b, `<text x="%g" y="%.1f">%s</text>`+"\n", x+30, ly+4, xmlEscape(name))
}

// logAxis maps a positive value onto [from, to] on a log10 scale over
// whole decades [lo, hi].
type logAxis struct{ lo, hi, from, to float64 }

func newLogAxis(minV, maxV, from, to float64) logAxis {
	lo, hi := math.Floor(math.Log10(minV)), math.Ceil(math.Log10(maxV))
	if hi <= lo {
		hi = lo + 1
	}
	return logAxis{lo, hi, from, to}
}

func (a logAxis) at(v float64) float64 {
	f := (math.Log10(math.Max(v, math.Pow(10, a.lo))) - a.lo) / (a.hi - a.lo)
	return a.from + math.Min(f, 1)*(a.to-a.from)
}

// WriteTail draws the lane's latency in one view (ViewTracer, ViewApp or
// ViewOutside) for every variant as an SVG quantile plot: percentile on
// the x axis, spaced by -log10(1-q) so that p90, p99 and p99.9 are equally
// far apart and the tail is as wide as the body, latency on a log y axis.
func (r *Report) WriteTail(w io.Writer, view string) error {
	return r.writeTail(w, "lane latency ("+view+" view), by percentile", func(run Run) *verify.Histogram { return run.LaneView(view) })
}

// WriteClassTail draws the tracer's run-queue latency of one policy class
// for every variant, like WriteTail.
func (r *Report) WriteClassTail(w io.Writer, class string) error {
	return r.writeTail(w, "run-queue latency of class "+class+" (tracer), by percentile", func(run Run) *verify.Histogram { return run.class(class) })
}

func (r *Report) writeTail(w io.Writer, title string, hist func(Run) *verify.Histogram) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	var most uint64
	for _, run := range r.Runs {
		h := hist(run)
		if h.Count() == 0 {
			continue
		}
		lo = math.Min(lo, math.Max(float64(h.Min()), 1000))
		hi = math.Max(hi, math.Max(float64(h.Max()), 1000))
		most = max(most, h.Count())
	}
	if math.IsInf(lo, 0) {
		return fmt.Errorf("%w for %s", ErrNoSamples, title)
	}
	p := newPlot(760, 440, title)
	pw, ph := float64(p.width)-p.left-p.right, float64(p.height)-p.top-p.bottom
	// The x axis ends at the last percentile the largest sample set
	// resolves (1 - 1/N), between p99.9 and p99.999.
	tmax := math.Min(math.Max(math.Ceil(math.Log10(float64(most))), 3), 5)
	x := func(q float64) float64 {
		t := tmax
		if q < 1 {
			t = math.Min(-math.Log10(1-q), tmax)
		}
		return p.left + t/tmax*pw
	}
	ya := newLogAxis(lo, hi, p.top+ph, p.top)

	for _, tk := range percentileTicks {
		if tk.t > tmax {
			break
		}
		px := p.left + tk.t/tmax*pw
		fmt.Fprintf(&p.b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px, p.top, px, p.top+ph)
		fmt.Fprintf(&p.b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px, p.top+ph+18, tk.label)
	}
	for e := ya.lo; e <= ya.hi; e++ {
		py := ya.at(math.Pow(10, e))
		fmt.Fprintf(&p.b, `<line x1="%g" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", p.left, py, p.left+pw, py)
		fmt.Fprintf(&p.b, `<text x="%g" y="%.1f" text-anchor="end">%s</text>`+"\n", p.left-6, py+4, report.Duration(time.Duration(math.Pow(10, e))))
	}
	fmt.Fprintf(&p.b, `<text x="%.1f" y="%d" text-anchor="middle">percentile (log scale of 1 - q)</text>`+"\n", p.left+pw/2, p.height-14)
	fmt.Fprintf(&p.b, `<text x="18" y="%.1f" transform="rotate(-90 18 %.1f)" text-anchor="middle">latency (log scale)</text>`+"\n", p.top+ph/2, p.top+ph/2)

	for i, run := range r.Runs {
		h := hist(run)
		if h.Count() == 0 {
			continue
		}
		color, dash := plotColor(i)
		fmt.Fprintf(&p.b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, quantilePoints(h, x, ya.at))
		p.legend(i, run.Scheduler)
	}
	return p.finish(w)
}

// quantilePoints steps through the histogram's quantile function: for q
// between the fractions of samples below and up to a bucket, the bucket's
// upper edge (capped at the exact maximum).
func quantilePoints(h *verify.Histogram, x func(float64) float64, y func(float64) float64) string {
	var pts []string
	var seen uint64
	total := float64(h.Count())
	for i, n := range h.Buckets() {
		_, hi := verify.BucketBounds(i)
		v := float64(min(hi, h.Max()))
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(seen)/total), y(v)))
		seen += n
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(seen)/total), y(v)))
	}
	return strings.Join(pts, " ")
}

// costView is the lane view the cost chart plots: the outside tool's when
// there is one, else the application's, else the tracer's.
func (r *Report) costView() string {
	for _, v := range []string{ViewOutside, ViewApp, ViewTracer} {
		for _, run := range r.Runs {
			if run.LaneView(v).Count() > 0 {
				return v
			}
		}
	}
	return ViewTracer
}

// WriteCost draws "lane latency vs. cost to everyone else": one point per
// variant, its lane p99 (log y) against, on the left, the p99 run-queue
// wait of every other task (log x) and, on the right, the background's
// throughput per CPU-second the lane left, relative to the baseline.
// Down and to the left is better on the left panel; down and to the right
// on the right one.
func (r *Report) WriteCost(w io.Writer) error {
	view := r.costView()
	type pt struct {
		i          int
		name       string
		lane, wait float64
		bg         float64
	}
	var pts []pt
	lo, hi := math.Inf(1), math.Inf(-1)
	wlo, whi := math.Inf(1), math.Inf(-1)
	blo, bhi := math.Inf(1), math.Inf(-1)
	for i, run := range r.Runs {
		s := run.summary()
		l, ok := s.Lane[view]
		if !ok || s.Normal.Samples == 0 {
			continue
		}
		bg := s.BackgroundVsBaseline
		q := pt{i: i, name: run.Scheduler, lane: math.Max(float64(l.P99), 1000), wait: math.Max(float64(s.Normal.P99), 1000), bg: bg}
		pts = append(pts, q)
		lo, hi = math.Min(lo, q.lane), math.Max(hi, q.lane)
		wlo, whi = math.Min(wlo, q.wait), math.Max(whi, q.wait)
		if bg > 0 {
			blo, bhi = math.Min(blo, bg), math.Max(bhi, bg)
		}
	}
	if len(pts) == 0 {
		return fmt.Errorf("%w: no variant has both lane (%s) and normal-task samples", ErrNoSamples, view)
	}
	if math.IsInf(blo, 0) {
		blo, bhi = 1, 1
	}
	blo, bhi = math.Min(math.Floor(blo*10-0.5)/10, 0.9), math.Max(math.Ceil(bhi*10+0.5)/10, 1.1)

	p := newPlot(860, 440, "lane p99 ("+view+" view) vs. cost to everyone else")
	p.left, p.right = 70, 150
	gapX := 60.0
	pw := (float64(p.width) - p.left - p.right - gapX) / 2
	ph := float64(p.height) - p.top - p.bottom
	ya := newLogAxis(lo, hi, p.top+ph, p.top)
	xa := newLogAxis(wlo, whi, p.left, p.left+pw)
	x2 := func(v float64) float64 { return p.left + pw + gapX + (v-blo)/(bhi-blo)*pw }

	for e := ya.lo; e <= ya.hi; e++ {
		py := ya.at(math.Pow(10, e))
		fmt.Fprintf(&p.b, `<line x1="%g" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", p.left, py, p.left+2*pw+gapX, py)
		fmt.Fprintf(&p.b, `<text x="%g" y="%.1f" text-anchor="end">%s</text>`+"\n", p.left-6, py+4, report.Duration(time.Duration(math.Pow(10, e))))
	}
	for e := xa.lo; e <= xa.hi; e++ {
		px := xa.at(math.Pow(10, e))
		fmt.Fprintf(&p.b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px, p.top, px, p.top+ph)
		fmt.Fprintf(&p.b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px, p.top+ph+18, report.Duration(time.Duration(math.Pow(10, e))))
	}
	for v := blo; v <= bhi+1e-9; v += 0.1 {
		px := x2(v)
		fmt.Fprintf(&p.b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px, p.top, px, p.top+ph)
		fmt.Fprintf(&p.b, `<text x="%.1f" y="%.1f" text-anchor="middle">%.1f</text>`+"\n", px, p.top+ph+18, v)
	}
	fmt.Fprintf(&p.b, `<text x="%.1f" y="%d" text-anchor="middle">other tasks' p99 run-queue wait (log)</text>`+"\n", p.left+pw/2, p.height-14)
	fmt.Fprintf(&p.b, `<text x="%.1f" y="%d" text-anchor="middle">background work per free CPU-s, vs %s</text>`+"\n", p.left+1.5*pw+gapX, p.height-14, xmlEscape(r.Baseline))
	fmt.Fprintf(&p.b, `<text x="18" y="%.1f" transform="rotate(-90 18 %.1f)" text-anchor="middle">lane p99 (log)</text>`+"\n", p.top+ph/2, p.top+ph/2)

	for _, q := range pts {
		color, _ := plotColor(q.i)
		y := ya.at(q.lane)
		fmt.Fprintf(&p.b, `<circle cx="%.1f" cy="%.1f" r="5" fill="%s"/>`+"\n", xa.at(q.wait), y, color)
		if q.bg > 0 {
			fmt.Fprintf(&p.b, `<circle cx="%.1f" cy="%.1f" r="5" fill="%s"/>`+"\n", x2(q.bg), y, color)
		}
		p.legend(q.i, q.name)
	}
	return p.finish(w)
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
