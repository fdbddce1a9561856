package workloads

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// plotColors are told apart in print and by most colour-blind readers.
var plotColors = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"}

// WriteCDF draws the cumulative distribution of one class's run-queue
// latency for every scheduler as an SVG: latency on a log axis, so that
// microseconds and tens of milliseconds fit on one plot.
func (r *Report) WriteCDF(w io.Writer, class string) error {
	const (
		width, height = 760, 440
		left, right   = 70, 170
		top, bottom   = 40, 60
	)
	pw, ph := float64(width-left-right), float64(height-top-bottom)

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, run := range r.Runs {
		h := run.class(class)
		if h.Count() == 0 {
			continue
		}
		lo = math.Min(lo, math.Max(float64(h.Min()), 100))
		hi = math.Max(hi, float64(h.Max()))
	}
	if math.IsInf(lo, 0) {
		return fmt.Errorf("no %s samples to plot", class)
	}
	xmin, xmax := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if xmax <= xmin {
		xmax = xmin + 1
	}
	x := func(ns float64) float64 {
		v := (math.Log10(math.Max(ns, math.Pow(10, xmin))) - xmin) / (xmax - xmin)
		return float64(left) + v*pw
	}
	y := func(frac float64) float64 { return float64(top) + (1-frac)*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">run-queue latency CDF, class %s</text>`+"\n", left, class)
	for e := xmin; e <= xmax; e++ {
		px := x(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px, top, px, float64(top)+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px, float64(top)+ph+18, report.Duration(time.Duration(math.Pow(10, e))))
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, y(f), float64(left)+pw, y(f))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", left-6, y(f)+4, f)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">latency (log scale)</text>`+"\n", float64(left)+pw/2, height-14)
	fmt.Fprintf(&b, `<text x="18" y="%.1f" transform="rotate(-90 18 %.1f)" text-anchor="middle">fraction of wake-ups</text>`+"\n", float64(top)+ph/2, float64(top)+ph/2)

	for i, run := range r.Runs {
		h := run.class(class)
		if h.Count() == 0 {
			continue
		}
		color := plotColors[i%len(plotColors)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, cdfPoints(h, x, y))
		ly := float64(top) + 10 + float64(i)*20
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", width-right+14, ly, width-right+38, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f">%s</text>`+"\n", width-right+44, ly+4, run.Scheduler)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// cdfPoints steps through the histogram: at each bucket's upper edge the
// fraction of samples at or below it.
func cdfPoints(h *verify.Histogram, x func(float64) float64, y func(float64) float64) string {
	var pts []string
	var seen uint64
	total := float64(h.Count())
	prev := 0.0
	for i, n := range h.Buckets() {
		lo, hi := verify.BucketBounds(i)
		hi = min(hi, h.Max()+1)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(lo)), y(prev)))
		seen += n
		prev = float64(seen) / total
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(hi)), y(prev)))
	}
	return strings.Join(pts, " ")
}
