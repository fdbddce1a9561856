//go:build ignore

// The Go toolchain must not see this file: a .c file in a package without cgo
// is a build error. bpf2go compiles it; see gen.go.

/*
 * dma.bpf.c - `hotlane probe dma`: DMA-API activity per device.
 *
 * Every event is counted per (device name, direction) in dev_stats: calls
 * and bytes for single mappings, scatterlist mappings, unmappings, coherent
 * allocations and frees, and failures. Map latency (time spent inside the
 * kernel's map call) goes to a log-linear histogram per device in lat_hist.
 * Nothing is streamed: the maps are read from Go, so no event can be lost
 * in a ring buffer. What can be lost (a full table, a scatterlist too long
 * to walk) is counted in losses[], and the kernel counts the events a
 * program missed because it was already running on that CPU (recursion
 * misses, read from Go with the program stats).
 *
 * Three families of programs, one chosen per run by probe/dma (the Go side
 * loads only the programs it attaches, and instantiates one program for
 * several tracepoints or functions of the same prototype by changing its
 * attach target):
 *
 *   tpb_*  tp_btf on the dma:* tracepoints (6.12+; dma_map_page and
 *          dma_unmap_page were renamed dma_map_phys and dma_unmap_phys in
 *          6.18, with the same prototype). Arguments are ctx[i] in
 *          TP_PROTO order; see btf_trace_dma_* in vmlinux.h.
 *   tp_*   the same tracepoints through tracefs, when tp_btf cannot be
 *          used; the context is the trace record.
 *   fx_*   fexit on dma_map_phys (or dma_map_page_attrs before 6.18),
 *          dma_unmap_phys/dma_unmap_page_attrs, __dma_map_sg_attrs,
 *          dma_unmap_sg_attrs, dma_alloc_attrs and dma_free_attrs, for
 *          kernels without the tracepoints. fexit sees the arguments and
 *          the return value, so one program counts a call and its failure.
 *
 * Map latency needs fentry and fexit on the map functions whatever counts
 * the events: lat_enter pushes a timestamp for the current thread (or, in
 * the idle task, the CPU), the map function's fexit pops it. A small stack
 * per thread keeps calls nested by interrupts apart.
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"
#include "hist.bpf.h"

LICENSE("GPL");

/*
 * bpf_loop (5.17+) is not in hotlane_bpf.h: it runs callback nr_loops
 * times, stopping early when the callback returns 1. The callback is
 * verified once, however long the scatterlist, unlike an unrolled loop.
 */
static long (* const bpf_loop)(__u32 nr_loops, void *callback_fn,
			       void *callback_ctx, __u64 flags) =
	(void *)BPF_FUNC_loop;

#define HL_EEXIST 17

/* ---- what is counted ----------------------------------------------------- */

/* Operations, the index into dev_val.count/bytes. Keep in step with
 * probe/dma (opMap...). */
enum hl_dma_op {
	OP_MAP = 0,	/* single mapping (page/phys/resource) */
	OP_MAP_SG,	/* scatterlist mapping; bytes = the list's length */
	OP_UNMAP,
	OP_UNMAP_SG,
	OP_ALLOC,	/* coherent / non-coherent allocation */
	OP_FREE,
	OP_MAP_ERR,	/* a map call that failed (single or sg) */
	OP_ALLOC_ERR,
	HL_DMA_OPS,
};

/* Kinds of loss, the index into losses[]. Keep in step with probe/dma. */
enum hl_dma_loss {
	LOSS_DEV_FULL = 0,	/* dev_stats full: event not counted */
	LOSS_HIST_FULL,		/* lat_hist full: latency sample dropped */
	LOSS_STAMP_FULL,	/* stamps full: latency sample dropped */
	LOSS_STAMP_DEEP,	/* calls nested deeper than HL_STAMP_DEPTH */
	LOSS_SG_LONG,		/* scatterlist longer than HL_SG_WALK_MAX: bytes undercounted */
	LOSS_TP_SG_TRUNC,	/* tracefs record truncated the list: bytes undercounted */
	LOSS_UNMATCHED,		/* map returned without a start stamp (no sample) */
	HL_DMA_LOSSES,
};

