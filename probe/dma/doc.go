// Package dma is `hotlane probe dma`: DMA-API activity per device, from the
// kernel's dma:* tracepoints (6.12+) or, where they are missing, from
// fexit on the DMA-API functions themselves.
//
// Per device and direction it counts single and scatterlist mappings,
// unmappings, coherent allocations and frees, failed calls, and their
// bytes; with fentry/fexit on the map functions it also measures how long
// a map call takes, in the same log-linear histograms as the run-queue
// tracer. All counting happens in per-CPU BPF hash maps that Go reads, so
// no event travels through a buffer that could overflow; what can still be
// lost (a full table, a scatterlist too long to walk, a program the kernel
// skipped because it was already running on that CPU) is counted and
// reported.
//
// Hooks, in order of preference (Options.Hooks forces one):
//
//   - tp_btf on dma:dma_map_phys, dma_unmap_phys, dma_map_sg, ... (typed
//     arguments, no tracefs). 6.18 renamed dma_map_page/dma_unmap_page to
//     dma_map_phys/dma_unmap_phys with the same prototype; both spellings
//     are known, and the kernel's BTF decides which exist.
//   - the same tracepoints through tracefs (classic tracepoints), when the
//     kernel has no BTF or a prototype is not the one this code reads.
//   - fexit on dma_map_phys (dma_map_page_attrs before 6.18),
//     dma_unmap_phys (dma_unmap_page_attrs), __dma_map_sg_attrs,
//     dma_unmap_sg_attrs, dma_alloc_attrs and dma_free_attrs, for kernels
//     without the tracepoints.
//
// Map latency always needs fentry and fexit on the map functions; where
// fentry cannot load (the build host answers EPERM) the report says that
// latency was not measured and counts everything else.
//
// Start attaches, Snapshot reads the counters at any time, Close detaches;
// Run does all three with a progress line and a time limit. On any error
// Start leaves nothing attached.
package dma
