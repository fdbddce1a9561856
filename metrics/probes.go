package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotlane/hotlane/probe/dma"
	"github.com/hotlane/hotlane/probe/ioctl"
	"github.com/hotlane/hotlane/probe/xdp"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// probeMetrics are what every probe exports: which hook it runs on
// (hotlane_probe_info{probe,hook}) and every kind of loss it counts,
// including those that did not happen (hotlane_probe_lost_total{probe,
// reason}, the reasons of the JSON report's losses).
type probeMetrics struct {
	probe      string
	info, lost *prometheus.Desc
}

func newProbeMetrics(probe string) probeMetrics {
	return probeMetrics{
		probe: probe,
		info:  desc("probe", "info", "The running probe and the hook family it is attached with (always 1).", "probe", "hook"),
		lost:  desc("probe", "lost_total", "Events the probe could not count, by reason (every reason it has, zero or not).", "probe", "reason"),
	}
}

func (p probeMetrics) describe(ch chan<- *prometheus.Desc) { ch <- p.info; ch <- p.lost }

func (p probeMetrics) collect(ch chan<- prometheus.Metric, hook string, losses report.Losses) {
	gauge(ch, p.info, 1, p.probe, hook)
	for _, l := range losses {
		counter(ch, p.lost, float64(l.Count), p.probe, l.What)
	}
}

// IoctlCollector exports probe ioctl's figures at each scrape: per
// (device, command) the latency histogram at hotlane's bucket edges and
// the failed calls, and the probe's losses and BPF run time. Per-process
// rows are left to the JSON report: a label per process would grow
// without bound on a fleet.
type IoctlCollector struct {
	src live[*ioctl.Result]
	probeMetrics
	latency, errors *prometheus.Desc
	cost            bpfCost
}

// NewIoctlCollector returns a collector with nothing to export yet.
func NewIoctlCollector() *IoctlCollector {
	return &IoctlCollector{
		probeMetrics: newProbeMetrics("ioctl"),
		latency:      desc("ioctl", "latency_seconds", "Time inside ioctl(2), per device (its /dev path, else major:minor) and command (its name, else its _IOC spelling).", "device", "command"),
		errors:       desc("ioctl", "errors_total", "ioctl(2) calls that returned an error, per device and command.", "device", "command"),
		cost:         newBPFCost("ioctl", "ioctl probe"),
	}
}

// Live reads the probe through read from now on (ioctl.RunOptions.Live).
func (c *IoctlCollector) Live(read func() (*ioctl.Result, error)) (stop func()) {
	return c.src.start(read)
}

// Final exports r, the run's result, from now on.
func (c *IoctlCollector) Final(r *ioctl.Result) { c.src.final(r) }

// Describe implements prometheus.Collector.
func (c *IoctlCollector) Describe(ch chan<- *prometheus.Desc) {
	c.probeMetrics.describe(ch)
	ch <- c.latency
	ch <- c.errors
	c.cost.describe(ch)
}

// Collect implements prometheus.Collector.
func (c *IoctlCollector) Collect(ch chan<- prometheus.Metric) {
	r, ok := c.src.get(ch, c.latency)
	if !ok {
		return
	}
	c.probeMetrics.collect(ch, string(r.Hook), r.Losses)
	// Rows are per device number; two may share a name (a file on one
	// mount point, sockets), and a scrape must not repeat a label set.
	type row struct {
		hist   verify.Histogram
		errors uint64
	}
	rows, order := map[[2]string]*row{}, [][2]string{}
	for _, s := range r.Commands {
		k := [2]string{s.Device.String(), s.Command.String()}
		if rows[k] == nil {
			rows[k] = &row{}
			order = append(order, k)
		}
		rows[k].hist.Merge(s.Hist)
		rows[k].errors += s.Errors
	}
	for _, k := range order {
		ch <- histogram(c.latency, &rows[k].hist, k[0], k[1])
		counter(ch, c.errors, float64(rows[k].errors), k[0], k[1])
	}
	c.cost.collect(ch, r.Cost)
}

// DMACollector exports probe dma's figures at each scrape, per device
// (the kernel's dev_name()): DMA-API calls and failed calls by kind, the
// bytes they covered, and map latency where it is measured.
type DMACollector struct {
	src live[*dma.Result]
	probeMetrics
	calls, failed, bytes, latency *prometheus.Desc
}

