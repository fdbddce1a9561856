/*
 * hist.bpf.h - the bucket function of hotlane's log-linear latency histogram.
 *
 * The histogram itself lives in Go (verify.Histogram); BPF programs only turn
 * a value in nanoseconds into a bucket index and count it, e.g. in a per-CPU
 * array of HL_HIST_BUCKETS u64 counters. This file and verify/hist.go must
 * compute the same index: verify/histcheck_test.go runs this code through
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
 * already shifted the high bits out. The result is straight-line code with no
 * branches, so it costs the verifier the same few dozen instructions however
 * it is called and never multiplies the paths it has to explore.
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

/* One binary-search step: if y has bits at or above bit w, shift them down
 * and add w to sh. The "& 1" is a no-op for the arithmetic but tells the
 * verifier the step is 0 or 1, so it can bound sh. */
#define __HL_HIST_STEP(y, sh, w)                                           \
	do {                                                               \
		__u64 __s = ((((y) >> (w)) + ((1ULL << (w)) - 1)) >> (w)) & 1; \
		__s *= (w);                                                 \
		(y) >>= __s;                                               \
		(sh) |= __s;                                               \
	} while (0)

/*
 * hl_hist_bucket returns the histogram bucket of v (nanoseconds); the result
 * is always below HL_HIST_BUCKETS, and the verifier can see that, so it may
 * index a counter array directly.
 */
static __always_inline __u32 hl_hist_bucket(__u64 v)
{
	__u64 y = (v | HL_HIST_SUB) >> HL_HIST_K; /* 1 <= y < 2^59 */
	__u64 sh = 0;
	__u64 idx;

	__HL_HIST_STEP(y, sh, 32);
	__HL_HIST_STEP(y, sh, 16);
	__HL_HIST_STEP(y, sh, 8);
	__HL_HIST_STEP(y, sh, 4);
	__HL_HIST_STEP(y, sh, 2);
	__HL_HIST_STEP(y, sh, 1);

	/* sh = floor(log2 y) <= 58; v >> sh has at most K+1 bits. */
	idx = (sh << HL_HIST_K) + ((v >> sh) & (2 * HL_HIST_SUB - 1));

	/* Never taken: idx <= 58 * 32 + 63 = HL_HIST_BUCKETS - 1. The verifier
	 * only knows sh <= 63, though, so spell the bound out for it. */
	if (idx > HL_HIST_BUCKETS - 1)
		idx = HL_HIST_BUCKETS - 1;
	return idx;
}

#endif /* HOTLANE_HIST_BPF_H */
