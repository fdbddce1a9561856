package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// The histogram is log-linear: each power of two is split into 2^SubBucketBits
// equal sub-buckets, so a bucket is never wider than 1/32 (3.125 %) of its
// lower edge and a percentile read from it is good to a few percent, where a
// plain log2 histogram (bcc's runqlat) can be off by a factor of two. Values
// below 2^SubBucketBits, where that split would give buckets narrower than
// 1 ns, get one bucket each.
//
// For v >= 2^K (K = SubBucketBits) with e = floor(log2 v) the bucket is
//
//	(e-K+1)*2^K + (v>>(e-K)) - 2^K
//
// and for v < 2^K it is v. bpf/include/hist.bpf.h computes the same index
// inside the kernel; a test runs it through BPF_PROG_RUN to keep the two
// in step.
const (
	// SubBucketBits is K, the log2 of the sub-buckets per power of two.
	SubBucketBits = 5

	// NumBuckets covers all of uint64: 2^K exact buckets for [0, 2^K), then
	// 2^K for each power of two from 2^K to 2^63. It equals HL_HIST_BUCKETS
	// in bpf/include/hist.bpf.h, the length of the BPF counter arrays.
	NumBuckets = (64 - SubBucketBits + 1) << SubBucketBits // 1920

	subBuckets = 1 << SubBucketBits
)

// BucketIndex returns the bucket that holds v, in [0, NumBuckets).
//
// With sh = floor(log2(v | 2^K)) - K, the index is (sh << K) + (v >> sh):
// for v < 2^(K+1) that is v itself, above it v >> sh keeps the K+1 leading
// bits of v, whose top bit adds the 2^K offset of the power of two.
func BucketIndex(v uint64) int {
	sh := bits.Len64((v|subBuckets)>>SubBucketBits) - 1
	return sh<<SubBucketBits + int(v>>sh)
}

// BucketBounds returns the values bucket i holds: lo <= v < hi.
//
// The exception is the last bucket, whose upper edge 2^64 does not fit in a
// uint64: it returns hi = math.MaxUint64, and that bucket also holds
// math.MaxUint64 itself (2^63 ns is 292 years, so no latency gets there).
// BucketBounds panics if i is not in [0, NumBuckets), like an index out of
// range.
func BucketBounds(i int) (lo, hi uint64) {
	if i < 0 || i >= NumBuckets {
		panic(fmt.Sprintf("histogram bucket %d out of range [0, %d)", i, NumBuckets))
	}
	sh := max(i>>SubBucketBits-1, 0)
	lo = uint64(i-sh<<SubBucketBits) << sh
	hi = lo + 1<<sh
	if hi < lo {
		hi = math.MaxUint64
	}
	return lo, hi
}

// maxInBucket is the largest value bucket i holds.
func maxInBucket(i int) uint64 {
	_, hi := BucketBounds(i)
	if i == NumBuckets-1 {
		return hi
	}
	return hi - 1
}

// Histogram counts values (nanoseconds, by convention) in log-linear buckets
// and keeps the exact count, sum, minimum and maximum alongside them.
//
// The zero value is an empty histogram ready to use. A Histogram is not safe
// for concurrent use. Its bucket storage grows only as far as the largest
// value recorded, so a histogram of microsecond latencies stays small.
type Histogram struct {
	counts []uint64 // by bucket index; trailing buckets never written are absent
	count  uint64
	sum    uint64 // saturates at math.MaxUint64
	min    uint64 // meaningful only when count > 0
	max    uint64
}

// Record adds one value.
func (h *Histogram) Record(v uint64) {
	h.RecordN(v, 1)
}

// RecordN adds the value v n times.
func (h *Histogram) RecordN(v, n uint64) {
	if n == 0 {
		return
	}
	h.add(BucketIndex(v), n)
	hi, lo := bits.Mul64(v, n)
	if hi != 0 {
		lo = math.MaxUint64
	}
	h.sum = satAdd(h.sum, lo)
	if h.count == n || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
}

// add counts n values into bucket i and nothing else.
func (h *Histogram) add(i int, n uint64) {
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i] += n
	h.count += n
}

// Merge adds every value of other to h, as if each had been recorded in h.
// A nil other is an empty histogram.
func (h *Histogram) Merge(other *Histogram) {
	if other == nil || other.count == 0 {
		return
	}
	if h.count == 0 || other.min < h.min {
		h.min = other.min
	}
	h.max = max(h.max, other.max)
	h.sum = satAdd(h.sum, other.sum)
	for i, n := range other.counts {
		if n != 0 {
			h.add(i, n)
		}
	}
}