// NewDMACollector returns a collector with nothing to export yet.
func NewDMACollector() *DMACollector {
	return &DMACollector{
		probeMetrics: newProbeMetrics("dma"),
		calls:        desc("dma", "calls_total", "Successful DMA-API calls per device and kind: map and unmap (single and scatterlist), alloc and free.", "device", "call"),
		failed:       desc("dma", "failed_calls_total", "Failed DMA-API calls per device and kind (map, alloc).", "device", "call"),
		bytes:        desc("dma", "bytes_total", "Bytes covered by successful DMA-API calls per device and kind (unmapped scatterlists are not counted on the tracefs path).", "device", "call"),
		latency:      desc("dma", "map_latency_seconds", "Time inside DMA map calls per device (fentry to fexit), where the kernel allows fentry.", "device"),
	}
}

// Live reads the probe through read from now on (dma.RunOptions.Live).
func (c *DMACollector) Live(read func() (*dma.Result, error)) (stop func()) { return c.src.start(read) }

// Final exports r, the run's result, from now on.
func (c *DMACollector) Final(r *dma.Result) { c.src.final(r) }

// Describe implements prometheus.Collector.
func (c *DMACollector) Describe(ch chan<- *prometheus.Desc) {
	c.probeMetrics.describe(ch)
	for _, d := range []*prometheus.Desc{c.calls, c.failed, c.bytes, c.latency} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *DMACollector) Collect(ch chan<- prometheus.Metric) {
	r, ok := c.src.get(ch, c.calls)
	if !ok {
		return
	}
	c.probeMetrics.collect(ch, r.Family, r.Losses)
	for _, d := range r.Devices {
		for call, n := range map[string]uint64{"map": d.Maps, "unmap": d.Unmaps, "alloc": d.Allocs, "free": d.Frees} {
			counter(ch, c.calls, float64(n), d.Name, call)
		}
		for call, n := range map[string]uint64{"map": d.MapErrors, "alloc": d.AllocErrors} {
			counter(ch, c.failed, float64(n), d.Name, call)
		}
		for call, n := range map[string]uint64{"map": d.BytesMapped, "unmap": d.BytesUnmapped, "alloc": d.BytesAllocated, "free": d.BytesFreed} {
			counter(ch, c.bytes, float64(n), d.Name, call)
		}
		if d.MapLatencyHist != nil {
			ch <- histogram(c.latency, d.MapLatencyHist, d.Name)
		}
	}
}

// XDPCollector exports probe xdp's counters at each scrape: frames, bytes
// and drops per traffic class and malformed frames per reason, labelled
// with the interface.
type XDPCollector struct {
	src live[*xdp.Report]
	probeMetrics
	packets, bytes, dropped, malformed *prometheus.Desc
}

// NewXDPCollector returns a collector with nothing to export yet.
func NewXDPCollector() *XDPCollector {
	return &XDPCollector{
		probeMetrics: newProbeMetrics("xdp"),
		packets:      desc("xdp", "packets_total", "Frames the XDP program saw, per interface and traffic class (every frame is in exactly one class).", "interface", "class"),
		bytes:        desc("xdp", "bytes_total", "Bytes of the frames the XDP program saw, per interface and traffic class.", "interface", "class"),
		dropped:      desc("xdp", "dropped_total", "Frames the XDP program dropped by its policy, per interface and traffic class.", "interface", "class"),
		malformed:    desc("xdp", "malformed_total", "Malformed frames per interface and reason.", "interface", "reason"),
	}
}

// Live reads the program's counters through read from now on
// (xdp.Options.Live).
func (c *XDPCollector) Live(read func() (*xdp.Report, error)) (stop func()) { return c.src.start(read) }

// Final exports r, the run's report, from now on.
func (c *XDPCollector) Final(r *xdp.Report) { c.src.final(r) }

// Describe implements prometheus.Collector.
func (c *XDPCollector) Describe(ch chan<- *prometheus.Desc) {
	c.probeMetrics.describe(ch)
	for _, d := range []*prometheus.Desc{c.packets, c.bytes, c.dropped, c.malformed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *XDPCollector) Collect(ch chan<- prometheus.Metric) {
	r, ok := c.src.get(ch, c.packets)
	if !ok {
		return
	}
	c.probeMetrics.collect(ch, r.Mode.String(), r.Losses)
	for _, row := range r.Classes {
		class := row.Class.String()
		counter(ch, c.packets, float64(row.Packets), r.Interface, class)
		counter(ch, c.bytes, float64(row.Bytes), r.Interface, class)
		counter(ch, c.dropped, float64(row.Dropped), r.Interface, class)
	}
	for _, row := range r.Malformed {
		counter(ch, c.malformed, float64(row.Frames), r.Interface, row.Reason.String())
	}
}
