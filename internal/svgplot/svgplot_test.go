package svgplot

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// Every shape comes out as well-formed SVG, with text escaped wherever it
// goes (a task's comm can hold any byte).
func TestPlotIsWellFormed(t *testing.T) {
	p := New(400, 200, `a <title> & "quotes"`)
	w, h := p.Inner()
	if w != 400-70-170 || h != 200-40-60 {
		t.Errorf("inner %v x %v", w, h)
	}
	p.Line(0, 0, 10, 10, Stroke{Color: "#eee", Dash: "2 2"})
	p.Polyline([]float64{0, 0, 1.25, 2, 3}, Stroke{Width: 2}) // the odd value is dropped
	p.Rect(1, 2, 3, 4, Fill{Color: "red", Stroke: "#666", Title: "x<y"})
	p.Circle(5, 5, 2, "blue")
	p.Marker(10, 10, 6, "black")
	p.Text(1, 1, Text{Anchor: "end", Size: 9, Rotate: -90, Color: "red", Bold: true}, "a&b")
	p.Legend(9, "dashed")
	p.LegendBox(0, "green", "box")
	var b bytes.Buffer
	if err := p.Finish(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	dec := xml.NewDecoder(strings.NewReader(svg))
	elems := map[string]int{}
	var texts []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			elems[tok.Name.Local]++
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	for elem, n := range map[string]int{"svg": 1, "line": 2, "polyline": 1, "rect": 3, "circle": 1, "polygon": 1, "text": 4, "title": 1} {
		if elems[elem] != n {
			t.Errorf("%d <%s>, want %d (%v)", elems[elem], elem, n, elems)
		}
	}
	for _, want := range []string{`a <title> & "quotes"`, "a&b", "x<y", "dashed"} {
		found := false
		for _, s := range texts {
			found = found || s == want
		}
		if !found {
			t.Errorf("text %q not read back from %v", want, texts)
		}
	}
	if !strings.Contains(svg, `points="0,0 1.3,2"`) {
		t.Errorf("polyline points not to a tenth of a pixel, or the odd value kept:\n%s", svg)
	}
}

func TestColorDashesPastThePalette(t *testing.T) {
	c0, d0 := Color(0)
	c8, d8 := Color(len(palette))
	if c0 != c8 || d0 != "" || d8 == "" {
		t.Errorf("color 0 %s %q, color %d %s %q: want the same colour, dashed the second time", c0, d0, len(palette), c8, d8)
	}
}

func TestAxes(t *testing.T) {
	la := NewLogAxis(1e3, 5e4, 100, 0)
	if la.Lo != 3 || la.Hi != 5 || la.At(1e3) != 100 || la.At(1e5) != 0 || la.At(1e4) != 50 || la.At(1) != 100 {
		t.Errorf("log axis %+v: at 1e3 %v, 1e4 %v, 1e5 %v", la, la.At(1e3), la.At(1e4), la.At(1e5))
	}
	a := LinearAxis{Lo: 0, Hi: 23, From: 0, To: 230}
	if a.At(10) != 100 {
		t.Errorf("linear axis: 10 at %v", a.At(10))
	}
	ticks := a.Ticks(5)
	want := []float64{0, 5, 10, 15, 20}
	if len(ticks) != len(want) {
		t.Fatalf("ticks %v, want %v", ticks, want)
	}
	for i := range want {
		if ticks[i] != want[i] {
			t.Errorf("ticks %v, want %v", ticks, want)
		}
	}
	if got := (LinearAxis{Lo: 3, Hi: 3}).Ticks(4); len(got) != 1 {
		t.Errorf("an empty axis has ticks %v, want its one value", got)
	}
}
