package ioctl

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/internal/cstr"
	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// Counters are the probe's running totals, summed over CPUs.
type Counters struct {
	Calls  uint64 `json:"calls"`
	Errors uint64 `json:"errors"`
	// Slow is the number of slow calls streamed.
	Slow uint64 `json:"slow_streamed"`
	// Every way a call can be lost or counted only in part.
	LostRingbuf uint64 `json:"lost_ringbuf"`
	LostHist    uint64 `json:"lost_histogram"`
	LostStats   uint64 `json:"lost_stats"`
	LostErrno   uint64 `json:"lost_errno"`
	LostStart   uint64 `json:"lost_start"`
	// FoldedCommands are calls the kernel side counted under
	// OtherCommand: their device already had KernelCommandsPerDevice
	// commands with rows of their own.
	FoldedCommands uint64 `json:"folded_commands"`
	// MissedRuns counts program runs the kernel skipped because another
	// BPF program was running on that CPU (recursion protection): each is
	// a call whose entry or exit was not seen.
	MissedRuns uint64 `json:"missed_runs"`
}

// Losses lists every kind of loss, including those that did not happen.
func (c Counters) Losses() report.Losses {
	return report.Losses{
		{What: "slow-call ring buffer full", Count: c.LostRingbuf},
		{What: "histogram table full", Count: c.LostHist},
		{What: "call table full", Count: c.LostStats},
		{What: "errno table full", Count: c.LostErrno},
		{What: "start stamp not stored", Count: c.LostStart},
		{What: "program runs missed", Count: c.MissedRuns},
		{What: fmt.Sprintf("calls counted under command \"other\" in the kernel: commands beyond the first %d of their device", KernelCommandsPerDevice), Count: c.FoldedCommands, Partial: true},
	}
}

// Counters reads the running totals.
func (p *Probe) Counters() (Counters, error) {
	var c Counters
	if p.closed() {
		return c, errors.New("probe is closed")
	}
	var perCPU []bpf.IoctlIoctlCounters
	if err := p.objs.IoctlCounters.Lookup(uint32(0), &perCPU); err != nil {
		return c, fmt.Errorf("read counters: %w", err)
	}
	for _, v := range perCPU {
		c.Calls += v.Calls
		c.Errors += v.Errors
		c.Slow += v.Slow
		c.LostRingbuf += v.LostRingbuf
		c.LostHist += v.LostHist
		c.LostStats += v.LostStats
		c.LostErrno += v.LostErrno
		c.LostStart += v.LostStart
		c.FoldedCommands += v.FoldedCmds
	}
	c.MissedRuns = loader.RecursionMisses(p.progs...)
	return c, nil
}

// SlowCall is one call that took at least the slow threshold.
type SlowCall struct {
	// At is when the call started, from when the probe was attached.
	At      time.Duration `json:"at_ns"`
	Latency time.Duration `json:"latency_ns"`
	Device  Device        `json:"device"`
	Command Command       `json:"command"`
	PID     uint32        `json:"pid"` // the process (thread-group id)
	TID     uint32        `json:"tid"`
	Comm    string        `json:"comm"` // the thread's
	FD      uint32        `json:"fd"`
	Arg     uint64        `json:"arg"`
	// Ret is the return value; Errno names it when it is an error.
	Ret   int64  `json:"ret"`
	Errno string `json:"errno,omitempty"`
	// With Config.Wakeups: the call's sleeps, the time asleep until each
	// wake-up, and the time then spent waiting to run.
	Wakeups uint32        `json:"wakeups,omitempty"`
	Asleep  time.Duration `json:"asleep_ns,omitempty"`
	RunWait time.Duration `json:"run_wait_ns,omitempty"`
}

// String is one line for people.
func (s SlowCall) String() string {
	ret := fmt.Sprint(s.Ret)
	if s.Errno != "" {
		ret = s.Errno
	}
	line := fmt.Sprintf("%s %s on %s by %s (pid %d tid %d) fd %d -> %s, at +%s",
		report.Duration(s.Latency), s.Command, s.Device, s.Comm, s.PID, s.TID, s.FD, ret,
		s.At.Round(time.Millisecond))
	if s.Wakeups > 0 {
		line += fmt.Sprintf("; asleep %s until %d wake-up(s), then waited %s to run",
			report.Duration(s.Asleep), s.Wakeups, report.Duration(s.RunWait))
	}
	return line
}

