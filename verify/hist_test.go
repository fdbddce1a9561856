package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"
	"github.com/google/go-cmp/cmp"

	"github.com/hotlane/hotlane/bpf"
)

// refIndex is the bucket formula exactly as DESIGN states it, with floor(log2)
// found by a loop, as an independent reference for BucketIndex.
func refIndex(v uint64) int {
	const k = SubBucketBits
	if v < 1<<k {
		return int(v)
	}
	e := 0
	for v>>(e+1) != 0 {
		e++
	}
	return (e-k+1)<<k + int(v>>(e-k)) - 1<<k
}

// seamValues returns 0, 1, max uint64 and 2^e-1, 2^e, 2^e+1 for every e.
func seamValues() []uint64 {
	vals := []uint64{0, 1, math.MaxUint64}
	for e := range 64 {
		p := uint64(1) << e
		vals = append(vals, p-1, p, p+1)
	}
	return vals
}

// edgeValues returns, for every bucket, its first and last value and the
// first value past it.
func edgeValues() []uint64 {
	var vals []uint64
	for i := range NumBuckets {
		lo, hi := BucketBounds(i)
		vals = append(vals, lo, maxInBucket(i), hi)
	}
	return vals
}

// logUniform returns a value whose log2 is uniform in [0, 64): every bucket
// group gets the same share.
func logUniform(rng *rand.Rand) uint64 {
	e := rng.IntN(64)
	return 1<<e | rng.Uint64()&(1<<e-1)
}

func newRand(t testing.TB) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

func TestNumBuckets(t *testing.T) {
	if NumBuckets != 1920 {
		t.Errorf("NumBuckets = %d, want 1920", NumBuckets)
	}
	if got := BucketIndex(math.MaxUint64); got != NumBuckets-1 {
		t.Errorf("BucketIndex(MaxUint64) = %d, want the last bucket %d", got, NumBuckets-1)
	}
}

// TestBucketLayout walks every bucket: contiguous, non-empty, each edge maps
// back to it, and no bucket is wider than 1/32 of its lower edge.
func TestBucketLayout(t *testing.T) {
	var next uint64
	for i := range NumBuckets {
		lo, hi := BucketBounds(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d (right after bucket %d)", i, lo, next, i-1)
		}
		if hi <= lo {
			t.Fatalf("bucket %d is [%d, %d): empty", i, lo, hi)
		}
		if got := BucketIndex(lo); got != i {
			t.Errorf("BucketIndex(%d) = %d, want %d (lower edge)", lo, got, i)
		}
		if top := maxInBucket(i); BucketIndex(top) != i {
			t.Errorf("BucketIndex(%d) = %d, want %d (largest value)", top, BucketIndex(top), i)
		}
		width := hi - lo
		if i == NumBuckets-1 {
			width++ // [lo, MaxUint64] inclusive
		}
		if lo < subBuckets && width != 1 {
			t.Errorf("bucket %d [%d, %d): values below %d must have exact buckets", i, lo, hi, subBuckets)
		}
		if lo >= subBuckets && width*subBuckets > lo {
			t.Errorf("bucket %d [%d, %d): width %d is over 1/32 of %d", i, lo, hi, width, lo)
		}
		next = hi
	}
	if next != math.MaxUint64 {
		t.Errorf("last bucket ends at %d, want MaxUint64", next)
	}
}

func TestBucketBoundsPanics(t *testing.T) {
	for _, i := range []int{-1, NumBuckets} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("BucketBounds(%d) did not panic", i)
				}
			}()
			BucketBounds(i)
		}()
	}
}

// TestBucketSeams checks values around every power of two and every bucket
// edge against the DESIGN formula, and that each lies in its bucket.
func TestBucketSeams(t *testing.T) {
	rng := newRand(t)
	vals := append(seamValues(), edgeValues()...)
	for range 100000 {
		vals = append(vals, logUniform(rng))
	}
	for _, v := range vals {
		i := BucketIndex(v)
		if want := refIndex(v); i != want {
			t.Fatalf("BucketIndex(%d) = %d, want %d", v, i, want)
		}
		lo, hi := BucketBounds(i)
		if v < lo || (v >= hi && i != NumBuckets-1) {
			t.Fatalf("%d is outside its bucket %d [%d, %d)", v, i, lo, hi)
		}
		if v >= 64 && float64(hi-lo)/float64(lo) > 0.032 {
			t.Fatalf("bucket of %d [%d, %d) is %.2f%% wide", v, lo, hi, 100*float64(hi-lo)/float64(lo))
		}
	}
}

