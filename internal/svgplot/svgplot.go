// Package svgplot is hotlane's one plotting code: the frame, palette,
// axes and shapes of every SVG it draws (the bench's tail and cost plots,
// verify's violation timeline), so that they look alike, escape text
// alike and need no tool to view: any browser opens them.
package svgplot

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// palette is told apart in print and by most colour-blind readers (Okabe
// and Ito's).
var palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#999999"}

// Neutral fills for what is not a series: a plot's background things
// (an idle CPU, time nobody accounted for).
const (
	LightGrey = "#dddddd"
	White     = "#ffffff"
)

// Color is series i's colour; past the palette, the colours repeat and
// lines are dashed (dash is then a stroke-dasharray, else "").
func Color(i int) (color, dash string) {
	color = palette[i%len(palette)]
	if i >= len(palette) {
		dash = "6 3"
	}
	return color, dash
}

// Plot is an SVG being drawn: a white canvas with a title, a plotting
// area inside the margins, and a legend on the right.
type Plot struct {
	b             strings.Builder
	Width, Height int
	// The margins around the plotting area, in pixels.
	Left, Right, Top, Bottom float64
}

// New starts a plot of width x height pixels with a title.
func New(width, height int, title string) *Plot {
	p := &Plot{Width: width, Height: height, Left: 70, Right: 170, Top: 40, Bottom: 60}
	fmt.Fprintf(&p.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	p.b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	p.Text(p.Left, 24, Text{Size: 15}, title)
	return p
}

// Inner is the plotting area's width and height.
func (p *Plot) Inner() (w, h float64) {
	return float64(p.Width) - p.Left - p.Right, float64(p.Height) - p.Top - p.Bottom
}

// Finish closes the SVG and writes it to w.
func (p *Plot) Finish(w io.Writer) error {
	p.b.WriteString("</svg>\n")
	_, err := io.WriteString(w, p.b.String())
	return err
}

// Legend writes entry i of the legend on the right: a line in series i's
// colour.
func (p *Plot) Legend(i int, name string) {
	color, dash := Color(i)
	x, y := p.legendAt(i)
	p.Line(x, y, x+24, y, Stroke{Color: color, Width: 3, Dash: dash})
	p.Text(x+30, y+4, Text{}, name)
}

// LegendBox writes entry i of the legend on the right: a box filled with
// fill, for categories drawn as areas.
func (p *Plot) LegendBox(i int, fill, name string) {
	x, y := p.legendAt(i)
	p.Rect(x, y-6, 24, 12, Fill{Color: fill, Stroke: "#666"})
	p.Text(x+30, y+4, Text{}, name)
}

func (p *Plot) legendAt(i int) (x, y float64) {
	return float64(p.Width) - p.Right + 14, p.Top + 10 + float64(i)*20
}

// Stroke is how a line is drawn: Color (black if empty), Width (1 if 0)
// and a stroke-dasharray.
type Stroke struct {
	Color string
	Width float64
	Dash  string
}

func (s Stroke) attrs() string {
	a := ` stroke="` + orDefault(s.Color, "black") + `"`
	if s.Width > 0 {
		a += ` stroke-width="` + num(s.Width) + `"`
	}
	if s.Dash != "" {
		a += ` stroke-dasharray="` + s.Dash + `"`
	}
	return a
}

// Line draws a line from (x1, y1) to (x2, y2).
func (p *Plot) Line(x1, y1, x2, y2 float64, s Stroke) {
	fmt.Fprintf(&p.b, `<line x1="%s" y1="%s" x2="%s" y2="%s"%s/>`+"\n", num(x1), num(y1), num(x2), num(y2), s.attrs())
}

// Polyline draws a line through the points (x0, y0, x1, y1, ...).
func (p *Plot) Polyline(xy []float64, s Stroke) {
	pts := make([]string, 0, len(xy)/2)
	for i := 0; i+1 < len(xy); i += 2 {
		pts = append(pts, num(xy[i])+","+num(xy[i+1]))
	}
	fmt.Fprintf(&p.b, `<polyline fill="none"%s points="%s"/>`+"\n", s.attrs(), strings.Join(pts, " "))
}

// Fill is how an area is drawn: its colour, and an outline if Stroke is
// set (Dash dashes it).
type Fill struct {
	Color, Stroke, Dash string
	// Title is shown by a browser when the pointer rests on the area.
	Title string
}

// Rect draws a rectangle with its top left corner at (x, y).
func (p *Plot) Rect(x, y, w, h float64, f Fill) {
	fmt.Fprintf(&p.b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"`, num(x), num(y), num(w), num(h), orDefault(f.Color, "none"))
	if f.Stroke != "" {
		p.b.WriteString(Stroke{Color: f.Stroke, Dash: f.Dash}.attrs())
	}
	p.closeWithTitle("rect", f.Title)
}

// Circle draws a filled circle.
func (p *Plot) Circle(cx, cy, r float64, fill string) {
	fmt.Fprintf(&p.b, `<circle cx="%s" cy="%s" r="%s" fill="%s"/>`+"\n", num(cx), num(cy), num(r), fill)
}

// Marker draws a downward triangle of width w with its tip at (x, y):
// a moment on a time axis.
func (p *Plot) Marker(x, y, w float64, fill string) {
	fmt.Fprintf(&p.b, `<polygon points="%s,%s %s,%s %s,%s" fill="%s"/>`+"\n",
		num(x), num(y), num(x-w/2), num(y-w), num(x+w/2), num(y-w), fill)
}

func (p *Plot) closeWithTitle(elem, title string) {
	if title == "" {
		p.b.WriteString("/>\n")
		return
	}
	fmt.Fprintf(&p.b, "><title>%s</title></%s>\n", Escape(title), elem)
}

// Text is how text is set: Anchor is start (if empty), middle or end;
// Size is the font size (the plot's 12 if 0); Rotate turns it about its
// anchor point, in degrees; Color fills it; Halo outlines it in that
// colour, so that it stays legible over a line drawn across it.
type Text struct {
	Anchor string
	Size   float64
	Rotate float64
	Color  string
	Halo   string
	Bold   bool
}

// Text writes s at (x, y), its baseline there.
func (p *Plot) Text(x, y float64, t Text, s string) {
	fmt.Fprintf(&p.b, `<text x="%s" y="%s"`, num(x), num(y))
	if t.Anchor != "" && t.Anchor != "start" {
		fmt.Fprintf(&p.b, ` text-anchor="%s"`, t.Anchor)
	}
	if t.Size > 0 {
		fmt.Fprintf(&p.b, ` font-size="%s"`, num(t.Size))
	}
	if t.Rotate != 0 {
		fmt.Fprintf(&p.b, ` transform="rotate(%s %s %s)"`, num(t.Rotate), num(x), num(y))
	}
	if t.Color != "" {
		fmt.Fprintf(&p.b, ` fill="%s"`, t.Color)
	}
	if t.Halo != "" {
		fmt.Fprintf(&p.b, ` stroke="%s" stroke-width="4" paint-order="stroke"`, t.Halo)
	}
	if t.Bold {
		p.b.WriteString(` font-weight="bold"`)
	}
	fmt.Fprintf(&p.b, ">%s</text>\n", Escape(s))
}

// TextWidth estimates how wide s is set at size (0: 12) in the plots'
// sans-serif font, to tell whether a label fits a space.
func TextWidth(s string, size float64) float64 {
	if size <= 0 {
		size = 12
	}
	return 0.6 * size * float64(len([]rune(s)))
}

// LogAxis maps a positive value onto [From, To] on a log10 scale over
// whole decades [Lo, Hi].
type LogAxis struct{ Lo, Hi, From, To float64 }

// NewLogAxis is the axis over the decades that hold minV to maxV.
func NewLogAxis(minV, maxV, from, to float64) LogAxis {
	lo, hi := math.Floor(math.Log10(minV)), math.Ceil(math.Log10(maxV))
	if hi <= lo {
		hi = lo + 1
	}
	return LogAxis{lo, hi, from, to}
}

// At is v's position on the axis; values outside its decades are drawn
// at its ends.
func (a LogAxis) At(v float64) float64 {
	f := (math.Log10(math.Max(v, math.Pow(10, a.Lo))) - a.Lo) / (a.Hi - a.Lo)
	return a.From + math.Min(f, 1)*(a.To-a.From)
}

// LinearAxis maps [Lo, Hi] onto [From, To].
type LinearAxis struct{ Lo, Hi, From, To float64 }

// At is v's position on the axis.
func (a LinearAxis) At(v float64) float64 {
	if a.Hi == a.Lo {
		return a.From
	}
	return a.From + (v-a.Lo)/(a.Hi-a.Lo)*(a.To-a.From)
}

// Ticks are about n round values (1, 2 or 5 times a power of ten apart)
// from Lo to Hi, for the axis's grid.
func (a LinearAxis) Ticks(n int) []float64 {
	span := a.Hi - a.Lo
	if span <= 0 || n <= 0 {
		return []float64{a.Lo}
	}
	raw := span / float64(n)
	step := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if step*m >= raw {
			step *= m
			break
		}
	}
	var ticks []float64
	for v := math.Ceil(a.Lo/step) * step; v <= a.Hi+step*1e-9; v += step {
		ticks = append(ticks, v)
	}
	return ticks
}

// Escape makes s safe as SVG (XML) text or attribute value.
func Escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// num writes a coordinate to a tenth of a pixel, without a trailing .0.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