// event mirrors struct ioctl_event in bpf/ioctl.bpf.c.
type event struct {
	StartNs   uint64
	LatencyNs uint64
	Ret       int64
	Arg       uint64
	Dev       uint32
	Cmd       uint32
	FD        uint32
	Tgid      uint32
	Pid       uint32
	Ftype     uint16
	Pad       uint16
	Comm      [16]byte
	AsleepNs  uint64
	WaitNs    uint64
	Wakeups   uint32
	Pad2      uint32
}

const eventSize = int(unsafe.Sizeof(event{}))

func (p *Probe) slowCall(e *event) SlowCall {
	s := SlowCall{
		At:      time.Duration(int64(e.StartNs - p.monoStart)),
		Latency: time.Duration(e.LatencyNs),
		Device:  p.resolver.Device(e.Ftype, e.Dev),
		Command: DecodeCommand(e.Cmd),
		PID:     e.Tgid, TID: e.Pid, Comm: cstr.String(e.Comm[:]),
		FD: e.FD, Arg: e.Arg, Ret: e.Ret,
		Wakeups: e.Wakeups, Asleep: time.Duration(e.AsleepNs), RunWait: time.Duration(e.WaitNs),
	}
	if e.Ret < 0 && e.Ret >= -4095 {
		s.Errno = ErrnoName(int(-e.Ret))
	}
	return s
}

// ReadSlow calls fn for each slow call streamed, in order, until Flush is
// called and the stream is drained, or the probe is closed.
func (p *Probe) ReadSlow(fn func(SlowCall)) error {
	var rec ringbuf.Record
	for {
		if err := p.ring.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrFlushed) || errors.Is(err, ringbuf.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read slow calls: %w", err)
		}
		if len(rec.RawSample) < eventSize {
			return fmt.Errorf("slow call record of %d bytes, want %d", len(rec.RawSample), eventSize)
		}
		var e event
		if err := binary.Read(bytes.NewReader(rec.RawSample[:eventSize]), binary.LittleEndian, &e); err != nil {
			return err
		}
		fn(p.slowCall(&e))
	}
}

// Flush makes ReadSlow return once it has delivered every slow call
// already in the stream; call it after Detach to drain the stream.
func (p *Probe) Flush() error { return p.ring.Flush() }

// kernelErrnos are errors the kernel uses internally that can still reach
// a tracer (a syscall interrupted by a signal is seen with ERESTARTSYS
// before the kernel restarts it or turns it into EINTR).
var kernelErrnos = map[int]string{
	512: "ERESTARTSYS", 513: "ERESTARTNOINTR", 514: "ERESTARTNOHAND",
	515: "ENOIOCTLCMD", 516: "ERESTART_RESTARTBLOCK", 524: "ENOTSUPP",
}

// ErrnoName names an errno: ENOTTY, EBADF, ERESTARTSYS, or "errno 600".
func ErrnoName(e int) string {
	if n, ok := kernelErrnos[e]; ok {
		return n
	}
	if n := unix.ErrnoName(syscall.Errno(e)); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", e)
}

// ErrnoCount is how often calls failed with one errno.
type ErrnoCount struct {
	Errno int    `json:"errno"`
	Name  string `json:"name"`
	Count uint64 `json:"count"`
}

// Stats is what was measured for one (device, command), or one (process,
// device, command).
type Stats struct {
	Device  Device  `json:"device"`
	Command Command `json:"command"`
	// PID and Comm are set for per-process rows; Comm is the process's.
	PID  uint32 `json:"pid,omitempty"`
	Comm string `json:"comm,omitempty"`
	// Calls counts every completed call, Errors those that failed.
	Calls  uint64 `json:"calls"`
	Errors uint64 `json:"errors"`
	// Total is the time spent in these calls.
	Total   time.Duration     `json:"total_ns"`
	Latency report.Latency    `json:"latency"`
	Hist    *verify.Histogram `json:"histogram"`
	Errnos  []ErrnoCount      `json:"errnos,omitempty"`
	// Sleeps is the wake-up chain inside the calls, with Config.Wakeups.
	Sleeps *Sleeps `json:"sleeps,omitempty"`
}

// Sleeps is what the calls of a row spent asleep inside the call (until
// a wake-up, such as a device's completion interrupt) and then waiting to
// run: the part of an ioctl's latency that is the scheduler's.
type Sleeps struct {
	// Calls counts calls that slept at least once, Wakeups their wake-ups.
	Calls   uint64 `json:"calls"`
	Wakeups uint64 `json:"wakeups"`
	// Asleep and RunWait are totals over those calls; MaxRunWait is the
	// longest wait to run in one call.
	Asleep     time.Duration `json:"asleep_ns"`
	RunWait    time.Duration `json:"run_wait_ns"`
	MaxRunWait time.Duration `json:"max_run_wait_ns"`
}