func TestBucketIndexMonotonic(t *testing.T) {
	rng := newRand(t)
	vals := append(seamValues(), edgeValues()...)
	for range 100000 {
		vals = append(vals, logUniform(rng), rng.Uint64N(1<<20))
	}
	slices.Sort(vals)
	for j := 1; j < len(vals); j++ {
		if a, b := BucketIndex(vals[j-1]), BucketIndex(vals[j]); a > b {
			t.Fatalf("BucketIndex(%d) = %d > BucketIndex(%d) = %d", vals[j-1], a, vals[j], b)
		}
	}
}

// nearestRank is the reference quantile: with q = num/den, the value of rank
// ceil(num*n/den) (at least 1) in the sorted samples, in integer arithmetic.
func nearestRank(sorted []uint64, num, den int) uint64 {
	n := len(sorted)
	r := max((num*n+den-1)/den, 1)
	return sorted[r-1]
}

// sampleSets returns random sample sets of several shapes.
func sampleSets(rng *rand.Rand) map[string][]uint64 {
	gen := map[string]func() uint64{
		"uniform-1ms":  func() uint64 { return rng.Uint64N(1e6) },
		"log-uniform":  func() uint64 { return logUniform(rng) },
		"exponential":  func() uint64 { return uint64(rng.ExpFloat64() * 50e3) },
		"tiny":         func() uint64 { return rng.Uint64N(100) },
		"few-distinct": func() uint64 { return []uint64{1000, 200000, 200001, 5e6}[rng.IntN(4)] },
		"tail": func() uint64 {
			if rng.IntN(100) == 0 {
				return 1e6 + rng.Uint64N(1e7)
			}
			return 10e3 + rng.Uint64N(100e3)
		},
	}
	sets := make(map[string][]uint64)
	for name, g := range gen {
		for _, n := range []int{1, 2, 3, 99, 100, 101, 1000, 1 + rng.IntN(20000)} {
			s := make([]uint64, n)
			for j := range s {
				s[j] = g()
			}
			sets[name+"/"+strconv.Itoa(n)] = s
		}
	}
	return sets
}

// TestQuantileBruteForce compares Quantile with the nearest-rank quantile of
// the raw samples: the true value must lie in the returned bucket, and
// QuantileUpper must be at or above it but not above the maximum.
func TestQuantileBruteForce(t *testing.T) {
	rng := newRand(t)
	const den = 100000
	nums := []int{0, 1, 50000, 90000, 99000, 99900, 99990, 100000, 7000, 33333}
	for name, samples := range sampleSets(rng) {
		var h Histogram
		var sum uint64
		for _, v := range samples {
			h.Record(v)
			sum = satAdd(sum, v)
		}
		sorted := slices.Sorted(slices.Values(samples))
		if h.Count() != uint64(len(samples)) || h.Min() != sorted[0] || h.Max() != sorted[len(sorted)-1] || h.Sum() != sum {
			t.Errorf("%s: count %d min %d max %d sum %d, want %d %d %d %d", name,
				h.Count(), h.Min(), h.Max(), h.Sum(), len(samples), sorted[0], sorted[len(sorted)-1], sum)
		}
		qs := append(slices.Clone(nums), rng.IntN(den+1), rng.IntN(den+1))
		for _, num := range qs {
			q := float64(num) / den
			want := nearestRank(sorted, num, den)
			lo, hi := h.Quantile(q)
			if want < lo || (want >= hi && BucketIndex(want) != NumBuckets-1) {
				t.Errorf("%s: q=%v: true quantile %d outside [%d, %d)", name, q, want, lo, hi)
			}
			up := h.QuantileUpper(q)
			if up < want || up > h.Max() || up >= hi && BucketIndex(up) != NumBuckets-1 {
				t.Errorf("%s: q=%v: QuantileUpper %d, want in [%d, min(%d, max %d)]", name, q, up, want, hi-1, h.Max())
			}
			// The same through Percentile, with p = num/1000 percent.
			if plo, _ := h.Percentile(float64(num) / 1000); want < plo || BucketIndex(want) != BucketIndex(plo) {
				t.Errorf("%s: Percentile(%v) starts at %d, true quantile %d", name, float64(num)/1000, plo, want)
			}
		}
	}
}

