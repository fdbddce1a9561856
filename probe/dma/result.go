package dma

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/internal/cstr"
	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// Operations as bpf/dma.bpf.c numbers them (enum hl_dma_op).
const (
	opMap = iota
	opMapSG
	opUnmap
	opUnmapSG
	opAlloc
	opFree
	opMapErr
	opAllocErr
	numOps
)

// Kinds of loss as bpf/dma.bpf.c numbers them (enum hl_dma_loss).
const (
	lossDevFull = iota
	lossHistFull
	lossStampFull
	lossStampDeep
	lossSGLong
	lossTpSGTrunc
	lossUnmatched // not a loss: a map call that was in flight at attach
	numLosses
)

// Loss descriptions, in report order.
func lossNames() []string {
	return []string{
		lossDevFull:   "device table full",
		lossHistFull:  "latency table full",
		lossStampFull: "latency stamp table full",
		lossStampDeep: "map calls nested too deep for a latency stamp",
		lossSGLong:    "scatterlist too long to walk (bytes undercounted)",
		lossTpSGTrunc: "tracefs record truncated a scatterlist (bytes undercounted)",
	}
}

// lossMisses names the events the kernel skipped because a probe program
// was already running on that CPU (an interrupt mapping DMA while the
// probe handled another event), read from the programs' run statistics.
const lossMisses = "events skipped by the kernel (program busy on that CPU)"

// Directions, enum dma_data_direction, plus "OTHER" for anything else.
func dirName(d uint32) string {
	switch d {
	case 0:
		return "BIDIRECTIONAL"
	case 1:
		return "TO_DEVICE"
	case 2:
		return "FROM_DEVICE"
	case 3:
		return "NONE"
	}
	return "OTHER"
}

// Counts are DMA-API calls and their bytes.
type Counts struct {
	// Maps counts successful map calls, single and scatterlist; SGMaps
	// is the scatterlist part. BytesMapped is their total length (for a
	// scatterlist, the sum of its entries).
	Maps   uint64 `json:"maps"`
	SGMaps uint64 `json:"sg_maps"`
	// Unmaps likewise; BytesUnmapped is not known for scatterlists on
	// the tracefs path, whose record has no lengths.
	Unmaps   uint64 `json:"unmaps"`
	SGUnmaps uint64 `json:"sg_unmaps"`
	// Allocs and Frees are coherent (and non-coherent page/sgt)
	// allocations.
	Allocs uint64 `json:"allocs"`
	Frees  uint64 `json:"frees"`
	// MapErrors and AllocErrors are failed calls; their bytes are not
	// counted.
	MapErrors      uint64 `json:"map_errors"`
	AllocErrors    uint64 `json:"alloc_errors"`
	BytesMapped    uint64 `json:"bytes_mapped"`
	BytesUnmapped  uint64 `json:"bytes_unmapped"`
	BytesAllocated uint64 `json:"bytes_allocated"`
	BytesFreed     uint64 `json:"bytes_freed"`
}

// Errors is MapErrors + AllocErrors.
func (c Counts) Errors() uint64 { return c.MapErrors + c.AllocErrors }

// add adds one per-CPU value of the BPF table.
func (c *Counts) add(v bpf.DmaDevVal) {
	c.Maps += v.Count[opMap] + v.Count[opMapSG]
	c.SGMaps += v.Count[opMapSG]
	c.Unmaps += v.Count[opUnmap] + v.Count[opUnmapSG]
	c.SGUnmaps += v.Count[opUnmapSG]
	c.Allocs += v.Count[opAlloc]
	c.Frees += v.Count[opFree]
	c.MapErrors += v.Count[opMapErr]
	c.AllocErrors += v.Count[opAllocErr]
	c.BytesMapped += v.Bytes[opMap] + v.Bytes[opMapSG]
	c.BytesUnmapped += v.Bytes[opUnmap] + v.Bytes[opUnmapSG]
	c.BytesAllocated += v.Bytes[opAlloc]
	c.BytesFreed += v.Bytes[opFree]
}