func (s *Sleeps) add(o *Sleeps) {
	s.Calls += o.Calls
	s.Wakeups += o.Wakeups
	s.Asleep += o.Asleep
	s.RunWait += o.RunWait
	s.MaxRunWait = max(s.MaxRunWait, o.MaxRunWait)
}

// meanRunWait is the mean wait to run per wake-up.
func (s *Sleeps) meanRunWait() time.Duration {
	if s.Wakeups == 0 {
		return 0
	}
	return s.RunWait / time.Duration(s.Wakeups)
}

// Filter is what the probe was restricted to.
type Filter struct {
	PID  uint32 `json:"pid,omitempty"`
	Comm string `json:"comm,omitempty"`
	Dev  string `json:"dev,omitempty"`
}

// Result is what a probe run measured.
type Result struct {
	report.Header
	Hook       Hook     `json:"hook"`
	HookDetail string   `json:"hook_detail"`
	Notes      []string `json:"notes,omitempty"`
	Filter     Filter   `json:"filter"`
	// Wakeups says the calls were followed through their sleeps (each row
	// has Sleeps).
	Wakeups bool `json:"wakeups,omitempty"`
	// SlowThreshold is set when slow calls were streamed.
	SlowThreshold *time.Duration `json:"slow_threshold_ns,omitempty"`
	Counters      Counters       `json:"counters"`
	// Commands has one entry per (device, command), busiest (most total
	// time) first; Processes one per (process, device, command).
	Commands  []Stats      `json:"commands"`
	Processes []Stats      `json:"processes"`
	Errnos    []ErrnoCount `json:"errnos"`
	// Slowest are the slowest calls streamed (at most MaxSlowKept),
	// slowest first.
	Slowest []SlowCall `json:"slowest,omitempty"`
	// Cost is the probe's own BPF run time, when the kernel measured it.
	Cost []report.ProgramCost `json:"cost,omitempty"`
}

// MaxSlowKept bounds Result.Slowest.
const MaxSlowKept = 100

// group is one row being built.
type group struct {
	stats   Stats
	buckets []uint64
	max     uint64
	sum     uint64
	errnos  map[int]uint64
}

type rowKey struct {
	dev, cmd, tgid uint32
	ftype          uint16
}