// Since returns what h recorded after it was prev (an earlier copy of the
// same histogram): an interval's histogram from two cumulative snapshots.
// Its maximum is exact when the interval raised h's; otherwise it is the
// largest value of its highest bucket, capped at h's maximum, so it never
// understates. Its minimum is the lower edge of its lowest bucket.
func (h *Histogram) Since(prev *Histogram) *Histogram {
	d := &Histogram{}
	if h == nil {
		return d
	}
	if prev == nil {
		prev = &Histogram{}
	}
	for i, n := range h.counts {
		if i < len(prev.counts) {
			n -= min(n, prev.counts[i])
		}
		if n == 0 {
			continue
		}
		if d.count == 0 {
			d.min, _ = BucketBounds(i)
		}
		d.add(i, n)
		d.max = min(maxInBucket(i), h.max)
	}
	if d.count == 0 {
		return d
	}
	if h.max > prev.max {
		d.max = h.max
	}
	if h.sum >= prev.sum {
		d.sum = h.sum - prev.sum
	}
	return d
}

// FromBuckets builds a histogram from bucket counts indexed as BucketIndex
// numbers them (BPF programs count with hl_hist_bucket, usually per CPU;
// sum the CPUs first) and from the exact maximum the program tracked beside
// them.
//
// Counts and exactMax are read from the kernel while it keeps counting, so
// they may disagree. A maximum below the highest non-empty bucket is older
// than the counts and is raised to that bucket's largest value, so that Max
// and QuantileUpper never understate a latency that was counted. A maximum
// beyond it is newer than the counts and is kept: it was observed.
//
// The kernel side keeps no minimum: Min is the lower edge of the lowest
// non-empty bucket. Nor need it keep a sum: Sum is then estimated from each
// bucket's largest value (capped at the maximum), an overestimate by at most
// 1/32 that keeps a mean bound conservative. Call SetSum when the exact sum
// is known.
func FromBuckets(counts []uint64, exactMax uint64) (*Histogram, error) {
	if len(counts) > NumBuckets {
		return nil, fmt.Errorf("histogram with %d buckets: at most %d allowed", len(counts), NumBuckets)
	}
	h := new(Histogram)
	lowest, highest := -1, -1
	for i, n := range counts {
		if n == 0 {
			continue
		}
		h.add(i, n)
		if lowest < 0 {
			lowest = i
		}
		highest = i
	}
	if highest < 0 {
		return h, nil
	}
	h.min, _ = BucketBounds(lowest)
	h.max = exactMax
	if top, _ := BucketBounds(highest); exactMax < top {
		h.max = maxInBucket(highest)
	}
	for i, n := range h.Buckets() {
		hi, lo := bits.Mul64(min(maxInBucket(i), h.max), n)
		if hi != 0 {
			lo = math.MaxUint64
		}
		h.sum = satAdd(h.sum, lo)
	}
	return h, nil
}

// SetSum replaces the sum of the recorded values, for histograms built with
// FromBuckets when the exact sum was tracked separately.
func (h *Histogram) SetSum(sum uint64) {
	h.sum = sum
}

// Count returns the number of values recorded. Like every read-only
// method but Buckets, it reads a nil *Histogram as empty: a view a report
// from an older hotlane lacks.
func (h *Histogram) Count() uint64 {
	if h == nil {
		return 0
	}
	return h.count
}

// Sum returns the sum of the values recorded; it saturates at
// math.MaxUint64 rather than wrapping. See FromBuckets for when it is an
// estimate.
func (h *Histogram) Sum() uint64 {
	if h == nil {
		return 0
	}
	return h.sum
}

// Mean returns Sum/Count, or 0 for an empty histogram.
func (h *Histogram) Mean() float64 {
	if h.Count() == 0 {
		return 0
	}
	return float64(h.sum) / float64(h.count)
}

// Min returns the smallest value recorded, or 0 for an empty histogram. See
// FromBuckets for when it is only a lower bound.
func (h *Histogram) Min() uint64 {
	if h.Count() == 0 {
		return 0
	}
	return h.min
}

// Max returns the largest value recorded, exactly, or 0 for an empty
// histogram.
func (h *Histogram) Max() uint64 {
	if h == nil {
		return 0
	}
	return h.max
}

// Buckets yields the index and count of every non-empty bucket, in
// increasing order of value; BucketBounds gives each bucket's range.
func (h *Histogram) Buckets() iter.Seq2[int, uint64] {
	return func(yield func(int, uint64) bool) {
		for i, n := range h.counts {
			if n != 0 && !yield(i, n) {
				return
			}
		}
	}
}

// Quantile returns the bounds of the bucket that holds the q-quantile:
// lo <= x < hi (see BucketBounds for the last bucket), where x is the
// nearest-rank quantile of the recorded values, the smallest recorded value
// with at least ceil(q*Count) values at or below it. q is clamped to [0, 1],
// with 0 meaning the minimum; NaN counts as 1. An empty histogram returns
// 0, 0.
func (h *Histogram) Quantile(q float64) (lo, hi uint64) {
	i := h.quantileBucket(q)
	if i < 0 {
		return 0, 0
	}
	return BucketBounds(i)
}

