package ioctl

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// OtherCommand is the command number of a row that stands for several
// commands: those beyond a device's limit. It is _IOC(3, 0xff, 0xff,
// 0x3fff), the largest argument size with the last type and number,
// which no driver defines.
const OtherCommand = 0xffffffff

// KernelCommandsPerDevice is how many distinct commands of one device the
// probe's kernel tables keep apart: the first ones it sees. Calls of any
// later command are counted under OtherCommand, so that a process making
// up thousands of commands on /dev/null fills that device's share, not
// the tables every other device needs.
const KernelCommandsPerDevice = 256

// Limits bound the rows a result keeps of what any process controls
// (which commands it issues, on which files, from how many processes):
// the busiest keep their own rows, and the rest are added up into rows
// named "other", so that the figures stay complete while a report and a
// scrape stay small. Each fold is reported among the result's losses, as
// partial.
type Limits struct {
	// Commands is how many commands of each device keep their own row,
	// those with the most calls; the device's other commands share one.
	Commands int
	// Devices is how many devices keep their own rows, those with the
	// most calls; the others share one row, device and command "other".
	Devices int
	// Processes is how many per-process rows are kept, the busiest; the
	// others share one row, process 0 "other".
	Processes int
}

// DefaultLimits keep a scrape to at most (32+1)×64+1 (device, command)
// series, whatever runs on the machine.
func DefaultLimits() Limits { return Limits{Commands: 32, Devices: 64, Processes: 256} }

func (l Limits) check() error {
	if l.Commands < 1 || l.Commands > KernelCommandsPerDevice || l.Devices < 1 || l.Processes < 1 {
		return badConfig("limits %+v: commands 1..%d, devices and processes at least 1", l, KernelCommandsPerDevice)
	}
	return nil
}

// otherDevice is the device of the row of devices beyond the limit.
var otherDevice = Device{Type: TypeOther}

// add adds o's calls into s (same kind of row).
func (s *Stats) add(o Stats) {
	s.Calls += o.Calls
	s.Errors += o.Errors
	if s.Hist == nil {
		s.Hist = &verify.Histogram{}
	}
	if o.Hist != nil {
		s.Hist.Merge(o.Hist)
	}
	s.Total = time.Duration(s.Hist.Sum())
	s.Latency = report.Summarize(s.Hist)
	if o.Sleeps != nil {
		if s.Sleeps == nil {
			s.Sleeps = &Sleeps{}
		}
		s.Sleeps.add(o.Sleeps)
	}
	counts := map[int]uint64{}
	for _, e := range append(s.Errnos, o.Errnos...) {
		counts[e.Errno] += e.Count
	}
	s.Errnos = errnoList(counts)
}

// fold adds rows up by the key other gives each (ok false: the row keeps
// its own), keeping the order of first appearance; it returns the rows
// and the calls that were folded.
func fold(rows []Stats, other func(Stats) (Stats, bool)) ([]Stats, uint64) {
	type rowKey struct {
		pid uint32
		dev Device
		cmd uint32
	}
	var out []Stats
	index := map[rowKey]int{}
	var folded uint64
	for _, s := range rows {
		o, ok := other(s)
		if !ok {
			out = append(out, s)
			continue
		}
		folded += s.Calls
		k := rowKey{o.PID, o.Device, o.Command.Raw}
		if i, seen := index[k]; seen {
			out[i].add(s)
			continue
		}
		index[k] = len(out)
		o.Calls, o.Errors, o.Hist, o.Errnos, o.Sleeps = 0, 0, nil, nil, nil
		o.add(s)
		out = append(out, o)
	}
	return out, folded
}

// Limit folds r's rows as l says and reports what it folded among the
// losses, as partial: every call is still counted, in an "other" row.
func (r *Result) Limit(l Limits) {
	// The calls of each device, and each device's commands by calls.
	devCalls := map[Device]uint64{}
	byDev := map[Device][]Stats{}
	for _, s := range r.Commands {
		devCalls[s.Device] += s.Calls
		byDev[s.Device] = append(byDev[s.Device], s)
	}
	devices := make([]Device, 0, len(devCalls))
	for d := range devCalls {
		devices = append(devices, d)
	}
	slices.SortFunc(devices, func(a, b Device) int {
		return cmp.Or(cmp.Compare(devCalls[b], devCalls[a]), cmp.Compare(a.String(), b.String()), cmp.Compare(a.Number(), b.Number()))
	})
	keptDev := map[Device]bool{}
	for _, d := range devices[:min(l.Devices, len(devices))] {
		keptDev[d] = true
	}
	type cmdKey struct {
		dev Device
		cmd uint32
	}
	keptCmd := map[cmdKey]bool{}
	for d, rows := range byDev {
		slices.SortFunc(rows, func(a, b Stats) int {
			return cmp.Or(cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Command.Raw, b.Command.Raw))
		})
		n := 0
		for _, s := range rows {
			if s.Command.Raw != OtherCommand && n < l.Commands {
				keptCmd[cmdKey{d, s.Command.Raw}] = true
				n++
			}
		}
	}
	// One rule for both tables: a row of a device beyond the limit goes
	// to device "other", a command beyond its device's limit to its
	// device's "other" command.
	other := func(s Stats) (Stats, bool) {
		switch {
		case !keptDev[s.Device]:
			s.Device, s.Command = otherDevice, DecodeCommand(OtherCommand)
			return s, true
		case s.Command.Raw == OtherCommand || !keptCmd[cmdKey{s.Device, s.Command.Raw}]:
			s.Command = DecodeCommand(OtherCommand)
			return s, true
		}
		return s, false
	}
	var foldedCmds, foldedDevs uint64
	for _, s := range r.Commands {
		if o, ok := other(s); ok && o.Device.Type == TypeOther {
			foldedDevs += s.Calls
		} else if ok && s.Command.Raw != OtherCommand {
			foldedCmds += s.Calls
		}
	}
	r.Commands, _ = fold(r.Commands, other)
	procs, _ := fold(r.Processes, other)
	slices.SortFunc(procs, busiest)
	var foldedProcs uint64
	if len(procs) > l.Processes {
		rest, n := fold(procs[l.Processes:], func(s Stats) (Stats, bool) {
			s.PID, s.Comm = 0, "other"
			s.Device, s.Command = otherDevice, DecodeCommand(OtherCommand)
			return s, true
		})
		procs, foldedProcs = append(procs[:l.Processes], rest...), n
	}
	r.Processes = procs
	slices.SortFunc(r.Commands, busiest)
	r.Losses = append(r.Losses,
		report.Loss{What: fmt.Sprintf("calls counted under command \"other\": commands beyond the %d busiest of their device (--max-commands)", l.Commands), Count: foldedCmds, Partial: true},
		report.Loss{What: fmt.Sprintf("calls counted under device \"other\": devices beyond the %d busiest (--max-devices)", l.Devices), Count: foldedDevs, Partial: true},
		report.Loss{What: fmt.Sprintf("calls counted in the per-process row \"other\": rows beyond the %d busiest (--max-processes)", l.Processes), Count: foldedProcs, Partial: true},
	)
}

// busiest orders rows by time spent, then calls, then name.
func busiest(a, b Stats) int {
	return cmp.Or(cmp.Compare(b.Total, a.Total), cmp.Compare(b.Calls, a.Calls),
		cmp.Compare(a.Device.String(), b.Device.String()), cmp.Compare(a.Command.Raw, b.Command.Raw),
		cmp.Compare(a.PID, b.PID))
}
