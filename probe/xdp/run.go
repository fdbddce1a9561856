package xdp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/report"
)

// Config is one probe run.
type Config struct {
	Interface string
	Policy    Policy
	Mode      Mode
	Replace   bool
}

// Options say how long Run counts and what it reports while it runs.
type Options struct {
	// Duration of the count; 0 counts until ctx is done.
	Duration time.Duration
	// Progress receives one line per Interval; nil for none.
	Progress io.Writer
	Interval time.Duration
	// Attached, if set, is called once the program is on the interface.
	Attached func(*Attachment)
	// Live, if set, is given a reader of the counters so far, as a
	// report, once the program is attached (a metrics endpoint reads it
	// meanwhile); Run calls the function it returns before it detaches
	// the program, whatever the outcome, and read must not be called
	// after.
	Live func(read func() (*Report, error)) (stop func())
}

// DefaultInterval is the default time between progress lines.
const DefaultInterval = 2 * time.Second

// Run loads the program with cfg.Policy, attaches it to cfg.Interface and
// counts for opts.Duration or until ctx is done, then detaches and returns
// the report, marked interrupted when ctx ended before the duration. The
// final counters are read after detaching, so they are exact. Whatever
// fails, nothing is left attached.
func Run(ctx context.Context, cfg Config, opts Options) (*Report, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if _, err := LookupInterface(cfg.Interface); err != nil {
		return nil, err
	}
	if err := loader.RequireCapabilities("CAP_NET_ADMIN", "CAP_BPF"); err != nil {
		return nil, err
	}
	prog, err := Load(cfg.Policy)
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	att, err := Attach(prog, cfg.Interface, AttachOptions{Mode: cfg.Mode, Replace: cfg.Replace})
	if err != nil {
		return nil, err
	}
	defer att.Close()
	start := time.Now()
	win := report.StartWindow(ctx, opts.Duration)
	defer win.Stop()
	if opts.Attached != nil {
		opts.Attached(att)
	}
	stopLive := func() {}
	if opts.Live != nil {
		stopLive = opts.Live(func() (*Report, error) {
			c, err := prog.Counters()
			if err != nil {
				return nil, err
			}
			return NewReport(att, cfg.Policy, start, time.Since(start), c), nil
		})
	}
	defer stopLive()

	var tick <-chan time.Time
	if opts.Progress != nil && opts.Interval > 0 {
		t := time.NewTicker(opts.Interval)
		defer t.Stop()
		tick = t.C
	}
	prev := &Counters{}
	prevAt := start
	for done := false; !done; {
		select {
		case <-win.Done():
			done = true
		case now := <-tick:
			cur, err := prog.Counters()
			if err != nil {
				return nil, err
			}
			if gone := interfaceGone(att.Ifindex); gone != nil {
				return nil, fmt.Errorf("%s went away while hotlane was counting: %w", cfg.Interface, gone)
			}
			writeProgress(opts.Progress, att, now.Sub(start), cur.Sub(prev), now.Sub(prevAt), cur)
			prev, prevAt = cur, now
		}
	}
	elapsed := time.Since(start)
	stopLive()
	if err := att.Close(); err != nil {
		return nil, err
	}
	final, err := prog.Counters()
	if err != nil {
		return nil, err
	}
	rep := NewReport(att, cfg.Policy, start, elapsed, final)
	rep.Ended(win)
	return rep, nil
}

// interfaceGone returns ErrNoInterface when the interface no longer exists.
func interfaceGone(ifindex int) error {
	if _, err := QueryXDP(ifindex); errors.Is(err, ErrNoInterface) {
		return err
	}
	return nil
}