// Percentile is Quantile(p/100): Percentile(99) is the p99 bucket.
func (h *Histogram) Percentile(p float64) (lo, hi uint64) {
	return h.Quantile(p / 100)
}

// QuantileUpper returns the largest value the q-quantile can have: the
// largest value of its bucket, but no more than Max, which the true quantile
// cannot exceed. Checking QuantileUpper against a bound never passes a
// histogram whose real quantile is over it. An empty histogram returns 0.
func (h *Histogram) QuantileUpper(q float64) uint64 {
	i := h.quantileBucket(q)
	if i < 0 {
		return 0
	}
	return min(maxInBucket(i), h.max)
}

// quantileBucket returns the bucket holding the q-quantile, or -1 if the
// histogram is empty.
func (h *Histogram) quantileBucket(q float64) int {
	if h.Count() == 0 {
		return -1
	}
	want := rank(q, h.count)
	var seen uint64
	for i, n := range h.counts {
		seen += n
		if seen >= want {
			return i
		}
	}
	// Unreachable while count is the sum of counts.
	return len(h.counts) - 1
}

// rank returns ceil(q*n) clamped to [1, n], the nearest rank of the
// q-quantile among n values.
//
// q usually comes from a decimal such as 0.07 that float64 cannot hold
// exactly, so q*n can land a hair above the integer it stands for
// (0.07*100 = 7.000000000000001) and a plain Ceil would move the quantile up
// by one value. A product within a relative 1e-14 above an integer (far more
// than float64 rounding, far less than any real fraction of a rank for the
// sample counts we see) is taken to be that integer.
func rank(q float64, n uint64) uint64 {
	switch {
	case q != q || q >= 1:
		return n
	case q <= 0:
		return 1
	}
	x := q * float64(n)
	r := math.Ceil(x)
	if f := math.Floor(x); x-f <= x*1e-14 {
		r = f
	}
	return uint64(min(max(r, 1), float64(n)))
}

func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

// histogramJSON is the wire form: only non-empty buckets, each as its lower
// edge and its count, so the file reads without knowing the bucket layout.
type histogramJSON struct {
	SubBucketBits int         `json:"sub_bucket_bits"`
	Count         uint64      `json:"count"`
	Sum           uint64      `json:"sum"`
	Min           uint64      `json:"min"`
	Max           uint64      `json:"max"`
	Buckets       [][2]uint64 `json:"buckets"`
}