func TestQuantileEnds(t *testing.T) {
	var h Histogram
	for _, v := range []uint64{5, 1000, 7, 123456789} {
		h.Record(v)
	}
	if lo, hi := h.Quantile(0); lo != 5 || hi != 6 {
		t.Errorf("Quantile(0) = [%d, %d), want the minimum's bucket [5, 6)", lo, hi)
	}
	if got := h.QuantileUpper(1); got != 123456789 {
		t.Errorf("QuantileUpper(1) = %d, want the exact max", got)
	}
	for _, q := range []float64{-1, math.Inf(-1)} {
		if lo, _ := h.Quantile(q); lo != 5 {
			t.Errorf("Quantile(%v) starts at %d, want q clamped to 0", q, lo)
		}
	}
	for _, q := range []float64{2, math.Inf(1), math.NaN()} {
		if got := h.QuantileUpper(q); got != 123456789 {
			t.Errorf("QuantileUpper(%v) = %d, want q clamped to 1", q, got)
		}
	}
}

func TestRank(t *testing.T) {
	tests := []struct {
		q    float64
		n    uint64
		want uint64
	}{
		{0.07, 100, 7}, // 0.07*100 is 7.000000000000001 in float64
		{0.99, 100, 99},
		{0.999, 1000, 999},
		{0.999, 1001, 1000},
		{0.9999, 10000, 9999},
		{0.5, 1, 1},
		{0.5, 3, 2},
		{0, 10, 1},
		{1e-9, 10, 1},
		{1, 10, 10},
		{0.29, 100, 29},
		{0.57, 100, 57},
		{0.58, 100, 58},
		{0.14, 100, 14},
		{0.9, 10, 9},
		{0.1, 10, 1},
		{0.3, 10, 3},
	}
	for _, tt := range tests {
		if got := rank(tt.q, tt.n); got != tt.want {
			t.Errorf("rank(%v, %d) = %d, want %d", tt.q, tt.n, got, tt.want)
		}
	}
	// Every p/100 and p/1000 percentile over counts that make it an integer.
	for _, den := range []uint64{100, 1000, 10000} {
		for p := uint64(1); p <= den; p++ {
			for _, n := range []uint64{den, 2 * den, 7 * den} {
				if got, want := rank(float64(p)/float64(den), n), p*n/den; got != want {
					t.Fatalf("rank(%d/%d, %d) = %d, want %d", p, den, n, got, want)
				}
			}
		}
	}
}

func TestEmptyHistogram(t *testing.T) {
	var h Histogram
	if h.Count() != 0 || h.Sum() != 0 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Errorf("empty: count %d sum %d min %d max %d mean %v, want zeros", h.Count(), h.Sum(), h.Min(), h.Max(), h.Mean())
	}
	for _, q := range []float64{0, 0.5, 0.99, 1, math.NaN()} {
		if lo, hi := h.Quantile(q); lo != 0 || hi != 0 {
			t.Errorf("empty: Quantile(%v) = %d, %d, want 0, 0", q, lo, hi)
		}
		if up := h.QuantileUpper(q); up != 0 {
			t.Errorf("empty: QuantileUpper(%v) = %d, want 0", q, up)
		}
	}
	if lo, hi := h.Percentile(99); lo != 0 || hi != 0 {
		t.Errorf("empty: Percentile(99) = %d, %d", lo, hi)
	}
	for range h.Buckets() {
		t.Error("empty histogram yields a bucket")
	}
	var buf bytes.Buffer
	if err := h.WriteText(&buf, 0); err != nil || buf.String() != "(no samples)\n" {
		t.Errorf("empty: WriteText = %q, %v", buf.String(), err)
	}
	h.Merge(nil)
	h.Merge(&Histogram{})
	h.RecordN(5, 0)
	if h.Count() != 0 || len(h.counts) != 0 {
		t.Errorf("merging nothing recorded something: count %d", h.Count())
	}
}

