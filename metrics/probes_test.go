package metrics

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotlane/hotlane/probe/dma"
	"github.com/hotlane/hotlane/probe/ioctl"
	"github.com/hotlane/hotlane/probe/xdp"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// gather registers c alone (pedantically: a repeated label set or a
// metric its Describe does not announce fails) and returns each sample as
// name{label="value",...} in label order, histograms as their _count and
// _sum.
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			slices.Sort(ls)
			key := func(suffix string) string { return f.GetName() + suffix + "{" + strings.Join(ls, ",") + "}" }
			switch {
			case m.GetHistogram() != nil:
				out[key("_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key("_sum")] = m.GetHistogram().GetSampleSum()
			case m.GetCounter() != nil:
				out[key("")] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key("")] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func want(t *testing.T, got map[string]float64, key string, v float64) {
	t.Helper()
	if g, ok := got[key]; !ok || g != v {
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		t.Errorf("%s = %v (present %v), want %v; have:\n%s", key, g, ok, v, strings.Join(keys, "\n"))
	}
}

func hist(ns ...uint64) *verify.Histogram {
	var h verify.Histogram
	for _, v := range ns {
		h.Record(v)
	}
	return &h
}

// The ioctl collector exports a latency histogram and failed calls per
// (device, command), merging rows whose names coincide (two sockets), and
// every loss reason; before the probe runs it exports nothing.
func TestIoctlCollector(t *testing.T) {
	c := NewIoctlCollector()
	if got := gather(t, c); len(got) != 0 {
		t.Errorf("before the probe: %v", got)
	}
	sock := ioctl.Device{Type: ioctl.TypeSocket}
	r := &ioctl.Result{
		Header: report.Header{Losses: report.Losses{{What: "slow-call ring buffer full", Count: 3}, {What: "call table full"}}},
		Hook:   ioctl.HookFentry,
		Commands: []ioctl.Stats{
			{Device: ioctl.Device{Type: ioctl.TypeChar, Path: "/dev/null", Major: 1, Minor: 3}, Command: ioctl.DecodeCommand(0x5401), Errors: 2, Hist: hist(1000, 2000)},
			{Device: sock, Command: ioctl.DecodeCommand(0x8910), Hist: hist(500)},
			{Device: sock, Command: ioctl.DecodeCommand(0x8910), Errors: 1, Hist: hist(700, 900)},
		},
	}
	c.Final(r)
	got := gather(t, c)
	tcgets := ioctl.DecodeCommand(0x5401).String()
	siocg := ioctl.DecodeCommand(0x8910).String()
	want(t, got, fmt.Sprintf(`hotlane_ioctl_latency_seconds_count{command=%q,device="/dev/null"}`, tcgets), 2)
	want(t, got, fmt.Sprintf(`hotlane_ioctl_latency_seconds_sum{command=%q,device="/dev/null"}`, tcgets), 3e-6)
	want(t, got, fmt.Sprintf(`hotlane_ioctl_errors_total{command=%q,device="/dev/null"}`, tcgets), 2)
	want(t, got, fmt.Sprintf(`hotlane_ioctl_latency_seconds_count{command=%q,device="socket"}`, siocg), 3)
	want(t, got, fmt.Sprintf(`hotlane_ioctl_errors_total{command=%q,device="socket"}`, siocg), 1)
	want(t, got, `hotlane_probe_info{hook="fentry",probe="ioctl"}`, 1)
	want(t, got, `hotlane_probe_lost_total{probe="ioctl",reason="slow-call ring buffer full"}`, 3)
	want(t, got, `hotlane_probe_lost_total{probe="ioctl",reason="call table full"}`, 0)
}

// The DMA collector exports calls, failed calls and bytes per device and
// kind, and map latency where it was measured.
func TestDMACollector(t *testing.T) {
	c := NewDMACollector()
	var nvme, virtio dma.Device
	nvme.Name, nvme.Maps, nvme.BytesMapped, nvme.MapErrors, nvme.Frees = "0000:01:00.0", 5, 20480, 1, 2
	nvme.MapLatencyHist = hist(300, 400, 500)
	virtio.Name, virtio.Allocs, virtio.BytesAllocated = "virtio0", 1, 4096
	c.Final(&dma.Result{Header: report.Header{Losses: report.Losses{{What: "device table full"}}}, Family: "tp_btf", Devices: []dma.Device{nvme, virtio}})
	got := gather(t, c)
	want(t, got, `hotlane_dma_calls_total{call="map",device="0000:01:00.0"}`, 5)
	want(t, got, `hotlane_dma_calls_total{call="free",device="0000:01:00.0"}`, 2)
	want(t, got, `hotlane_dma_failed_calls_total{call="map",device="0000:01:00.0"}`, 1)
	want(t, got, `hotlane_dma_bytes_total{call="map",device="0000:01:00.0"}`, 20480)
	want(t, got, `hotlane_dma_map_latency_seconds_count{device="0000:01:00.0"}`, 3)
	want(t, got, `hotlane_dma_bytes_total{call="alloc",device="virtio0"}`, 4096)
	want(t, got, `hotlane_probe_info{hook="tp_btf",probe="dma"}`, 1)
	want(t, got, `hotlane_probe_lost_total{probe="dma",reason="device table full"}`, 0)
	if _, ok := got[`hotlane_dma_map_latency_seconds_count{device="virtio0"}`]; ok {
		t.Error("a device without measured map latency has a latency histogram")
	}
}

// The XDP collector exports every class and malformed reason of the
// report, labelled with the interface, and the attach mode as the hook.
func TestXDPCollector(t *testing.T) {
	c := NewXDPCollector()
	r := &xdp.Report{
		Header: report.Header{Losses: report.Losses{{What: "EtherType table full", Count: 1}}}, Interface: "eth0", Mode: xdp.ModeGeneric,
		Classes:   []xdp.ClassRow{{Class: xdp.IPv4UDP, Count: xdp.Count{Packets: 10, Bytes: 1000, Dropped: 4}}, {Class: xdp.NonIP}},
		Malformed: []xdp.ReasonRow{{Reason: xdp.EthTruncated, Frames: 2}},
	}
	c.Final(r)
	got := gather(t, c)
	want(t, got, `hotlane_xdp_packets_total{class="ipv4/udp",interface="eth0"}`, 10)
	want(t, got, `hotlane_xdp_bytes_total{class="ipv4/udp",interface="eth0"}`, 1000)
	want(t, got, `hotlane_xdp_dropped_total{class="ipv4/udp",interface="eth0"}`, 4)
	want(t, got, `hotlane_xdp_packets_total{class="non-ip",interface="eth0"}`, 0)
	want(t, got, fmt.Sprintf(`hotlane_xdp_malformed_total{interface="eth0",reason=%q}`, xdp.EthTruncated.String()), 2)
	want(t, got, fmt.Sprintf(`hotlane_probe_info{hook=%q,probe="xdp"}`, xdp.ModeGeneric.String()), 1)
	want(t, got, `hotlane_probe_lost_total{probe="xdp",reason="EtherType table full"}`, 1)
}

// While live, each scrape reads afresh; a failed read still exports the
// last figures (and fails the scrape's other part); once stopped, the
// reader is never called again and the last figures stay.
func TestLiveStopsReading(t *testing.T) {
	c := NewXDPCollector()
	reads, fail := 0, false
	stop := c.Live(func() (*xdp.Report, error) {
		reads++
		if fail {
			return nil, errors.New("map gone")
		}
		return &xdp.Report{Interface: "lo", Classes: []xdp.ClassRow{{Class: xdp.IPv4TCP, Count: xdp.Count{Packets: uint64(reads)}}}}, nil
	})
	want(t, gather(t, c), `hotlane_xdp_packets_total{class="ipv4/tcp",interface="lo"}`, 1)
	want(t, gather(t, c), `hotlane_xdp_packets_total{class="ipv4/tcp",interface="lo"}`, 2)
	fail = true
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "map gone") {
		t.Errorf("a failed read: gather error %v, want it to say why", err)
	}
	stop()
	stop()
	before := reads
	want(t, gather(t, c), `hotlane_xdp_packets_total{class="ipv4/tcp",interface="lo"}`, 2)
	if reads != before {
		t.Errorf("the reader was called %d times after stop", reads-before)
	}
}