// Snapshot reads everything the probe has counted. Call Detach first for
// figures that do not move while they are read.
func (p *Probe) Snapshot() (*Result, error) {
	if p.closed() {
		return nil, errors.New("probe is closed")
	}
	c, err := p.Counters()
	if err != nil {
		return nil, err
	}
	p.resolver.Rescan()
	r := &Result{
		Header: report.NewHeader("probe ioctl", p.Started),
		Hook:   p.Hook, HookDetail: p.HookDetail, Notes: p.Notes,
		Counters: c,
		Filter:   Filter{PID: p.filters.tgid, Comm: p.filters.comm},
	}
	r.Finish(p.elapsed(), c.Losses())
	if p.filters.devOn {
		r.Filter.Dev = p.filters.device.String() + " (" + p.filters.device.Number() + ")"
	}
	if p.cfg.StreamSlow {
		d := p.cfg.Slow
		r.SlowThreshold = &d
	}
	r.Wakeups = p.cfg.Wakeups

	groups := map[rowKey]*group{}
	get := func(k bpf.IoctlIoctlKey) *group {
		rk := rowKey{k.Dev, k.Cmd, k.Tgid, k.Ftype}
		g := groups[rk]
		if g == nil {
			g = &group{errnos: map[int]uint64{}}
			g.stats.Device = p.resolver.Device(k.Ftype, k.Dev)
			g.stats.Command = DecodeCommand(k.Cmd)
			g.stats.PID = k.Tgid
			groups[rk] = g
		}
		return g
	}
	var k bpf.IoctlIoctlKey
	var st bpf.IoctlIoctlStats
	it := p.objs.IoctlStats.Iterate()
	for it.Next(&k, &st) {
		g := get(k)
		g.stats.Calls, g.stats.Errors = st.Calls, st.Errors
		g.stats.Comm = cstr.String(st.Comm[:])
		g.max, g.sum = st.MaxNs, st.SumNs
		if p.cfg.Wakeups {
			g.stats.Sleeps = &Sleeps{Calls: st.SleptCalls, Wakeups: st.Wakeups, Asleep: time.Duration(st.AsleepNs),
				RunWait: time.Duration(st.WaitNs), MaxRunWait: time.Duration(st.MaxWaitNs)}
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read call table: %w", err)
	}
	var n uint64
	it = p.objs.IoctlHist.Iterate()
	for it.Next(&k, &n) {
		g := get(k)
		if int(k.Slot) >= verify.NumBuckets {
			continue
		}
		if int(k.Slot) >= len(g.buckets) {
			g.buckets = append(g.buckets, make([]uint64, int(k.Slot)+1-len(g.buckets))...)
		}
		g.buckets[k.Slot] += n
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read histogram table: %w", err)
	}
	it = p.objs.IoctlErrno.Iterate()
	for it.Next(&k, &n) {
		get(k).errnos[int(k.Slot)] += n
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read errno table: %w", err)
	}

	type cmdKey struct {
		dev, cmd uint32
		ftype    uint16
	}
	byCmd := map[cmdKey]*Stats{}
	cmdErrnos := map[cmdKey]map[int]uint64{}
	allErrnos := map[int]uint64{}
	for rk, g := range groups {
		h, err := verify.FromBuckets(g.buckets, g.max)
		if err != nil {
			return nil, err
		}
		if g.sum != 0 && h.Count() == g.stats.Calls {
			h.SetSum(g.sum)
		}
		s := g.stats
		s.Hist = h
		s.Total = time.Duration(h.Sum())
		s.Latency = report.Summarize(h)
		s.Errnos = errnoList(g.errnos)
		r.Processes = append(r.Processes, s)

		ck := cmdKey{rk.dev, rk.cmd, rk.ftype}
		c := byCmd[ck]
		if c == nil {
			c = &Stats{Device: s.Device, Command: s.Command, Hist: &verify.Histogram{}}
			if p.cfg.Wakeups {
				c.Sleeps = &Sleeps{}
			}
			byCmd[ck] = c
			cmdErrnos[ck] = map[int]uint64{}
		}
		c.Calls += s.Calls
		c.Errors += s.Errors
		c.Hist.Merge(h)
		if s.Sleeps != nil && c.Sleeps != nil {
			c.Sleeps.add(s.Sleeps)
		}
		for e, n := range g.errnos {
			cmdErrnos[ck][e] += n
			allErrnos[e] += n
		}
	}
	for ck, c := range byCmd {
		c.Total = time.Duration(c.Hist.Sum())
		c.Latency = report.Summarize(c.Hist)
		c.Errnos = errnoList(cmdErrnos[ck])
		r.Commands = append(r.Commands, *c)
	}
	r.Limit(p.cfg.Limits)
	slices.SortFunc(r.Commands, busiest)
	slices.SortFunc(r.Processes, busiest)
	if r.Errnos = errnoList(allErrnos); r.Errnos == nil {
		r.Errnos = []ErrnoCount{}
	}
	if r.Commands == nil {
		r.Commands = []Stats{}
	}
	if r.Processes == nil {
		r.Processes = []Stats{}
	}
	r.Cost = p.cost()
	return r, nil
}

// elapsed is how long the probe has been, or was, attached.
func (p *Probe) elapsed() time.Duration {
	if !p.detached.IsZero() {
		return p.detached.Sub(p.Started)
	}
	return time.Since(p.Started)
}

// errnoList sorts errno counts, most frequent first; nil if there are
// none.
func errnoList(m map[int]uint64) []ErrnoCount {
	var out []ErrnoCount
	for e, n := range m {
		out = append(out, ErrnoCount{Errno: e, Name: ErrnoName(e), Count: n})
	}
	slices.SortFunc(out, func(a, b ErrnoCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Errno, b.Errno))
	})
	return out
}

// cost reads the programs' run-time statistics, if they were enabled.
func (p *Probe) cost() []report.ProgramCost {
	if p.stats == nil {
		return nil
	}
	out, err := loader.Costs(p.named(p.progs))
	if err != nil {
		return nil
	}
	return out
}

// Find returns the per-(device, command) row whose device prints as dev
// (a path such as /dev/ptmx, or "pipe") and whose command is cmd.
func (r *Result) Find(dev string, cmd uint32) (Stats, bool) {
	for _, s := range r.Commands {
		if s.Device.String() == dev && s.Command.Raw == cmd {
			return s, true
		}
	}
	return Stats{}, false
}

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	if err := report.WriteJSON(w, r); err != nil {
		return fmt.Errorf("encode ioctl result: %w", err)
	}
	return nil
}

// TextOptions shape the text report.
type TextOptions struct {
	// TopProcesses is how many per-process rows to list (busiest first);
	// 0 lists none.
	TopProcesses int
	// Histograms draws the histogram of each (device, command) with at
	// least this many calls; 0 draws none.
	Histograms uint64
}