// writeProgress writes one line: rates over the last interval, busiest
// classes first, and the running totals.
func writeProgress(w io.Writer, att *Attachment, since time.Duration, d *Counters, dt time.Duration, total *Counters) {
	sec := dt.Seconds()
	if sec <= 0 {
		sec = 1
	}
	type rate struct {
		name string
		n    uint64
	}
	var busy []rate
	for _, c := range Classes() {
		if n := d.Classes[c].Packets; n > 0 {
			busy = append(busy, rate{c.String(), n})
		}
	}
	sort.SliceStable(busy, func(i, j int) bool { return busy[i].n > busy[j].n })
	parts := make([]string, 0, len(busy))
	for _, b := range busy[:min(len(busy), 4)] {
		parts = append(parts, fmt.Sprintf("%s %s", b.name, perSec(float64(b.n)/sec)))
	}
	if len(busy) > 4 {
		parts = append(parts, "…")
	}
	classes := ""
	if len(parts) > 0 {
		classes = " (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintf(w, "xdp %s [%s] %s: %s pkt/s%s, %s Mbit/s, dropped %s/s, malformed %s/s; total %d packets, %d dropped\n",
		att.Interface, att.Mode, report.Duration(since.Round(time.Second)),
		perSec(float64(d.Total.Packets)/sec), classes, fmt.Sprintf("%.2f", float64(d.Total.Bytes)*8/sec/1e6),
		perSec(float64(d.Total.Dropped)/sec), perSec(float64(d.Classes[Malformed].Packets)/sec),
		total.Total.Packets, total.Total.Dropped)
}

// perSec formats a rate compactly: 0, 12.5, 340, 12.3k, 4.56M.
func perSec(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1000:
		return fmt.Sprintf("%.3g", v)
	case v < 1e6:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3gM", v/1e6)
}

// Report is the result of a run, for people (WriteText) and machines
// (WriteJSON).
type Report struct {
	report.Header
	Interface string `json:"interface"`
	Ifindex   int    `json:"ifindex"`
	Mode      Mode   `json:"mode"`
	// DriverModeError says why driver mode was not used, when generic
	// mode was a fallback.
	DriverModeError string     `json:"driver_mode_error,omitempty"`
	Replaced        []Attached `json:"replaced,omitempty"`
	Policy          Policy     `json:"policy"`

	Total      Count          `json:"total"`
	Classes    []ClassRow     `json:"classes"`
	EtherTypes []EtherTypeRow `json:"ethertypes"`
	Malformed  []ReasonRow    `json:"malformed"`
	Counters   *Counters      `json:"details"`
}

// ClassRow is one class's line in the report.
type ClassRow struct {
	Class Class `json:"class"`
	Count
	PPS float64 `json:"pps"`
}

// EtherTypeRow is one EtherType of the non-IP breakdown.
type EtherTypeRow struct {
	EtherType uint16 `json:"ethertype"`
	Name      string `json:"name,omitempty"`
	Count
}

// ReasonRow counts malformed frames of one reason.
type ReasonRow struct {
	Reason      Reason `json:"reason"`
	Description string `json:"description"`
	Frames      uint64 `json:"frames"`
}