// MarshalJSON encodes the histogram sparsely:
//
//	{"sub_bucket_bits":5,"count":3,"sum":…,"min":…,"max":…,"buckets":[[lo,count],…]}
//
// where lo is a bucket's lower edge in the histogram's unit.
func (h Histogram) MarshalJSON() ([]byte, error) {
	out := histogramJSON{
		SubBucketBits: SubBucketBits,
		Count:         h.count,
		Sum:           h.sum,
		Min:           h.Min(),
		Max:           h.max,
		Buckets:       [][2]uint64{},
	}
	for i, n := range h.Buckets() {
		lo, _ := BucketBounds(i)
		out.Buckets = append(out.Buckets, [2]uint64{lo, n})
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes what MarshalJSON wrote, checking that the buckets
// are lower edges of this layout, in increasing order, and add up to count.
func (h *Histogram) UnmarshalJSON(data []byte) error {
	var in histogramJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("histogram: %w", err)
	}
	if in.SubBucketBits != SubBucketBits {
		return fmt.Errorf("histogram has %d sub-bucket bits, this build reads %d", in.SubBucketBits, SubBucketBits)
	}
	var dec Histogram
	last := -1
	for _, b := range in.Buckets {
		lo, n := b[0], b[1]
		i := BucketIndex(lo)
		if edge, _ := BucketBounds(i); edge != lo {
			return fmt.Errorf("histogram bucket %d is not a bucket's lower edge (the bucket holding it starts at %d)", lo, edge)
		}
		if i <= last {
			return fmt.Errorf("histogram bucket %d: buckets must be in increasing order, each once", lo)
		}
		last = i
		dec.add(i, n)
	}
	if dec.count != in.Count {
		return fmt.Errorf("histogram count is %d but its buckets hold %d", in.Count, dec.count)
	}
	dec.sum, dec.min, dec.max = in.Sum, in.Min, in.Max
	if dec.count == 0 {
		dec.min = 0
	} else {
		if top, _ := BucketBounds(last); dec.max < top {
			return fmt.Errorf("histogram max %d is below its highest bucket, which starts at %d", dec.max, top)
		}
		if dec.min > dec.max {
			return fmt.Errorf("histogram min %d is above its max %d", dec.min, dec.max)
		}
	}
	*h = dec
	return nil
}

// WriteText draws the histogram for people, like bcc's runqlat but with
// log-linear rows and human units (width 20):
//
//	  range           count  distribution
//	  992ns - 1.008µs    10 |********************|
//	1.008µs - 1.024µs     1 |**                  |
//	1.024µs - 1.056µs     0 |                    |
//	1.056µs - 1.088µs     0 |                    |
//	1.088µs - 1.12µs      1 |**                  |
//	count 12  min 1µs  mean 1.009µs  p50 ≤1.007µs  p99 ≤1.1µs  max 1.1µs
//
// Each row is lo <= v < hi. Rows merge sub-buckets as little as possible
// while keeping the table to about 32 rows between the lowest and highest
// non-empty bucket: a narrow distribution is drawn at the full 3 %
// resolution, a wide one at one row per power of two. width is the length
// of the longest bar; 0 means 40. The summary line's percentiles are
// QuantileUpper values, hence "≤".
func (h *Histogram) WriteText(w io.Writer, width int) error {
	if width <= 0 {
		width = 40
	}
	if h.count == 0 {
		_, err := io.WriteString(w, "(no samples)\n")
		return err
	}

	first, last := -1, -1
	var peak uint64
	for i := range h.Buckets() {
		if first < 0 {
			first = i
		}
		last = i
	}

	// Buckets per row: the fewest that keep the table short.
	const maxRows = 32
	perRow := subBuckets
	for per := 1; per <= subBuckets; per *= 2 {
		if last/per-first/per+1 <= maxRows {
			perRow = per
			break
		}
	}

	type row struct {
		lo, hi string
		n      uint64
	}
	var rows []row
	for r := first / perRow; r <= last/perRow; r++ {
		a, b := r*perRow, min((r+1)*perRow, NumBuckets)-1
		var n uint64
		for i := a; i <= b && i < len(h.counts); i++ {
			n += h.counts[i]
		}
		lo, _ := BucketBounds(a)
		_, hi := BucketBounds(b)
		rows = append(rows, row{formatNanos(lo), formatNanos(hi), n})
		peak = max(peak, n)
	}

	loW, hiW := len("range"), 0
	for _, r := range rows {
		loW = max(loW, len([]rune(r.lo)))
		hiW = max(hiW, len([]rune(r.hi)))
	}
	countW := max(len("count"), len(strconv.FormatUint(peak, 10)))

	var b strings.Builder
	fmt.Fprintf(&b, "%*s   %-*s %*s  distribution\n", loW, "range", hiW, "", countW, "count")
	for _, r := range rows {
		stars := int(float64(r.n) / float64(peak) * float64(width))
		if r.n > 0 && stars == 0 {
			stars = 1 // a non-empty row is never drawn empty
		}
		fmt.Fprintf(&b, "%s - %s %*d |%s%s|\n",
			padLeft(r.lo, loW), padRight(r.hi, hiW), countW, r.n,
			strings.Repeat("*", stars), strings.Repeat(" ", width-stars))
	}
	fmt.Fprintf(&b, "count %d  min %s  mean %s  p50 ≤%s  p99 ≤%s  max %s\n",
		h.count, formatNanos(h.Min()), formatNanos(uint64(math.Round(h.Mean()))),
		formatNanos(h.QuantileUpper(0.5)), formatNanos(h.QuantileUpper(0.99)),
		formatNanos(h.max))
	_, err := io.WriteString(w, b.String())
	return err
}

// formatNanos renders nanoseconds with a unit chosen so that the number is
// below 1000, to about four significant digits: 950ns, 1.024µs, 196.6µs, 5ms.
func formatNanos(ns uint64) string {
	if ns < 1000 {
		return strconv.FormatUint(ns, 10) + "ns"
	}
	units := []struct {
		scale float64
		name  string
	}{{1e3, "µs"}, {1e6, "ms"}, {1e9, "s"}}
	u := 0
	for u+1 < len(units) && float64(ns) >= units[u+1].scale {
		u++
	}
	for {
		v := float64(ns) / units[u].scale
		decimals := 1
		switch {
		case v < 10:
			decimals = 3
		case v < 100:
			decimals = 2
		}
		s := strconv.FormatFloat(v, 'f', decimals, 64)
		// 999.96µs rounds to "1000.0": say 1ms instead.
		if r, _ := strconv.ParseFloat(s, 64); r >= 1000 && u+1 < len(units) {
			u++
			continue
		}
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		return s + units[u].name
	}
}

func padLeft(s string, w int) string {
	return strings.Repeat(" ", max(w-len([]rune(s)), 0)) + s
}

func padRight(s string, w int) string {
	return s + strings.Repeat(" ", max(w-len([]rune(s)), 0))
}