// state is everything observable about a histogram.
type state struct {
	Count, Sum, Min, Max uint64
	Buckets              map[int]uint64
}

func stateOf(h *Histogram) state {
	s := state{h.Count(), h.Sum(), h.Min(), h.Max(), map[int]uint64{}}
	for i, n := range h.Buckets() {
		s.Buckets[i] = n
	}
	return s
}

func TestMergeEqualsRecordingAll(t *testing.T) {
	rng := newRand(t)
	for name, samples := range sampleSets(rng) {
		var all Histogram
		parts := make([]Histogram, 1+rng.IntN(5))
		for _, v := range samples {
			if rng.IntN(4) == 0 {
				n := 1 + rng.Uint64N(3)
				all.RecordN(v, n)
				parts[rng.IntN(len(parts))].RecordN(v, n)
				continue
			}
			all.Record(v)
			parts[rng.IntN(len(parts))].Record(v)
		}
		var merged Histogram
		for i := range parts {
			merged.Merge(&parts[i])
		}
		if diff := cmp.Diff(stateOf(&all), stateOf(&merged)); diff != "" {
			t.Errorf("%s: merged differs from recording all (-all +merged):\n%s", name, diff)
		}
	}
}

func TestSumSaturates(t *testing.T) {
	var h Histogram
	h.RecordN(math.MaxUint64, 2)
	h.Record(1)
	if h.Sum() != math.MaxUint64 {
		t.Errorf("Sum = %d, want saturated MaxUint64", h.Sum())
	}
	if h.Count() != 3 || h.Min() != 1 || h.Max() != math.MaxUint64 {
		t.Errorf("count %d min %d max %d", h.Count(), h.Min(), h.Max())
	}
	if got := h.QuantileUpper(1); got != math.MaxUint64 {
		t.Errorf("QuantileUpper(1) = %d, want MaxUint64", got)
	}
}