/* Directions are enum dma_data_direction (0..3); anything else is 4. */
#define HL_DIR_OTHER 4

#define HL_DEV_NAME 32

struct dev_key {
	char name[HL_DEV_NAME];
	__u32 dir;
	__u32 _pad;
};

struct dev_val {
	__u64 count[HL_DMA_OPS];
	__u64 bytes[HL_DMA_OPS];
};

/* Latency histogram cells: bucket < HL_HIST_BUCKETS counts samples; the two
 * extra cells hold this CPU's largest sample and the sum of its samples. */
#define HL_HIST_MAX_CELL HL_HIST_BUCKETS
#define HL_HIST_SUM_CELL (HL_HIST_BUCKETS + 1)

struct hist_key {
	char name[HL_DEV_NAME];
	__u32 cell;
	__u32 _pad;
};

#define HL_STAMP_DEPTH 4

struct stamp {
	__u64 ts[HL_STAMP_DEPTH];
	__u32 depth;
	__u32 _pad;
};

/* Per-CPU values: the hot path never shares a cache line with another CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, struct dev_key);
	__type(value, struct dev_val);
} dev_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct hist_key);
	__type(value, __u64);
} lat_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct stamp);
} stamps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HL_DMA_LOSSES);
	__type(key, __u32);
	__type(value, __u64);
} losses SEC(".maps");

/* Set by Go before loading. fexit_counts: the fx_* programs count events
 * (no tracepoints this run); latency_on: fentry stamps are attached, so
 * the map functions' fexit records latency. */
const volatile bool fexit_counts;
const volatile bool latency_on;

/* ---- helpers ------------------------------------------------------------ */