// WriteText writes the report for people.
func (r *Result) WriteText(w io.Writer, o TextOptions) error {
	ew := report.NewWriter(w)
	ew.Printf("ioctl latency over %s: %d calls, %d failed (percentiles are bucket upper edges, <= 3.2%% high)\n",
		r.Elapsed.Round(time.Millisecond), r.Counters.Calls, r.Counters.Errors)
	ew.Printf("hook: %s, %s\n", r.Hook, r.HookDetail)
	if f := r.Filter; f.PID != 0 || f.Comm != "" || f.Dev != "" {
		ew.Printf("filter:")
		if f.PID != 0 {
			ew.Printf(" pid %d", f.PID)
		}
		if f.Comm != "" {
			ew.Printf(" comm %q", f.Comm)
		}
		if f.Dev != "" {
			ew.Printf(" device %s", f.Dev)
		}
		ew.Printf("\n")
	}
	for _, n := range r.Notes {
		ew.Printf("note: %s\n", n)
	}
	ew.Printf("\n")
	if len(r.Commands) == 0 {
		ew.Printf("no ioctl calls seen\n")
	} else {
		t := report.Table{Header: append([]string{"device", "dev", "command", "errors", "total"}, report.LatencyColumns()...)}
		for _, s := range r.Commands {
			num := s.Device.Number()
			if s.Device.Type == TypeBadFD {
				num = "-"
			}
			t.Add(append([]string{s.Device.String(), num, s.Command.String(), fmt.Sprint(s.Errors), report.Duration(s.Total)},
				s.Latency.Cells()...)...)
		}
		ew.Do(t.WriteText)
	}
	if len(r.Errnos) > 0 {
		ew.Printf("\nerrors by errno:\n")
		t := report.Table{Header: []string{"device", "command", "errno", "calls"}}
		for _, s := range r.Commands {
			for _, e := range s.Errnos {
				t.Add(s.Device.String(), s.Command.String(), e.Name, fmt.Sprint(e.Count))
			}
		}
		ew.Do(t.WriteText)
	}
	if r.Wakeups {
		ew.Printf("\nsleeps inside calls: asleep until a wake-up, then waiting to run (the scheduler's part):\n")
		t := report.Table{Header: []string{"device", "command", "calls slept", "wake-ups", "asleep", "run wait", "mean wait", "max wait/call"}}
		for _, s := range r.Commands {
			if sl := s.Sleeps; sl != nil && sl.Calls > 0 {
				t.Add(s.Device.String(), s.Command.String(), fmt.Sprint(sl.Calls), fmt.Sprint(sl.Wakeups), report.Duration(sl.Asleep),
					report.Duration(sl.RunWait), report.Duration(sl.meanRunWait()), report.Duration(sl.MaxRunWait))
			}
		}
		if len(t.Rows) == 0 {
			ew.Printf("no call slept\n")
		} else {
			ew.Do(t.WriteText)
		}
	}
	if o.TopProcesses > 0 && len(r.Processes) > 0 {
		n := min(o.TopProcesses, len(r.Processes))
		ew.Printf("\nby process (busiest %d of %d):\n", n, len(r.Processes))
		t := report.Table{Header: append([]string{"pid", "comm", "device", "command", "errors", "total"}, report.LatencyColumns()...)}
		for _, s := range r.Processes[:n] {
			t.Add(append([]string{fmt.Sprint(s.PID), s.Comm, s.Device.String(), s.Command.String(), fmt.Sprint(s.Errors), report.Duration(s.Total)},
				s.Latency.Cells()...)...)
		}
		ew.Do(t.WriteText)
	}
	if o.Histograms > 0 {
		for _, s := range r.Commands {
			if s.Calls < o.Histograms {
				continue
			}
			ew.Printf("\n%s %s:\n", s.Device, s.Command)
			ew.Do(func(w io.Writer) error { return s.Hist.WriteText(w, 40) })
		}
	}
	if r.SlowThreshold != nil {
		ew.Printf("\nslow calls (>= %s): %d streamed\n", report.Duration(*r.SlowThreshold), r.Counters.Slow)
		for i, s := range r.Slowest {
			if i == 10 {
				ew.Printf("  ... %d more in --json\n", len(r.Slowest)-10)
				break
			}
			ew.Printf("  %s\n", s)
		}
	}
	if len(r.Cost) > 0 {
		ew.Printf("\nprobe cost:")
		for _, c := range r.Cost {
			ew.Printf(" %s %d runs %s/run;", c.Program, c.Runs, report.Duration(c.PerRun()))
		}
		ew.Printf("\n")
	}
	ew.Printf("\n")
	ew.Do(r.Losses.WriteText)
	ew.Do(r.WriteInterrupted)
	return ew.Err()
}
