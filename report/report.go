// Package report renders hotlane's results for people and machines. The
// tracer, the probes and the bench all summarize latencies with Summarize,
// lay out text with Table and account for dropped events with Losses, so a
// p99 or a loss count means the same thing and looks the same everywhere.
// JSON output is each tool's own typed result built from these pieces.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Latency condenses a latency histogram. Percentiles are the upper edges
// of their histogram buckets, capped at the exact maximum: at most 3.2 %
// above the true value and never below it, the reading bound checks use.
type Latency struct {
	Samples uint64        `json:"samples"`
	Mean    time.Duration `json:"mean_ns"`
	P50     time.Duration `json:"p50_ns"`
	P90     time.Duration `json:"p90_ns"`
	P99     time.Duration `json:"p99_ns"`
	P999    time.Duration `json:"p99_9_ns"`
	Max     time.Duration `json:"max_ns"`
}

// Distribution is what Summarize reads: verify.Histogram implements it.
// (An interface, so that verify can use this package for its own report.)
type Distribution interface {
	Count() uint64
	Mean() float64
	Max() uint64
	QuantileUpper(q float64) uint64
}

// Summarize condenses h; an empty distribution gives zero values.
func Summarize(h Distribution) Latency {
	if h == nil || h.Count() == 0 {
		return Latency{}
	}
	q := func(q float64) time.Duration { return time.Duration(h.QuantileUpper(q)) }
	return Latency{
		Samples: h.Count(),
		Mean:    time.Duration(h.Mean()),
		P50:     q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999),
		Max: time.Duration(h.Max()),
	}
}

// LatencyColumns returns the headers of the cells Latency.Cells returns.
func LatencyColumns() []string { return []string{"samples", "p50", "p90", "p99", "p99.9", "max"} }

// Cells renders the summary as table cells, in LatencyColumns order.
func (l Latency) Cells() []string {
	if l.Samples == 0 {
		return []string{"0", "-", "-", "-", "-", "-"}
	}
	return []string{fmt.Sprint(l.Samples), Duration(l.P50), Duration(l.P90), Duration(l.P99), Duration(l.P999), Duration(l.Max)}
}

// Duration formats d with three significant digits in a unit that suits
// it: 812ns, 41.2µs, 3.07ms, 1.20s.
func Duration(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return sig3(float64(d)/1e3) + "µs"
	case d < time.Second:
		return sig3(float64(d)/1e6) + "ms"
	default:
		return sig3(d.Seconds()) + "s"
	}
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// Table is a text table with a header row; numbers align right.
type Table struct {
	Header []string
	Rows   [][]string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// WriteText writes the table with columns aligned.
func (t *Table) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// Loss is one kind of event that was dropped, and how many.
type Loss struct {
	What  string `json:"what"`
	Count uint64 `json:"count"`
	// Partial marks data left out of one optional view (a full per-task
	// table) while every other figure is complete: reported, but not as
	// events lost.
	Partial bool `json:"partial,omitempty"`
}

// Losses lists every kind of loss a tool can have, including those that
// did not happen: a report that says "0 lost" has checked.
type Losses []Loss

// Total is the number of events lost (Partial losses not counted).
func (l Losses) Total() uint64 {
	var n uint64
	for _, x := range l {
		if !x.Partial {
			n += x.Count
		}
	}
	return n
}

// WriteText writes one line: "lost events: none (ring buffer full 0, …)"
// or the counts, loudly; then, only when something was left out, a line
// per Partial loss, quietly, since every other figure is complete.
func (l Losses) WriteText(w io.Writer) error {
	var parts, partial []string
	for _, x := range l {
		if x.Partial {
			if x.Count > 0 {
				partial = append(partial, fmt.Sprintf("%s: %d", x.What, x.Count))
			}
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d", x.What, x.Count))
	}
	verdict := "none"
	if l.Total() > 0 {
		verdict = fmt.Sprintf("%d EVENTS LOST", l.Total())
	}
	if _, err := fmt.Fprintf(w, "lost events: %s (%s)\n", verdict, strings.Join(parts, ", ")); err != nil {
		return err
	}
	for _, p := range partial {
		if _, err := fmt.Fprintf(w, "left out: %s\n", p); err != nil {
			return err
		}
	}
	return nil
}

// Writer writes a text report and keeps the first error, so rendering
// code reads straight through and checks Err once at the end.
type Writer struct {
	w   io.Writer
	err error
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Printf formats to the report unless an earlier write failed.
func (w *Writer) Printf(format string, args ...any) {
	if w.err == nil {
		_, w.err = fmt.Fprintf(w.w, format, args...)
	}
}

// Do runs a rendering step (a table, a histogram, the losses) unless an
// earlier write failed.
func (w *Writer) Do(render func(io.Writer) error) {
	if w.err == nil {
		w.err = render(w.w)
	}
}

// Err is the first write error, if any.
func (w *Writer) Err() error { return w.err }

// WriteJSON writes v as one indented JSON document: every tool's --json
// output looks alike.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