static __always_inline void lose(__u32 what)
{
	__u64 *n = bpf_map_lookup_elem(&losses, &what);

	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline __u32 dir_of(__u64 dir)
{
	return dir <= 3 ? (__u32)dir : HL_DIR_OTHER;
}

/* dev_name(): the kobject's name once the device is registered, else
 * init_name. The whole key is zeroed first: the hash compares all bytes. */
static __always_inline void dev_name(char name[HL_DEV_NAME], struct device *dev)
{
	const char *s = NULL;

	if (dev) {
		s = CORE_READ(dev, kobj.name);
		if (!s)
			s = CORE_READ(dev, init_name);
	}
	if (!s || bpf_probe_read_kernel_str(name, HL_DEV_NAME, s) <= 1) {
		name[0] = '?';
		name[1] = 0;
	}
}

/* A trace record's __data_loc string: offset in the low 16 bits. */
static __always_inline void loc_name(char name[HL_DEV_NAME], void *rec, __u32 loc)
{
	if (bpf_probe_read_kernel_str(name, HL_DEV_NAME, rec + (loc & 0xffff)) <= 1) {
		name[0] = '?';
		name[1] = 0;
	}
}

static __always_inline void count(struct dev_key *key, __u32 op, __u64 bytes)
{
	struct dev_val *v = bpf_map_lookup_elem(&dev_stats, key);

	if (!v) {
		struct dev_val zero = {};
		long err = bpf_map_update_elem(&dev_stats, key, &zero, BPF_NOEXIST);

		if (err && err != -HL_EEXIST) {
			lose(LOSS_DEV_FULL);
			return;
		}
		v = bpf_map_lookup_elem(&dev_stats, key);
		if (!v) {
			lose(LOSS_DEV_FULL);
			return;
		}
	}
	if (op >= HL_DMA_OPS)
		return;
	__sync_fetch_and_add(&v->count[op], 1);
	if (bytes)
		__sync_fetch_and_add(&v->bytes[op], bytes);
}

/* Counts one event of a struct device. */
static __always_inline void count_dev(struct device *dev, __u64 dir, __u32 op, __u64 bytes)
{
	struct dev_key key;

	__builtin_memset(&key, 0, sizeof(key));
	dev_name(key.name, dev);
	key.dir = dir_of(dir);
	count(&key, op, bytes);
}

/* Counts one event of a trace record whose device string is at loc. */
static __always_inline void count_rec(void *rec, __u32 loc, __u64 dir, __u32 op, __u64 bytes)
{
	struct dev_key key;

	__builtin_memset(&key, 0, sizeof(key));
	loc_name(key.name, rec, loc);
	key.dir = dir_of(dir);
	count(&key, op, bytes);
}

static __always_inline __u64 *hist_cell(struct hist_key *key, __u32 cell)
{
	__u64 *v;
	__u64 zero = 0;
	long err;

	key->cell = cell;
	v = bpf_map_lookup_elem(&lat_hist, key);
	if (v)
		return v;
	err = bpf_map_update_elem(&lat_hist, key, &zero, BPF_NOEXIST);
	if (err && err != -HL_EEXIST)
		return NULL;
	return bpf_map_lookup_elem(&lat_hist, key);
}

static __always_inline void record_latency(struct device *dev, __u64 ns)
{
	struct hist_key key;
	__u64 *v;

	__builtin_memset(&key, 0, sizeof(key));
	dev_name(key.name, dev);

	v = hist_cell(&key, hl_hist_bucket(ns));
	if (!v) {
		lose(LOSS_HIST_FULL);
		return;
	}
	__sync_fetch_and_add(v, 1);
	/* Max and sum are per CPU: only an interrupt on this CPU can race,
	 * and Go takes the max over CPUs. */
	v = hist_cell(&key, HL_HIST_MAX_CELL);
	if (v && *v < ns)
		*v = ns;
	v = hist_cell(&key, HL_HIST_SUM_CELL);
	if (v)
		__sync_fetch_and_add(v, ns);
}

/* The stamp stack belongs to the thread, or to the CPU in the idle task
 * (pid 0 on every CPU), where interrupts map buffers too. */
static __always_inline __u64 stamp_key(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (tid == 0)
		return (1ULL << 63) | bpf_get_smp_processor_id();
	return tid;
}

static __always_inline void lat_push(void)
{
	__u64 key = stamp_key();
	struct stamp *s = bpf_map_lookup_elem(&stamps, &key);
	__u32 d;

	if (!s) {
		struct stamp zero = {};

		bpf_map_update_elem(&stamps, &key, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&stamps, &key);
		if (!s) {
			lose(LOSS_STAMP_FULL);
			return;
		}
	}
	d = s->depth;
	if (d < HL_STAMP_DEPTH)
		s->ts[d] = bpf_ktime_get_ns();
	else
		lose(LOSS_STAMP_DEEP);
	s->depth = d + 1;
}

static __always_inline void lat_pop(struct device *dev)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 key = stamp_key();
	struct stamp *s = bpf_map_lookup_elem(&stamps, &key);
	__u32 d;

	if (!s || s->depth == 0) {
		lose(LOSS_UNMATCHED);
		return;
	}
	d = s->depth - 1;
	s->depth = d;
	if (d < HL_STAMP_DEPTH) {
		__u64 start = s->ts[d];

		if (now >= start)
			record_latency(dev, now - start);
	}
	if (d == 0)
		bpf_map_delete_elem(&stamps, &key);
}

/* ---- scatterlists ------------------------------------------------------- */

#define HL_SG_CHAIN 0x01UL
#define HL_SG_END 0x02UL
#define HL_SG_WALK_MAX 8192

struct sg_walk {
	__u64 sg;	/* current entry, a kernel address */
	__u64 bytes;
	__u32 left;	/* entries still to add */
};

/* One step of sg_next(): add this entry's length, move to the next one,
 * following a chain link. */
static long sg_step(__u32 i, void *data)
{
	struct sg_walk *w = data;
	struct scatterlist *sg = (struct scatterlist *)w->sg;
	unsigned long link;
	unsigned int len = 0;

	if (!w->left || !sg)
		return 1;
	CORE_READ_INTO(&len, &sg->length);
	w->bytes += len;
	w->left--;
	if (CORE_READ_INTO(&link, &sg->page_link) || (link & HL_SG_END) || !w->left) {
		w->left = 0;
		return 1;
	}
	/* sg++, with the running kernel's sizeof(struct scatterlist): its
	 * dma_length and dma_flags members depend on the configuration. */
	sg = (void *)sg + __builtin_preserve_type_info(*sg, 1 /* BPF_TYPE_SIZE */);
	if (CORE_READ_INTO(&link, &sg->page_link))
		link = 0;
	if (link & HL_SG_CHAIN)
		sg = (struct scatterlist *)(link & ~(HL_SG_CHAIN | HL_SG_END));
	w->sg = (__u64)sg;
	return 0;
}

