package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hotlane/hotlane/verify"
)

// The exported buckets are hotlane's: for each non-empty bucket its lower
// edge (the count below it) and its upper edge (the count through it), in
// seconds; count and sum carry over.
func TestHistogramKeepsHotlanesEdges(t *testing.T) {
	var h verify.Histogram
	for _, v := range []uint64{5, 5, 1000, 1001, 50000} {
		h.Record(v)
	}
	desc := prometheus.NewDesc("x_seconds", "x", []string{"class"}, nil)
	m, err := Histogram(desc, &h, "inference")
	if err != nil {
		t.Fatal(err)
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	got := map[float64]uint64{}
	for _, b := range out.GetHistogram().GetBucket() {
		got[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	want := map[float64]uint64{}
	var below uint64
	for i, n := range h.Buckets() {
		lo, hi := verify.BucketBounds(i)
		want[float64(lo)/1e9] = below
		below += n
		want[float64(hi)/1e9] = below
	}
	if len(got) != len(want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	for le, n := range want {
		if got[le] != n {
			t.Errorf("le=%g: %d, want %d", le, got[le], n)
		}
	}
	if out.GetHistogram().GetSampleCount() != 5 || out.GetHistogram().GetSampleSum() != float64(5+5+1000+1001+50000)/1e9 {
		t.Errorf("count %d sum %g", out.GetHistogram().GetSampleCount(), out.GetHistogram().GetSampleSum())
	}
}

// A collector with no tracer yet serves the build info and nothing else;
// a bad address fails at once.
func TestServe(t *testing.T) {
	if _, err := Serve("256.0.0.1:1", DefaultServerConfig()); err == nil {
		t.Fatal("Serve on a bad address succeeded")
	}
	s, err := Serve("127.0.0.1:0", DefaultServerConfig(), NewTracerCollector())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "hotlane_build_info{") || strings.Contains(string(body), "hotlane_runqueue_latency_seconds") {
		t.Errorf("/metrics before a tracer:\n%s", body)
	}
}