func TestFromBuckets(t *testing.T) {
	var rec Histogram
	for _, v := range []uint64{3, 40, 1000, 1001, 250000} {
		rec.Record(v)
	}
	counts := make([]uint64, NumBuckets)
	for i, n := range rec.Buckets() {
		counts[i] = n
	}

	h, err := FromBuckets(counts, 250000)
	if err != nil {
		t.Fatal(err)
	}
	if h.Count() != 5 || h.Max() != 250000 || h.Min() != 3 {
		t.Errorf("count %d max %d min %d, want 5, 250000, 3", h.Count(), h.Max(), h.Min())
	}
	if h.Sum() < rec.Sum() || float64(h.Sum()) > float64(rec.Sum())*(1+1.0/32) {
		t.Errorf("estimated sum %d, want in [%d, +1/32]", h.Sum(), rec.Sum())
	}
	h.SetSum(rec.Sum())
	if diff := cmp.Diff(stateOf(&rec), stateOf(h)); diff != "" {
		t.Errorf("FromBuckets differs from recording (-rec +from):\n%s", diff)
	}

	// A maximum older than the counts is raised to the top bucket's last value.
	lo250k, _ := BucketBounds(BucketIndex(250000))
	h, _ = FromBuckets(counts, 1001)
	if want := maxInBucket(BucketIndex(250000)); h.Max() != want || h.QuantileUpper(1) != want {
		t.Errorf("stale max: Max %d, QuantileUpper(1) %d, want %d (top bucket starts at %d)", h.Max(), h.QuantileUpper(1), want, lo250k)
	}
	// A newer one is kept.
	h, _ = FromBuckets(counts, 9e6)
	if h.Max() != 9e6 {
		t.Errorf("newer max: Max %d, want 9000000", h.Max())
	}
	// Shorter slices are fine; longer ones are not.
	h, _ = FromBuckets([]uint64{0, 2}, 1)
	if h.Count() != 2 || h.Max() != 1 || h.Min() != 1 {
		t.Errorf("short: count %d max %d min %d", h.Count(), h.Max(), h.Min())
	}
	h, _ = FromBuckets(nil, 77)
	if h.Count() != 0 || h.Max() != 0 {
		t.Errorf("no counts: count %d max %d, want an empty histogram", h.Count(), h.Max())
	}
	if _, err := FromBuckets(make([]uint64, NumBuckets+1), 0); err == nil {
		t.Error("FromBuckets accepted too many buckets")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	rng := newRand(t)
	for name, samples := range sampleSets(rng) {
		var h Histogram
		for _, v := range samples {
			h.Record(v)
		}
		// By value inside a struct, the way a report embeds it.
		data, err := json.Marshal(struct{ H Histogram }{h})
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ H Histogram }
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, data)
		}
		if diff := cmp.Diff(stateOf(&h), stateOf(&back.H)); diff != "" {
			t.Errorf("%s: JSON round trip differs (-want +got):\n%s", name, diff)
		}
	}

	var empty Histogram
	data, err := json.Marshal(&empty)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"sub_bucket_bits":5,"count":0,"sum":0,"min":0,"max":0,"buckets":[]}`; string(data) != want {
		t.Errorf("empty JSON = %s, want %s", data, want)
	}
}

func TestJSONSparse(t *testing.T) {
	var h Histogram
	h.Record(7)
	h.RecordN(1000, 2)
	h.Record(1e9)
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	// 1000 is in [992, 1008); 1e9 in [989855744, 1006632960).
	want := `{"sub_bucket_bits":5,"count":4,"sum":1000002007,"min":7,"max":1000000000,"buckets":[[7,1],[992,2],[989855744,1]]}`
	if string(data) != want {
		t.Errorf("JSON = %s\nwant   %s", data, want)
	}
}

func TestJSONErrors(t *testing.T) {
	for _, in := range []string{
		`[]`,
		`{"sub_bucket_bits":4,"count":0,"buckets":[]}`,
		`{"sub_bucket_bits":5,"count":1,"max":1000,"buckets":[[1000,1]]}`,                // not an edge
		`{"sub_bucket_bits":5,"count":2,"max":7,"buckets":[[7,1],[6,1]]}`,                // order
		`{"sub_bucket_bits":5,"count":2,"max":7,"buckets":[[7,1],[7,1]]}`,                // twice
		`{"sub_bucket_bits":5,"count":3,"max":7,"buckets":[[7,1]]}`,                      // count
		`{"sub_bucket_bits":5,"count":1,"min":7,"max":3,"buckets":[[7,1]]}`,              // max below data
		`{"sub_bucket_bits":5,"count":1,"min":9,"max":8,"buckets":[[7,1]]}`,              // min above max
		`{"sub_bucket_bits":5,"count":1,"min":7,"max":7,"buckets":[[-7,1]]}`,             // negative
		`{"sub_bucket_bits":5,"count":1,"min":7,"max":7,"buckets":[[7,1]],"extra":true}`, // fine
	} {
		var h Histogram
		err := json.Unmarshal([]byte(in), &h)
		if strings.Contains(in, "extra") {
			if err != nil {
				t.Errorf("%s: %v", in, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", in)
		} else {
			t.Logf("%s: %v", in, err)
		}
	}
}

// FuzzHistogramJSON feeds arbitrary JSON to UnmarshalJSON: it must not
// panic, and whatever it accepts must survive a round trip and answer
// queries.
func FuzzHistogramJSON(f *testing.F) {
	f.Add(`{"sub_bucket_bits":5,"count":4,"sum":1000002007,"min":7,"max":1000000000,"buckets":[[7,1],[992,2],[989855744,1]]}`)
	f.Add(`{"sub_bucket_bits":5,"count":0,"sum":0,"min":0,"max":0,"buckets":[]}`)
	f.Add(`{"sub_bucket_bits":5,"count":1,"max":18446744073709551615,"buckets":[[18158513697557839872,1]]}`)
	f.Fuzz(func(t *testing.T, in string) {
		var h Histogram
		if err := json.Unmarshal([]byte(in), &h); err != nil {
			return
		}
		h.Quantile(0.99)
		h.QuantileUpper(0.5)
		h.WriteText(io.Discard, 10)
		data, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		var back Histogram
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("re-reading %s: %v", data, err)
		}
		if diff := cmp.Diff(stateOf(&h), stateOf(&back)); diff != "" {
			t.Fatalf("round trip differs:\n%s", diff)
		}
	})
}

func TestFormatNanos(t *testing.T) {
	for _, tt := range []struct {
		ns   uint64
		want string
	}{
		{0, "0ns"},
		{999, "999ns"},
		{1000, "1µs"},
		{1024, "1.024µs"},
		{196608, "196.6µs"},
		{999960, "1ms"},
		{5e6, "5ms"},
		{12345678, "12.35ms"},
		{1e9, "1s"},
		{math.MaxUint64, "18446744073.7s"},
	} {
		if got := formatNanos(tt.ns); got != tt.want {
			t.Errorf("formatNanos(%d) = %q, want %q", tt.ns, got, tt.want)
		}
	}
}

func TestWriteText(t *testing.T) {
	var h Histogram
	for range 10 {
		h.Record(1000)
	}
	h.Record(1010)
	h.Record(1100)
	var buf bytes.Buffer
	if err := h.WriteText(&buf, 20); err != nil {
		t.Fatal(err)
	}
	want := `  range           count  distribution
  992ns - 1.008µs    10 |********************|