/*
 * Bytes in the first nents entries of a scatterlist (the CPU-side lengths:
 * what the device may access, however an IOMMU merged it). arg points to
 * the scatterlist argument in ctx. It is copied out with a probe read so
 * that the walk sees a plain number: a BTF-typed pointer carried through
 * bpf_loop's callback makes some kernels' verifiers fail with EFAULT.
 */
static __always_inline __u64 sg_bytes(u64 *arg, int nents)
{
	struct sg_walk w = { .left = nents > 0 ? nents : 0 };

	if (bpf_probe_read_kernel(&w.sg, sizeof(w.sg), arg))
		return 0;
	bpf_loop(HL_SG_WALK_MAX, sg_step, &w, 0);
	if (w.left)
		lose(LOSS_SG_LONG);
	return w.bytes;
}

struct len_walk {
	__u64 base;	/* address of the record's u32 lengths[] */
	__u64 bytes;
	__u32 n;
};

static long len_step(__u32 i, void *data)
{
	struct len_walk *w = data;
	__u32 len = 0;

	if (i >= w->n)
		return 1;
	bpf_probe_read_kernel(&len, sizeof(len), (void *)(w->base + 4 * (__u64)i));
	w->bytes += len;
	return 0;
}

/* ---- tp_btf: the dma:* tracepoints with typed arguments ----------------- */

/* dma_map_phys, dma_map_page, dma_map_resource: (dev, phys_addr, dma_addr,
 * size, dir, attrs). A failed mapping is traced with DMA_MAPPING_ERROR. */
SEC("tp_btf/dma_map_phys")
int hldma_tpb_map(u64 *ctx)
{
	struct device *dev = (void *)ctx[0];

	if (ctx[2] == ~0ULL)
		count_dev(dev, ctx[4], OP_MAP_ERR, 0);
	else
		count_dev(dev, ctx[4], OP_MAP, ctx[3]);
	return 0;
}

/* dma_unmap_phys, dma_unmap_page, dma_unmap_resource: (dev, addr, size,
 * dir, attrs). */
SEC("tp_btf/dma_unmap_phys")
int hldma_tpb_unmap(u64 *ctx)
{
	count_dev((void *)ctx[0], ctx[3], OP_UNMAP, ctx[2]);
	return 0;
}

/* dma_map_sg: (dev, sgl, nents, ents, dir, attrs), traced on success. */
SEC("tp_btf/dma_map_sg")
int hldma_tpb_map_sg(u64 *ctx)
{
	count_dev((void *)ctx[0], ctx[4], OP_MAP_SG, sg_bytes(&ctx[1], (int)ctx[2]));
	return 0;
}

/* dma_map_sg_err: (dev, sgl, nents, err, dir, attrs). */
SEC("tp_btf/dma_map_sg_err")
int hldma_tpb_map_sg_err(u64 *ctx)
{
	count_dev((void *)ctx[0], ctx[4], OP_MAP_ERR, 0);
	return 0;
}

/* dma_unmap_sg: (dev, sgl, nents, dir, attrs). */
SEC("tp_btf/dma_unmap_sg")
int hldma_tpb_unmap_sg(u64 *ctx)
{
	count_dev((void *)ctx[0], ctx[3], OP_UNMAP_SG, sg_bytes(&ctx[1], (int)ctx[2]));
	return 0;
}

/* dma_alloc, dma_alloc_pages: (dev, virt_addr, dma_addr, size, dir, flags,
 * attrs); a failed allocation is traced with virt_addr NULL. */
SEC("tp_btf/dma_alloc")
int hldma_tpb_alloc(u64 *ctx)
{
	if (!ctx[1])
		count_dev((void *)ctx[0], ctx[4], OP_ALLOC_ERR, 0);
	else
		count_dev((void *)ctx[0], ctx[4], OP_ALLOC, ctx[3]);
	return 0;
}