func (c *Counts) merge(o Counts) {
	c.Maps += o.Maps
	c.SGMaps += o.SGMaps
	c.Unmaps += o.Unmaps
	c.SGUnmaps += o.SGUnmaps
	c.Allocs += o.Allocs
	c.Frees += o.Frees
	c.MapErrors += o.MapErrors
	c.AllocErrors += o.AllocErrors
	c.BytesMapped += o.BytesMapped
	c.BytesUnmapped += o.BytesUnmapped
	c.BytesAllocated += o.BytesAllocated
	c.BytesFreed += o.BytesFreed
}

// Direction is one DMA direction's share of a device's activity.
type Direction struct {
	Dir string `json:"dir"` // TO_DEVICE, FROM_DEVICE, BIDIRECTIONAL, NONE, OTHER
	Counts
}

// Device is everything seen for one device, named by the kernel's
// dev_name() (a PCI address such as 0000:00:04.0, a platform device name,
// ...; at most 31 bytes, "?" for a call without a named device). Total in
// a Result is a Device named "total".
type Device struct {
	Name string `json:"device"`
	Counts
	// MappedBytesPerSec is BytesMapped over the whole run.
	MappedBytesPerSec float64     `json:"mapped_bytes_per_sec"`
	Directions        []Direction `json:"directions"`
	// MapLatency summarizes MapLatencyHist: time inside the map call
	// (fentry to fexit); empty when not measured.
	MapLatency     report.Latency    `json:"map_latency"`
	MapLatencyHist *verify.Histogram `json:"map_latency_hist,omitempty"`
}

// Result is a snapshot of the probe's counters.
type Result struct {
	report.Header
	// Family is the hook family: tp_btf, tracepoint or fentry.
	Family string `json:"family"`
	// Hooks count the events; LatencyHooks measure map latency.
	Hooks        []string `json:"hooks"`
	LatencyHooks []string `json:"latency_hooks"`
	// LatencyMeasured says whether map latency was measured at all.
	LatencyMeasured bool     `json:"latency_measured"`
	Devices         []Device `json:"devices"`
	Total           Device   `json:"total"`
	// LatencyUnmatched counts map calls that returned without a start
	// stamp: calls in flight when the probe attached. Not a loss.
	LatencyUnmatched uint64   `json:"latency_unmatched"`
	Notes            []string `json:"notes,omitempty"`
}