1.008µs - 1.024µs     1 |**                  |
1.024µs - 1.056µs     0 |                    |
1.056µs - 1.088µs     0 |                    |
1.088µs - 1.12µs      1 |**                  |
count 12  min 1µs  mean 1.009µs  p50 ≤1.007µs  p99 ≤1.1µs  max 1.1µs
`
	if got := buf.String(); got != want {
		t.Errorf("WriteText:\n%s\nwant:\n%s", got, want)
	}

	// A wide distribution falls back to one row per power of two.
	var wide Histogram
	for e := range 40 {
		wide.Record(1 << e)
	}
	buf.Reset()
	if err := wide.WriteText(&buf, 0); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if n := len(lines) - 2; n > 40 {
		t.Errorf("wide histogram has %d rows:\n%s", n, buf.String())
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.Contains(l, "|") {
			t.Errorf("row without a bar: %q", l)
		}
	}
	t.Logf("\n%s", buf.String())
}

// TestBPFBucketSpec checks, without loading anything, that the BPF counter
// array is NumBuckets long (HL_HIST_BUCKETS == NumBuckets), and that
// hl_hist_bucket compiled to straight-line code: its only conditional jump
// is the final clamp. A compiler that turned the binary search back into
// branches would multiply the paths the verifier walks in every program
// that buckets a latency.
func TestBPFBucketSpec(t *testing.T) {
	spec, err := bpf.LoadHistcheck()
	if err != nil {
		t.Fatal(err)
	}
	counts := spec.Variables[bpf.HistcheckVarCounts]
	if counts == nil {
		t.Fatal("histcheck has no counts variable")
	}
	if got := counts.Size() / 8; got != NumBuckets {
		t.Errorf("HL_HIST_BUCKETS = %d, NumBuckets = %d", got, NumBuckets)
	}

	prog := spec.Programs[bpf.HistcheckProgBucketOne]
	if prog == nil {
		t.Fatal("histcheck has no bucket_one program")
	}
	var jumps int
	for _, ins := range prog.Instructions {
		switch op := ins.OpCode.JumpOp(); op {
		case asm.InvalidJumpOp, asm.Ja, asm.Call, asm.Exit:
		default:
			jumps++
		}
	}
	if jumps != 1 {
		t.Errorf("bucket_one has %d conditional jumps, want 1 (the clamp); hl_hist_bucket is no longer branchless:\n%v", jumps, prog.Instructions)
	}
}

// TestBPFBucketMatchesGo runs hl_hist_bucket (bpf/include/hist.bpf.h) in the
// kernel through BPF_PROG_RUN on every power-of-two seam, every bucket edge
// and random values, and compares each index with BucketIndex. It also reads
// back the kernel's per-bucket counts as a Histogram, the way the tracer
// does.
func TestBPFBucketMatchesGo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF programs and run them with BPF_PROG_RUN")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	var objs bpf.HistcheckObjects
	if err := bpf.LoadHistcheckObjects(&objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("verifier rejected histcheck: %+v", ve)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })

	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"bucket_one", objs.BucketOne}, {"bucket_batch", objs.BucketBatch}} {
		if info, err := p.prog.Info(); err == nil {
			if n, ok := info.VerifiedInstructions(); ok {
				t.Logf("%s: verifier processed %d instructions", p.name, n)
			}
		}
	}

	rng := newRand(t)
	vals := append(seamValues(), edgeValues()...)
	for range 20000 {
		vals = append(vals, logUniform(rng), rng.Uint64())
	}

	batch := int(objs.Inputs.Size() / 8)
	in := make([]uint64, batch)
	out := make([]uint32, batch)
	var want Histogram
	for start := 0; start < len(vals); start += batch {
		chunk := vals[start:min(start+batch, len(vals))]
		clear(in)
		copy(in, chunk)
		if err := objs.Inputs.Set(in); err != nil {
			t.Fatal(err)
		}
		if err := objs.NrInputs.Set(uint32(len(chunk))); err != nil {
			t.Fatal(err)
		}
		if _, err := objs.BucketBatch.Run(&ebpf.RunOptions{}); err != nil {
			t.Fatalf("BPF_PROG_RUN bucket_batch: %v", err)
		}
		if err := objs.Buckets.Get(out); err != nil {
			t.Fatal(err)
		}
		for j, v := range chunk {
			if got, want := int(out[j]), BucketIndex(v); got != want {
				t.Errorf("hl_hist_bucket(%d) = %d, BucketIndex = %d", v, got, want)
			}
			want.Record(v)
		}
	}

	// One value at a time through the single-shot program as well.
	for _, v := range []uint64{0, 31, 32, 63, 64, 199999, 200000, 1 << 40, math.MaxUint64} {
		if err := objs.Input.Set(v); err != nil {
			t.Fatal(err)
		}
		if _, err := objs.BucketOne.Run(&ebpf.RunOptions{}); err != nil {
			t.Fatalf("BPF_PROG_RUN bucket_one: %v", err)
		}
		var got uint32
		if err := objs.Bucket.Get(&got); err != nil {
			t.Fatal(err)
		}
		if int(got) != BucketIndex(v) {
			t.Errorf("bucket_one(%d) = %d, BucketIndex = %d", v, got, BucketIndex(v))
		}
		want.Record(v)
	}

	counts := make([]uint64, NumBuckets)
	if err := objs.Counts.Get(counts); err != nil {
		t.Fatal(err)
	}
	got, err := FromBuckets(counts, want.Max())
	if err != nil {
		t.Fatal(err)
	}
	got.SetSum(want.Sum())
	w := stateOf(&want)
	w.Min, _ = BucketBounds(BucketIndex(want.Min())) // the kernel keeps no minimum
	if diff := cmp.Diff(w, stateOf(got)); diff != "" {
		t.Errorf("kernel bucket counts differ from Go's (-go +kernel):\n%s", diff)
	}
}

// An interval's histogram is the later snapshot less the earlier: counts
// and sum exact, the maximum exact when the interval set it and otherwise
// its top bucket's largest value, never below what it holds.
func TestHistogramSince(t *testing.T) {
	var a Histogram
	for _, v := range []uint64{1000, 2000, 50000} {
		a.Record(v)
	}
	b := a
	b.counts = slices.Clone(a.counts)
	for _, v := range []uint64{3000, 3100} {
		b.Record(v)
	}
	d := b.Since(&a)
	if d.Count() != 2 || d.Sum() != 6100 {
		t.Errorf("count %d sum %d, want 2 and 6100", d.Count(), d.Sum())
	}
	if _, hi := BucketBounds(BucketIndex(3100)); d.Max() < 3100 || d.Max() >= hi {
		t.Errorf("max %d: want within 3100's bucket (the earlier 50us is not the interval's)", d.Max())
	}
	if lo, _ := BucketBounds(BucketIndex(3000)); d.Min() != lo {
		t.Errorf("min %d, want %d", d.Min(), lo)
	}
	c := b
	c.counts = slices.Clone(b.counts)
	c.Record(90000)
	if got := c.Since(&b).Max(); got != 90000 {
		t.Errorf("a new maximum is exact: got %d, want 90000", got)
	}
	if e := b.Since(&b); e.Count() != 0 || e.Max() != 0 {
		t.Errorf("nothing recorded: %+v", e)
	}
	if n := b.Since(nil); n.Count() != b.Count() || n.Max() != b.Max() {
		t.Errorf("since nothing: count %d max %d, want %d and %d", n.Count(), n.Max(), b.Count(), b.Max())
	}
}