/* dma_alloc_sgt_err: the alloc prototype, traced only on failure. */
SEC("tp_btf/dma_alloc_sgt_err")
int hldma_tpb_alloc_err(u64 *ctx)
{
	count_dev((void *)ctx[0], ctx[4], OP_ALLOC_ERR, 0);
	return 0;
}

/* dma_alloc_sgt: (dev, sgt, size, dir, flags, attrs). */
SEC("tp_btf/dma_alloc_sgt")
int hldma_tpb_alloc_sgt(u64 *ctx)
{
	count_dev((void *)ctx[0], ctx[3], OP_ALLOC, ctx[2]);
	return 0;
}

/* dma_free, dma_free_pages: (dev, virt_addr, dma_addr, size, dir, attrs). */
SEC("tp_btf/dma_free")
int hldma_tpb_free(u64 *ctx)
{
	count_dev((void *)ctx[0], ctx[4], OP_FREE, ctx[3]);
	return 0;
}

/* dma_free_sgt: (dev, sgt, size, dir). */
SEC("tp_btf/dma_free_sgt")
int hldma_tpb_free_sgt(u64 *ctx)
{
	count_dev((void *)ctx[0], ctx[3], OP_FREE, ctx[2]);
	return 0;
}

/* ---- tracepoint: the same events from their tracefs records ------------- */

SEC("tracepoint/dma/dma_map_phys")
int hldma_tp_map(struct trace_event_raw_dma_map *ctx)
{
	if (ctx->dma_addr == ~0ULL)
		count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_MAP_ERR, 0);
	else
		count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_MAP, ctx->size);
	return 0;
}

SEC("tracepoint/dma/dma_unmap_phys")
int hldma_tp_unmap(struct trace_event_raw_dma_unmap *ctx)
{
	count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_UNMAP, ctx->size);
	return 0;
}

/*
 * The record keeps the mapped lengths in a dynamic array; since 6.18 it
 * holds at most 128 entries and says whether it truncated the list (older
 * kernels keep them all and have no such field).
 */
SEC("tracepoint/dma/dma_map_sg")
int hldma_tp_map_sg(struct trace_event_raw_dma_map_sg *ctx)
{
	__u32 loc = ctx->__data_loc_lengths;
	struct len_walk w = {
		.base = (__u64)(void *)ctx + (loc & 0xffff),
		.n = (loc >> 16) / 4,
	};

	bpf_loop(HL_SG_WALK_MAX, len_step, &w, 0);
	if (__builtin_preserve_field_info(ctx->truncated, 2 /* BPF_FIELD_EXISTS */) &&
	    ctx->truncated)
		lose(LOSS_TP_SG_TRUNC);
	count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_MAP_SG, w.bytes);
	return 0;
}

SEC("tracepoint/dma/dma_map_sg_err")
int hldma_tp_map_sg_err(struct trace_event_raw_dma_map_sg_err *ctx)
{
	count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_MAP_ERR, 0);
	return 0;
}

/* The record has the entries' addresses but not their lengths: unmapped
 * scatterlist bytes are not known on this path. */
SEC("tracepoint/dma/dma_unmap_sg")
int hldma_tp_unmap_sg(struct trace_event_raw_dma_unmap_sg *ctx)
{
	count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_UNMAP_SG, 0);
	return 0;
}

SEC("tracepoint/dma/dma_alloc")
int hldma_tp_alloc(struct trace_event_raw_dma_alloc_class *ctx)
{
	if (!ctx->virt_addr)
		count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_ALLOC_ERR, 0);
	else
		count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_ALLOC, ctx->size);
	return 0;
}

SEC("tracepoint/dma/dma_alloc_sgt_err")
int hldma_tp_alloc_err(struct trace_event_raw_dma_alloc_class *ctx)
{
	count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_ALLOC_ERR, 0);
	return 0;
}

SEC("tracepoint/dma/dma_alloc_sgt")
int hldma_tp_alloc_sgt(struct trace_event_raw_dma_alloc_sgt *ctx)
{
	count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_ALLOC, ctx->size);
	return 0;
}

SEC("tracepoint/dma/dma_free")
int hldma_tp_free(struct trace_event_raw_dma_free_class *ctx)
{
	count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_FREE, ctx->size);
	return 0;
}