// Snapshot reads the counters: everything since Start.
func (pr *Probe) Snapshot() (*Result, error) {
	if pr.objs == (probeObjects{}) {
		return nil, fmt.Errorf("DMA probe is closed")
	}
	r := &Result{
		Header:          report.NewHeader("probe dma", pr.started),
		Family:          pr.family,
		Hooks:           pr.Hooks(),
		LatencyHooks:    pr.LatencyHooks(),
		LatencyMeasured: len(pr.latHooks) > 0,
		Notes:           pr.Notes(),
	}
	r.Elapsed = time.Since(pr.started)
	if r.LatencyHooks == nil {
		r.LatencyHooks = []string{}
	}

	devs := map[string]*Device{}
	dirs := map[string]map[uint32]*Counts{}
	get := func(name string) *Device {
		d := devs[name]
		if d == nil {
			d = &Device{Name: name}
			devs[name] = d
			dirs[name] = map[uint32]*Counts{}
		}
		return d
	}
	var key bpf.DmaDevKey
	var vals []bpf.DmaDevVal
	it := pr.objs.DevStats.Iterate()
	for it.Next(&key, &vals) {
		name := cstr.String(key.Name[:])
		d := get(name)
		c := dirs[name][key.Dir]
		if c == nil {
			c = new(Counts)
			dirs[name][key.Dir] = c
		}
		for _, v := range vals {
			d.Counts.add(v)
			c.add(v)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read DMA counters: %w", err)
	}

	if r.LatencyMeasured {
		if err := pr.readLatency(get); err != nil {
			return nil, err
		}
	}

	var lost [numLosses]uint64
	var perCPU []uint64
	for i := range uint32(numLosses) {
		if err := pr.objs.Losses.Lookup(i, &perCPU); err != nil {
			return nil, fmt.Errorf("read DMA loss counters: %w", err)
		}
		for _, n := range perCPU {
			lost[i] += n
		}
	}
	for i, what := range lossNames() {
		r.Losses = append(r.Losses, report.Loss{What: what, Count: lost[i]})
	}
	misses := loader.RecursionMisses(slices.Collect(maps.Values(pr.instances))...)
	r.Losses = append(r.Losses, report.Loss{What: lossMisses, Count: misses})
	r.LatencyUnmatched = lost[lossUnmatched]

	for name, d := range devs {
		for dir, c := range dirs[name] {
			d.Directions = append(d.Directions, Direction{Dir: dirName(dir), Counts: *c})
		}
		sort.Slice(d.Directions, func(i, j int) bool { return d.Directions[i].Dir < d.Directions[j].Dir })
		r.Devices = append(r.Devices, *d)
	}
	r.finish()
	return r, nil
}

// readLatency adds the per-device map latency histograms.
func (pr *Probe) readLatency(get func(string) *Device) error {
	type cells struct {
		counts   []uint64
		max, sum uint64
	}
	byDev := map[string]*cells{}
	var key bpf.DmaHistKey
	var vals []uint64
	it := pr.objs.LatHist.Iterate()
	for it.Next(&key, &vals) {
		name := cstr.String(key.Name[:])
		c := byDev[name]
		if c == nil {
			c = &cells{}
			byDev[name] = c
		}
		switch cell := int(key.Cell); {
		case cell < verify.NumBuckets:
			if cell >= len(c.counts) {
				c.counts = append(c.counts, make([]uint64, cell+1-len(c.counts))...)
			}
			for _, v := range vals {
				c.counts[cell] += v
			}
		case cell == verify.NumBuckets: // HL_HIST_MAX_CELL: max over CPUs
			for _, v := range vals {
				c.max = max(c.max, v)
			}
		case cell == verify.NumBuckets+1: // HL_HIST_SUM_CELL
			for _, v := range vals {
				c.sum += v
			}
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read DMA latency histograms: %w", err)
	}
	for name, c := range byDev {
		h, err := verify.FromBuckets(c.counts, c.max)
		if err != nil {
			return fmt.Errorf("device %s latency: %w", name, err)
		}
		if h.Count() == 0 {
			continue
		}
		h.SetSum(c.sum)
		get(name).MapLatencyHist = h
	}
	return nil
}

// finish sorts the devices (most bytes mapped first), computes rates and
// latency summaries and the total.
func (r *Result) finish() {
	sort.Slice(r.Devices, func(i, j int) bool {
		a, b := r.Devices[i], r.Devices[j]
		if a.BytesMapped != b.BytesMapped {
			return a.BytesMapped > b.BytesMapped
		}
		if a.Maps+a.Allocs != b.Maps+b.Allocs {
			return a.Maps+a.Allocs > b.Maps+b.Allocs
		}
		return a.Name < b.Name
	})
	if r.Devices == nil {
		r.Devices = []Device{}
	}
	total := Device{Name: "total", Directions: []Direction{}}
	totalDirs := map[string]*Counts{}
	var hist verify.Histogram
	for i := range r.Devices {
		d := &r.Devices[i]
		d.MappedBytesPerSec = rate(d.BytesMapped, r.Elapsed)
		if d.MapLatencyHist != nil {
			d.MapLatency = report.Summarize(d.MapLatencyHist)
			hist.Merge(d.MapLatencyHist)
		}
		if d.Directions == nil {
			d.Directions = []Direction{}
		}
		total.Counts.merge(d.Counts)
		for _, dir := range d.Directions {
			c := totalDirs[dir.Dir]
			if c == nil {
				c = new(Counts)
				totalDirs[dir.Dir] = c
			}
			c.merge(dir.Counts)
		}
	}
	for dir, c := range totalDirs {
		total.Directions = append(total.Directions, Direction{Dir: dir, Counts: *c})
	}
	sort.Slice(total.Directions, func(i, j int) bool { return total.Directions[i].Dir < total.Directions[j].Dir })
	total.MappedBytesPerSec = rate(total.BytesMapped, r.Elapsed)
	if hist.Count() > 0 {
		total.MapLatencyHist = &hist
		total.MapLatency = report.Summarize(&hist)
	}
	r.Total = total
}

func rate(bytes uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / d.Seconds()
}

// Device returns the device called name, if it was seen.
func (r *Result) Device(name string) (Device, bool) {
	for _, d := range r.Devices {
		if d.Name == name {
			return d, true
		}
	}
	return Device{}, false
}

// Direction returns the counts of direction dir ("TO_DEVICE", ...), zero
// if the device saw none.
func (d Device) Direction(dir string) Counts {
	for _, x := range d.Directions {
		if x.Dir == dir {
			return x.Counts
		}
	}
	return Counts{}
}

// WriteJSON writes the result as one indented JSON document.
func (r *Result) WriteJSON(w io.Writer) error {
	return report.WriteJSON(w, r)
}

// WriteText writes the report for people: a table per device, the
// direction breakdown, the losses and the notes.
func (r *Result) WriteText(w io.Writer) error {
	ew := report.NewWriter(w)
	ew.Printf("DMA activity over %s on %s\n", report.Duration(r.Elapsed), r.Kernel)
	ew.Printf("hooks: %s\n", hookSummary(r.Family, r.Hooks))
	if r.LatencyMeasured {
		ew.Printf("map latency: %s\n", strings.Join(r.LatencyHooks, ", "))
	} else {
		ew.Printf("map latency: not measured\n")
	}
	ew.Printf("\n")

	t := report.Table{Header: []string{"device", "maps", "unmaps", "allocs", "frees", "errors", "mapped", "MB/s"}}
	if r.LatencyMeasured {
		for _, c := range report.LatencyColumns() {
			t.Header = append(t.Header, "lat "+c)
		}
	}
	row := func(d Device) {
		cells := []string{d.Name, u(d.Maps), u(d.Unmaps), u(d.Allocs), u(d.Frees), u(d.Errors()),
			Bytes(d.BytesMapped), strconv.FormatFloat(d.MappedBytesPerSec/1e6, 'f', 2, 64)}
		if r.LatencyMeasured {
			cells = append(cells, d.MapLatency.Cells()...)
		}
		t.Add(cells...)
	}
	for _, d := range r.Devices {
		row(d)
	}
	row(r.Total)
	ew.Do(t.WriteText)

	if len(r.Devices) == 0 {
		ew.Printf("\nno DMA-API activity seen\n")
	} else {
		ew.Printf("\nby direction:\n")
		dt := report.Table{Header: []string{"device", "direction", "maps", "unmaps", "mapped", "unmapped", "allocs", "allocated", "errors"}}
		for _, d := range r.Devices {
			for _, x := range d.Directions {
				dt.Add(d.Name, x.Dir, u(x.Maps), u(x.Unmaps), Bytes(x.BytesMapped), Bytes(x.BytesUnmapped),
					u(x.Allocs), Bytes(x.BytesAllocated), u(x.Errors()))
			}
		}
		ew.Do(dt.WriteText)
	}
	ew.Printf("\n")
	ew.Do(r.Losses.WriteText)
	if r.LatencyUnmatched > 0 {
		ew.Printf("map calls in flight at attach (no latency sample): %d\n", r.LatencyUnmatched)
	}
	for _, n := range r.Notes {
		ew.Printf("note: %s\n", n)
	}
	ew.Do(r.WriteInterrupted)
	return ew.Err()
}

// hookSummary shortens "tp_btf/dma_map_phys, tp_btf/dma_unmap_phys, ..."
// to "tp_btf on dma_map_phys, dma_unmap_phys, ...".
func hookSummary(family string, hooks []string) string {
	if len(hooks) == 0 {
		return "none"
	}
	prefix := map[string]string{HooksTpBTF: "tp_btf/", HooksTracepoint: "tracepoint/dma/", HooksFentry: "fexit/"}[family]
	kind := map[string]string{HooksTpBTF: "tp_btf", HooksTracepoint: "tracepoint", HooksFentry: "fexit"}[family]
	var names []string
	for _, h := range hooks {
		n, ok := strings.CutPrefix(h, prefix)
		if !ok || prefix == "" {
			return strings.Join(hooks, ", ")
		}
		names = append(names, n)
	}
	return kind + " on " + strings.Join(names, ", ")
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// Bytes formats a byte count with a binary unit: 512B, 4.0KiB, 16.0MiB.
func Bytes(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + "B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n)
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v >= 100 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64) + units[i]
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + units[i]
}
