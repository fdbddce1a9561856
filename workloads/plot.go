package workloads

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/hotlane/hotlane/internal/svgplot"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// ErrNoSamples is returned for a plot with nothing to draw.
var ErrNoSamples = errors.New("no samples to plot")

// percentileTicks are the tail plot's x ticks: -log10(1-q) and a label.
var percentileTicks = []struct {
	t     float64
	label string
}{{0, "min"}, {math.Log10(2), "p50"}, {1, "p90"}, {2, "p99"}, {3, "p99.9"}, {4, "p99.99"}, {5, "p99.999"}}

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
	p := svgplot.New(760, 440, title)
	pw, ph := p.Inner()
	// The x axis ends at the last percentile the largest sample set
	// resolves (1 - 1/N), between p99.9 and p99.999.
	tmax := math.Min(math.Max(math.Ceil(math.Log10(float64(most))), 3), 5)
	x := func(q float64) float64 {
		t := tmax
		if q < 1 {
			t = math.Min(-math.Log10(1-q), tmax)
		}
		return p.Left + t/tmax*pw
	}
	ya := svgplot.NewLogAxis(lo, hi, p.Top+ph, p.Top)

	for _, tk := range percentileTicks {
		if tk.t > tmax {
			break
		}
		px := p.Left + tk.t/tmax*pw
		p.Line(px, p.Top, px, p.Top+ph, svgplot.Stroke{Color: "#ddd"})
		p.Text(px, p.Top+ph+18, svgplot.Text{Anchor: "middle"}, tk.label)
	}
	latencyGrid(p, ya, p.Left+pw)
	p.Text(p.Left+pw/2, float64(p.Height-14), svgplot.Text{Anchor: "middle"}, "percentile (log scale of 1 - q)")
	p.Text(18, p.Top+ph/2, svgplot.Text{Anchor: "middle", Rotate: -90}, "latency (log scale)")

	for i, run := range r.Runs {
		h := hist(run)
		if h.Count() == 0 {
			continue
		}
		color, dash := svgplot.Color(i)
		p.Polyline(quantilePoints(h, x, ya.At), svgplot.Stroke{Color: color, Width: 2, Dash: dash})
		p.Legend(i, run.Scheduler)
	}
	return p.Finish(w)
}

// quantilePoints steps through the histogram's quantile function: for q
// between the fractions of samples below and up to a bucket, the bucket's
// upper edge (capped at the exact maximum).
// It returns the points as x0, y0, x1, y1, ...
func quantilePoints(h *verify.Histogram, x func(float64) float64, y func(float64) float64) []float64 {
	var pts []float64
	var seen uint64
	total := float64(h.Count())
	for i, n := range h.Buckets() {
		_, hi := verify.BucketBounds(i)
		v := float64(min(hi, h.Max()))
		pts = append(pts, x(float64(seen)/total), y(v))
		seen += n
		pts = append(pts, x(float64(seen)/total), y(v))
	}
	return pts
}

// latencyGrid draws the horizontal lines and labels of a log latency
// axis, from the plot's left margin to right.
func latencyGrid(p *svgplot.Plot, ya svgplot.LogAxis, right float64) {
	for e := ya.Lo; e <= ya.Hi; e++ {
		py := ya.At(math.Pow(10, e))
		p.Line(p.Left, py, right, py, svgplot.Stroke{Color: "#eee"})
		p.Text(p.Left-6, py+4, svgplot.Text{Anchor: "end"}, report.Duration(time.Duration(math.Pow(10, e))))
	}
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

	p := svgplot.New(860, 440, "lane p99 ("+view+" view) vs. cost to everyone else")
	p.Left, p.Right = 70, 150
	gapX := 60.0
	pw, ph := p.Inner()
	pw = (pw - gapX) / 2
	ya := svgplot.NewLogAxis(lo, hi, p.Top+ph, p.Top)
	xa := svgplot.NewLogAxis(wlo, whi, p.Left, p.Left+pw)
	x2 := func(v float64) float64 { return p.Left + pw + gapX + (v-blo)/(bhi-blo)*pw }

	latencyGrid(p, ya, p.Left+2*pw+gapX)
	for e := xa.Lo; e <= xa.Hi; e++ {
		px := xa.At(math.Pow(10, e))
		p.Line(px, p.Top, px, p.Top+ph, svgplot.Stroke{Color: "#ddd"})
		p.Text(px, p.Top+ph+18, svgplot.Text{Anchor: "middle"}, report.Duration(time.Duration(math.Pow(10, e))))
	}
	for v := blo; v <= bhi+1e-9; v += 0.1 {
		px := x2(v)
		p.Line(px, p.Top, px, p.Top+ph, svgplot.Stroke{Color: "#ddd"})
		p.Text(px, p.Top+ph+18, svgplot.Text{Anchor: "middle"}, fmt.Sprintf("%.1f", v))
	}
	p.Text(p.Left+pw/2, float64(p.Height-14), svgplot.Text{Anchor: "middle"}, "other tasks' p99 run-queue wait (log)")
	p.Text(p.Left+1.5*pw+gapX, float64(p.Height-14), svgplot.Text{Anchor: "middle"}, "background work per free CPU-s, vs "+r.Baseline)
	p.Text(18, p.Top+ph/2, svgplot.Text{Anchor: "middle", Rotate: -90}, "lane p99 (log)")

	for _, q := range pts {
		color, _ := svgplot.Color(q.i)
		y := ya.At(q.lane)
		p.Circle(xa.At(q.wait), y, 5, color)
		if q.bg > 0 {
			p.Circle(x2(q.bg), y, 5, color)
		}
		p.Legend(q.i, q.name)
	}
	return p.Finish(w)
}
