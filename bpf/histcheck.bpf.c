//go:build ignore

// The Go toolchain must not see this file: a .c file in a package without cgo
// is a build error. bpf2go compiles it; see gen.go.

/*
 * histcheck.bpf.c - runs hl_hist_bucket (include/hist.bpf.h) for a test.
 *
 * The tracer and the probes count latencies into buckets chosen by
 * hl_hist_bucket, and Go reads them back with verify.BucketBounds: the two
 * sides must agree on every u64. verify/hist_test.go writes values into
 * inputs[], runs bucket_batch with BPF_PROG_RUN and compares buckets[] with
 * verify.BucketIndex; bucket_one does the same for a single value and is the
 * shape of the real use (count into an array indexed by the bucket with no
 * check of its own), so its verifier statistics show what the bucket
 * function costs.
 *
 * SEC("syscall") programs run through BPF_PROG_RUN with no packet or
 * context, which is all a pure function needs. Globals are .bss, which
 * cilium/ebpf maps into the test's memory as HistcheckVariables.
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"
#include "hist.bpf.h"

LICENSE("GPL");

#define HISTCHECK_BATCH 1024

__u64 inputs[HISTCHECK_BATCH];
__u32 buckets[HISTCHECK_BATCH];
__u32 nr_inputs;

__u64 input;
__u32 bucket;

/* Every value bucketed, by bucket: checks the index is usable as is. */
__u64 counts[HL_HIST_BUCKETS];

SEC("syscall")
int bucket_batch(void *ctx)
{
	for (__u32 i = 0; i < HISTCHECK_BATCH; i++) {
		__u32 b;

		if (i >= nr_inputs)
			break;
		b = hl_hist_bucket(inputs[i]);
		buckets[i] = b;
		counts[b]++;
	}
	return 0;
}

SEC("syscall")
int bucket_one(void *ctx)
{
	__u32 b = hl_hist_bucket(input);

	bucket = b;
	counts[b]++;
	return 0;
}