// NewReport builds the report of a run, started at started, from its
// final counters.
func NewReport(att *Attachment, pol Policy, started time.Time, elapsed time.Duration, c *Counters) *Report {
	r := &Report{
		Header:    report.NewHeader("probe xdp", started),
		Interface: att.Interface, Ifindex: att.Ifindex, Mode: att.Mode, Replaced: att.Replaced,
		Policy: pol, Total: c.Total, Counters: c,
		Classes: []ClassRow{}, EtherTypes: []EtherTypeRow{}, Malformed: []ReasonRow{},
	}
	if att.DriverModeError != nil {
		r.DriverModeError = att.DriverModeError.Error()
	}
	sec := elapsed.Seconds()
	for _, cl := range Classes() {
		row := ClassRow{Class: cl, Count: c.Classes[cl]}
		if sec > 0 {
			row.PPS = float64(row.Packets) / sec
		}
		r.Classes = append(r.Classes, row)
	}
	for t, n := range c.EtherTypes {
		r.EtherTypes = append(r.EtherTypes, EtherTypeRow{t, EtherTypeName(t), n})
	}
	sort.Slice(r.EtherTypes, func(i, j int) bool {
		a, b := r.EtherTypes[i], r.EtherTypes[j]
		if a.Packets != b.Packets {
			return a.Packets > b.Packets
		}
		return a.EtherType < b.EtherType
	})
	for _, reason := range Reasons() {
		r.Malformed = append(r.Malformed, ReasonRow{reason, reason.Description(), c.Malformed[reason]})
	}
	r.Finish(elapsed, report.Losses{{What: "EtherType table full", Count: c.EtherTypeTableFull}})
	return r
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	return report.WriteJSON(w, r)
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) error {
	ew := report.NewWriter(w)
	mode := r.Mode.String() + " mode"
	if r.DriverModeError != "" {
		mode += " (driver mode unavailable: " + r.DriverModeError + ")"
	}
	ew.Printf("xdp on %s (ifindex %d), %s, %s\n", r.Interface, r.Ifindex, mode, report.Duration(r.Elapsed))
	for _, x := range r.Replaced {
		ew.Printf("replaced: XDP program id %d (%s mode), not restored\n", x.ProgID, x.Mode)
	}
	ew.Printf("policy: %s\n\n", r.Policy)

	t := report.Table{Header: []string{"class", "packets", "bytes", "dropped", "pps"}}
	for _, row := range r.Classes {
		t.Add(row.Class.String(), fmt.Sprint(row.Packets), fmt.Sprint(row.Bytes), fmt.Sprint(row.Dropped), fmt.Sprintf("%.1f", row.PPS))
	}
	pps := 0.0
	if s := r.Elapsed.Seconds(); s > 0 {
		pps = float64(r.Total.Packets) / s
	}
	t.Add("total", fmt.Sprint(r.Total.Packets), fmt.Sprint(r.Total.Bytes), fmt.Sprint(r.Total.Dropped), fmt.Sprintf("%.1f", pps))
	ew.Do(t.WriteText)

	if len(r.EtherTypes) > 0 {
		ew.Printf("\nnon-IP frames by EtherType:\n")
		t := report.Table{Header: []string{"ethertype", "name", "packets", "bytes", "dropped"}}
		for _, e := range r.EtherTypes {
			name := e.Name
			if name == "" {
				name = "-"
			}
			t.Add(fmt.Sprintf("0x%04x", e.EtherType), name, fmt.Sprint(e.Packets), fmt.Sprint(e.Bytes), fmt.Sprint(e.Dropped))
		}
		ew.Do(t.WriteText)
	}

	var bad []ReasonRow
	for _, m := range r.Malformed {
		if m.Frames > 0 {
			bad = append(bad, m)
		}
	}
	rule := "passed"
	if r.Policy.Drop.Has(Malformed) {
		rule = "dropped (--drop malformed)"
	}
	if len(bad) == 0 {
		ew.Printf("\nmalformed frames: none\n")
	} else {
		ew.Printf("\nmalformed frames (%s):\n", rule)
		t := report.Table{Header: []string{"layer", "problem", "frames"}}
		for _, m := range bad {
			t.Add(m.Reason.Layer(), m.Description, fmt.Sprint(m.Frames))
		}
		ew.Do(t.WriteText)
	}

	c := r.Counters
	ew.Printf("\ndropped by rule: class %d, UDP port %d, EtherType %d, malformed %d\n",
		c.DroppedClass, c.DroppedUDPPort, c.DroppedEtherType, c.DroppedMalformed)
	ew.Printf("seen: %d single-tagged and %d double-tagged (QinQ) VLAN frames, %d IPv4 headers with options, %d IPv6 packets with extension headers, %d first fragments\n",
		c.VLAN1, c.VLAN2, c.IPv4Options, c.IPv6Ext, c.FirstFragments)
	ew.Printf("counting: every frame, in per-CPU counters; nothing is sampled and there is no ring buffer\n")
	ew.Do(r.Losses.WriteText)
	ew.Do(r.WriteInterrupted)
	return ew.Err()
}
