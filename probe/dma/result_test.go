package dma

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

func zeroLosses() report.Losses {
	var l report.Losses
	for _, what := range lossNames() {
		l = append(l, report.Loss{What: what})
	}
	return append(l, report.Loss{What: lossMisses})
}

// An empty run renders zeros, not blanks or NaN, and says nothing was seen.
func TestEmptyResultText(t *testing.T) {
	r := &Result{Header: report.Header{Kernel: "6.18.44", Elapsed: 3 * time.Second, Losses: zeroLosses()},
		Family: HooksTpBTF, Hooks: []string{"tp_btf/dma_map_phys", "tp_btf/dma_unmap_phys"}, LatencyHooks: []string{}}
	r.finish()
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"hooks: tp_btf on dma_map_phys, dma_unmap_phys",
		"map latency: not measured",
		"no DMA-API activity seen",
		"lost events: none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	var total string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "total") {
			total = l
		}
	}
	if got := strings.Fields(total); !cmp.Equal(got, []string{"total", "0", "0", "0", "0", "0", "0B", "0.00"}) {
		t.Errorf("total row %q", total)
	}
	if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
		t.Error("report has NaN/Inf")
	}

	// Zero duration (a snapshot right after Start) must not divide by 0.
	r.Elapsed = 0
	r.finish()
	if r.Total.MappedBytesPerSec != 0 {
		t.Errorf("rate over 0s = %v", r.Total.MappedBytesPerSec)
	}
	if line := ProgressLine(nil, r); !strings.Contains(line, "0 maps (0/s)") || !strings.Contains(line, "0 lost") {
		t.Errorf("progress line %q", line)
	}
}

func devVal(op int, n, bytes uint64) bpf.DmaDevVal {
	var v bpf.DmaDevVal
	v.Count[op] = n
	v.Bytes[op] = bytes
	return v
}

func TestResultTotalsAndJSON(t *testing.T) {
	var nvme, nic, nicFrom Counts
	nvme.add(devVal(opMap, 2048, 8<<20))
	nvme.add(devVal(opUnmap, 256, 1<<20))
	nvme.add(devVal(opAlloc, 2, 8192))
	nic.add(devVal(opMapSG, 10, 15000))
	nic.add(devVal(opMapErr, 1, 0))
	nicFrom.add(devVal(opMap, 5, 7500))

	var h verify.Histogram
	for i := range 100 {
		h.Record(uint64(800 + i))
	}
	r := &Result{Header: report.Header{Kernel: "7.3.4", Elapsed: 2 * time.Second, Losses: zeroLosses()},
		Family: HooksFentry, Hooks: []string{"fexit/dma_map_phys"},
		LatencyHooks: []string{"fentry+fexit/dma_map_phys"}, LatencyMeasured: true,
		Devices: []Device{
			{Name: "eth0", Counts: func() Counts { c := nic; c.merge(nicFrom); return c }(),
				Directions: []Direction{{Dir: "FROM_DEVICE", Counts: nicFrom}, {Dir: "TO_DEVICE", Counts: nic}}},
			{Name: "0000:00:04.0", Counts: nvme, Directions: []Direction{{Dir: "TO_DEVICE", Counts: nvme}}, MapLatencyHist: &h},
		}}
	r.Losses[lossSGLong].Count = 3
	r.finish()

	if r.Devices[0].Name != "0000:00:04.0" {
		t.Errorf("devices not sorted by bytes mapped: %s first", r.Devices[0].Name)
	}
	tot := r.Total
	if tot.Maps != 2048+10+5 || tot.SGMaps != 10 || tot.Unmaps != 256 || tot.Allocs != 2 || tot.MapErrors != 1 ||
		tot.BytesMapped != 8<<20+15000+7500 || tot.BytesAllocated != 8192 {
		t.Errorf("total %+v", tot.Counts)
	}
	if got, want := tot.MappedBytesPerSec, float64(8<<20+22500)/2; got != want {
		t.Errorf("total rate %v, want %v", got, want)
	}
	if to := tot.Direction("TO_DEVICE"); to.Maps != 2048+10 {
		t.Errorf("total TO_DEVICE %+v", to)
	}
	if r.Devices[0].MapLatency.Samples != 100 || tot.MapLatency.Samples != 100 || r.Devices[1].MapLatency.Samples != 0 {
		t.Errorf("latency samples: nvme %d, nic %d, total %d", r.Devices[0].MapLatency.Samples, r.Devices[1].MapLatency.Samples, tot.MapLatency.Samples)
	}

	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{"lat p99", "0000:00:04.0", "8.0MiB", "4.19", "FROM_DEVICE", "3 EVENTS LOST", "hooks: fexit on dma_map_phys"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}

	b.Reset()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if diff := cmp.Diff(r, &back, cmpopts.IgnoreUnexported(verify.Histogram{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	if back.Devices[0].MapLatencyHist.Count() != 100 {
		t.Errorf("histogram lost in JSON")
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.0KiB", 8 << 20: "8.0MiB", 150 << 30: "150GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
