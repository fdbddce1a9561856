/*
 * hist.bpf.h - the bucket function of hotlane's log-linear latency histogram.
 *
 * The histogram itself lives in Go (verify.Histogram); BPF programs only turn
 * a value in nanoseconds into a bucket index and count it, e.g. in a per-CPU
 * array of HL_HIST_BUCKETS u64 counters. This file and verify/hist.go must
 * compute the same index: verify/hist_test.go runs this code through
 * BPF_PROG_RUN (bpf/histcheck.bpf.c) and compares it value by value.
 *
 * Layout: 2^HL_HIST_K sub-buckets per power of two. Values below 2^K get one
 * bucket each; for v >= 2^K with e = floor(log2 v) the bucket is
 *
 *   (e - K + 1) * 2^K + ((v >> (e - K)) - 2^K)
 *
 * so a bucket is never wider than 1/2^K (3.125 %) of its lower edge, which is
 * what makes a p99 read from the histogram good to a few percent.
 *
 * Both cases collapse into one formula: let sh = floor(log2(v | 2^K)) - K
 * (0 for every v < 2^(K+1)); then the index is (sh << K) + (v >> sh). For
 * v < 2^K that is v itself, and for v >= 2^K, v >> sh lies in [2^K, 2^(K+1))
 * and supplies both the "+ 2^K" and the sub-bucket. No select on v < 2^K is
 * needed.
 *
 * BPF has no count-leading-zeros instruction, so sh comes from an unrolled
 * binary search over y = (v | 2^K) >> K, which is at least 1 and below 2^59.
 * Each step asks "is anything left above the low w bits?" with arithmetic
 * instead of a compare:
 *
 *   ((y >> w) + (2^w - 1)) >> w   is 1 if y >> w != 0, else 0,
 *
 * which holds while y < 2^(2w), true at every step because the previous steps
 * already shifted the high bits out. The result is straight-line code (about
 * 50 instructions) whose only branch is a final clamp for the verifier, so
 * it never multiplies the paths the verifier explores: a program that
 * buckets one value and counts it verifies in about 70 instructions.
 * verify.TestBPFBucketSpec fails if a compiler turns it back into branches.
 *
 * Include it after vmlinux.h and hotlane_bpf.h; it includes nothing itself.
 */
#ifndef HOTLANE_HIST_BPF_H
#define HOTLANE_HIST_BPF_H

#define HL_HIST_K 5				/* log2 of the sub-buckets per power of two */
#define HL_HIST_SUB (1 << HL_HIST_K)		/* 32 */
/* Buckets for the whole u64 range: the 2^K exact ones plus 2^K for each
 * power of two from 2^K to 2^63. Equal to verify.NumBuckets. */
#define HL_HIST_BUCKETS ((64 - HL_HIST_K + 1) * HL_HIST_SUB) /* 1920 */

/*
 * One step of the binary search: if *y has bits at or above bit w (a power
 * of two), shift them down and return w, else return 0. The "& 1" changes
 * nothing arithmetically but tells the verifier the test is 0 or 1, so the
 * returned step, and the sum of all steps, stay bounded.
 *
 * The empty asm hides t from the optimiser: clang otherwise sees that
 * (t >> w) & 1 is just "*y >> w != 0" and emits a compare and a branch (BPF
 * has no set-on-condition), which is exactly what this code avoids. It
 * costs no instruction.
 */
static __always_inline __u64 __hl_hist_step(__u64 *y, __u32 w)
{
	__u64 t = (*y >> w) + ((1ULL << w) - 1);
	__u64 s;

	asm volatile("" : "+r"(t));
	s = ((t >> w) & 1) * w;
	*y >>= s;
	return s;
}

/*
 * hl_hist_bucket returns the histogram bucket of v (nanoseconds); the result
 * is always below HL_HIST_BUCKETS, and the verifier can see that, so it may
 * index a counter array directly.
 */
static __always_inline __u32 hl_hist_bucket(__u64 v)
{
	__u64 y = (v | HL_HIST_SUB) >> HL_HIST_K; /* 1 <= y < 2^59 */
	__u64 sh, idx;

	sh = __hl_hist_step(&y, 32);
	sh |= __hl_hist_step(&y, 16);
	sh |= __hl_hist_step(&y, 8);
	sh |= __hl_hist_step(&y, 4);
	sh |= __hl_hist_step(&y, 2);
	sh |= __hl_hist_step(&y, 1);

	/* sh = floor(log2 y) <= 58, and v >> sh has at most K+1 bits. */
	idx = (sh << HL_HIST_K) + ((v >> sh) & (2 * HL_HIST_SUB - 1));

	/* Never taken: idx <= 58 * 32 + 63 = HL_HIST_BUCKETS - 1. But the
	 * verifier only knows sh <= 63, so spell the bound out for it. */
	if (idx > HL_HIST_BUCKETS - 1)
		idx = HL_HIST_BUCKETS - 1;
	return idx;
}

#endif /* HOTLANE_HIST_BPF_H */
