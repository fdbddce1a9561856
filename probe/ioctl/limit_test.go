package ioctl

import (
	"testing"

	"github.com/hotlane/hotlane/verify"
)

// floodResult is what the probe reads after a process issued n made-up
// commands on /dev/null, once each, and another process used a GPU's
// three commands many times.
func floodResult(n int) *Result {
	row := func(dev Device, cmd uint32, pid uint32, calls uint64, lat uint64) Stats {
		h := &verify.Histogram{}
		for range calls {
			h.Record(lat)
		}
		return Stats{Device: dev, Command: DecodeCommand(cmd), PID: pid, Calls: calls, Errors: calls, Hist: h,
			Errnos: []ErrnoCount{{Errno: 25, Name: "ENOTTY", Count: calls}}}
	}
	null := Device{Type: TypeChar, Major: 1, Minor: 3, Path: "/dev/null"}
	gpu := Device{Type: TypeChar, Major: 195, Minor: 0, Path: "/dev/nvidia0"}
	r := &Result{}
	for i := range n {
		s := row(null, 0x40000000|uint32(i), 1000, 1, 2000)
		r.Processes = append(r.Processes, s)
		s.PID = 0
		r.Commands = append(r.Commands, s)
	}
	for _, cmd := range []uint32{0xc0104629, 0xc020462a, 0xc030462b} {
		s := row(gpu, cmd, 2000, 50, 100000)
		r.Processes = append(r.Processes, s)
		s.PID = 0
		r.Commands = append(r.Commands, s)
	}
	return r
}

func totalCalls(rows []Stats) (n uint64) {
	for _, s := range rows {
		n += s.Calls
	}
	return n
}

// 20,000 distinct commands on /dev/null become the 32 busiest and one
// "other" row for the device, beside every row of the GPU; no call is
// lost, and the fold is counted among the losses, as partial.
func TestLimitFoldsCommandFlood(t *testing.T) {
	r := floodResult(20000)
	calls, procCalls := totalCalls(r.Commands), totalCalls(r.Processes)
	l := DefaultLimits()
	r.Limit(l)
	if n := len(r.Commands); n != l.Commands+1+3 {
		t.Errorf("%d (device, command) rows, want %d for /dev/null (32 and other) and 3 for the GPU", n, l.Commands+1+3)
	}
	if got := totalCalls(r.Commands); got != calls {
		t.Errorf("%d calls after folding, want all %d", got, calls)
	}
	if got := totalCalls(r.Processes); got != procCalls || len(r.Processes) > l.Processes+1 {
		t.Errorf("%d per-process rows with %d calls, want at most %d with all %d", len(r.Processes), got, l.Processes+1, procCalls)
	}
	other, ok := r.Find("/dev/null", OtherCommand)
	if !ok || other.Calls != 20000-uint64(l.Commands) || other.Errnos[0].Count != other.Calls || other.Hist.Count() != other.Calls {
		t.Errorf("/dev/null's other row: %+v (found %v), want the %d calls folded, their errnos and latencies", other, ok, 20000-l.Commands)
	}
	for _, cmd := range []uint32{0xc0104629, 0xc020462a, 0xc030462b} {
		if s, ok := r.Find("/dev/nvidia0", cmd); !ok || s.Calls != 50 {
			t.Errorf("GPU command %#x: %+v (found %v), want its own row of 50 calls", cmd, s, ok)
		}
	}
	var folded uint64
	for _, loss := range r.Losses {
		if !loss.Partial {
			t.Errorf("loss %q is not partial: folded calls are still counted", loss.What)
		}
		folded += loss.Count
	}
	if want := uint64(20000 - l.Commands); folded != want {
		t.Errorf("losses count %d folded calls, want %d", folded, want)
	}
}

// Devices beyond the limit share one row, device and command "other".
func TestLimitFoldsDevices(t *testing.T) {
	r := &Result{}
	for i := range 10 {
		h := &verify.Histogram{}
		h.Record(1000)
		r.Commands = append(r.Commands, Stats{Device: Device{Type: TypeChar, Major: 10, Minor: uint32(i), Path: "/dev/x"}, Command: DecodeCommand(1), Calls: 1, Hist: h})
	}
	r.Limit(Limits{Commands: 4, Devices: 3, Processes: 10})
	if len(r.Commands) != 4 {
		t.Fatalf("%d rows, want 3 devices and other: %+v", len(r.Commands), r.Commands)
	}
	if s, ok := r.Find("other", OtherCommand); !ok || s.Calls != 7 {
		t.Errorf("the other devices' row: %+v (found %v), want 7 calls", s, ok)
	}
}

// Per-process rows beyond the limit share one row, process 0 "other".
func TestLimitFoldsProcesses(t *testing.T) {
	r := &Result{}
	gpu := Device{Type: TypeChar, Major: 195, Minor: 0, Path: "/dev/nvidia0"}
	for pid := range uint32(1000) {
		h := &verify.Histogram{}
		h.Record(1000 + uint64(pid))
		r.Processes = append(r.Processes, Stats{Device: gpu, Command: DecodeCommand(1), PID: pid + 1, Calls: 1, Hist: h})
	}
	r.Limit(Limits{Commands: 4, Devices: 4, Processes: 256})
	if len(r.Processes) != 257 || totalCalls(r.Processes) != 1000 {
		t.Fatalf("%d rows with %d calls, want 257 with all 1000", len(r.Processes), totalCalls(r.Processes))
	}
	last := r.Processes[256]
	if last.PID != 0 || last.Comm != "other" || last.Calls != 744 {
		t.Errorf("the folded row: pid %d comm %q calls %d, want 0 other 744", last.PID, last.Comm, last.Calls)
	}
	var folded uint64
	for _, loss := range r.Losses {
		folded += loss.Count
	}
	if folded != 744 {
		t.Errorf("losses count %d folded calls, want 744", folded)
	}
}