SEC("tracepoint/dma/dma_free_sgt")
int hldma_tp_free_sgt(struct trace_event_raw_dma_free_sgt *ctx)
{
	count_rec(ctx, ctx->__data_loc_device, ctx->dir, OP_FREE, ctx->size);
	return 0;
}

/* ---- fentry/fexit: the DMA-API functions -------------------------------- */

/* Pushes the start stamp of a map call; attached to the map functions. */
SEC("fentry/dma_map_phys")
int hldma_fe_map(u64 *ctx)
{
	if (latency_on)
		lat_push();
	return 0;
}

/* dma_map_phys(dev, phys, size, dir, attrs) returns the DMA address. */
SEC("fexit/dma_map_phys")
int hldma_fx_map_phys(u64 *ctx)
{
	struct device *dev = (void *)ctx[0];

	if (latency_on)
		lat_pop(dev);
	if (fexit_counts) {
		if (ctx[5] == ~0ULL)
			count_dev(dev, ctx[3], OP_MAP_ERR, 0);
		else
			count_dev(dev, ctx[3], OP_MAP, ctx[2]);
	}
	return 0;
}

/* dma_map_page_attrs(dev, page, offset, size, dir, attrs), before 6.18 the
 * function every single mapping goes through. */
SEC("fexit/dma_map_page_attrs")
int hldma_fx_map_page(u64 *ctx)
{
	struct device *dev = (void *)ctx[0];

	if (latency_on)
		lat_pop(dev);
	if (fexit_counts) {
		if (ctx[6] == ~0ULL)
			count_dev(dev, ctx[4], OP_MAP_ERR, 0);
		else
			count_dev(dev, ctx[4], OP_MAP, ctx[3]);
	}
	return 0;
}

/* dma_unmap_phys / dma_unmap_page_attrs(dev, addr, size, dir, attrs). */
SEC("fexit/dma_unmap_phys")
int hldma_fx_unmap(u64 *ctx)
{
	if (fexit_counts)
		count_dev((void *)ctx[0], ctx[3], OP_UNMAP, ctx[2]);
	return 0;
}

/* __dma_map_sg_attrs(dev, sg, nents, dir, attrs) returns the number of
 * mapped entries or a negative error; dma_map_sg_attrs, the fallback
 * target, returns 0 on error. Both back dma_map_sg and dma_map_sgtable. */
SEC("fexit/__dma_map_sg_attrs")
int hldma_fx_map_sg(u64 *ctx)
{
	struct device *dev = (void *)ctx[0];

	if (latency_on)
		lat_pop(dev);
	if (fexit_counts) {
		if ((int)ctx[5] <= 0)
			count_dev(dev, ctx[3], OP_MAP_ERR, 0);
		else
			count_dev(dev, ctx[3], OP_MAP_SG, sg_bytes(&ctx[1], (int)ctx[2]));
	}
	return 0;
}

/* dma_unmap_sg_attrs(dev, sg, nents, dir, attrs). */
SEC("fexit/dma_unmap_sg_attrs")
int hldma_fx_unmap_sg(u64 *ctx)
{
	if (fexit_counts)
		count_dev((void *)ctx[0], ctx[3], OP_UNMAP_SG, sg_bytes(&ctx[1], (int)ctx[2]));
	return 0;
}

/* dma_alloc_attrs(dev, size, dma_handle, gfp, attrs) returns the CPU
 * address or NULL. Coherent memory is bidirectional. */
SEC("fexit/dma_alloc_attrs")
int hldma_fx_alloc(u64 *ctx)
{
	if (!fexit_counts)
		return 0;
	if (!ctx[5])
		count_dev((void *)ctx[0], DMA_BIDIRECTIONAL, OP_ALLOC_ERR, 0);
	else
		count_dev((void *)ctx[0], DMA_BIDIRECTIONAL, OP_ALLOC, ctx[1]);
	return 0;
}

/* dma_free_attrs(dev, size, cpu_addr, dma_handle, attrs). */
SEC("fexit/dma_free_attrs")
int hldma_fx_free(u64 *ctx)
{
	if (fexit_counts)
		count_dev((void *)ctx[0], DMA_BIDIRECTIONAL, OP_FREE, ctx[1]);
	return 0;
}
