//go:build ignore

// The Go toolchain must not see this file: a .c file in a package without cgo
// is a build error. bpf2go compiles it; see gen.go.

/*
 * xdp.bpf.c - `hotlane probe xdp`: count every frame by protocol class and
 * apply a small drop policy.
 *
 * Every frame is counted exactly once, in one class:
 *
 *   IPv4 x {TCP, UDP, ICMP, non-first fragment, other protocol}
 *   IPv6 x {TCP, UDP, ICMPv6, non-first fragment, other protocol}
 *   non-IP (broken down by EtherType in a separate table)
 *   malformed (broken down by the first problem found)
 *
 * The parser walks at most two VLAN tags (802.1Q, 802.1ad and the old 0x9100
 * QinQ tag) and at most HL_MAX_IPV6_EXT IPv6 extension headers. Every read is
 * checked against data_end, and every header must also lie inside the IP
 * packet (IPv4 total length, IPv6 payload length), not in Ethernet padding.
 *
 * Malformed frames: a frame the parser cannot read to the end of the headers
 * its class needs (cut short, invalid lengths or versions, or nested deeper
 * than the parser walks) is counted in class HL_C_MALFORMED, with the first
 * problem found in malformed_reasons, and is passed. The kernel's own stack
 * validates it again and discards what it cannot use. The policy does not
 * look inside such frames; only dropping the malformed class itself
 * (`--drop malformed`) drops them.
 *
 * The policy lives in .rodata, written by the loader before the program is
 * loaded, so the verifier sees constants and prunes rules that are off:
 *   - drop_classes: one bit per class, dropped whole;
 *   - udp_allow: a bitmap of UDP destination ports; when udp_allow_on is
 *     set, IPv4 and IPv6 UDP to any other port is dropped;
 *   - ethertype_drop: a bitmap of EtherTypes; a frame is dropped if its
 *     outer EtherType, any VLAN tag protocol or its inner EtherType is set.
 * Non-first fragments carry no UDP header, so the port allow-list does not
 * apply to them (the kernel cannot reassemble them without the first one,
 * which the allow-list did see).
 *
 * Counters are per-CPU and never lost; the EtherType breakdown of non-IP
 * frames is a bounded hash table, and a frame whose EtherType finds it full
 * is still counted in the non-IP class, with the miss counted in
 * HL_S_ETHERTYPE_FULL.
 */
#include "vmlinux.h"
#include "hotlane_bpf.h"

LICENSE("GPL");

/* Classes: the index of class_counters. Keep in sync with probe/xdp. */
enum hl_xdp_class {
	HL_C_IPV4_TCP,
	HL_C_IPV4_UDP,
	HL_C_IPV4_ICMP,
	HL_C_IPV4_FRAG,
	HL_C_IPV4_OTHER,
	HL_C_IPV6_TCP,
	HL_C_IPV6_UDP,
	HL_C_IPV6_ICMPV6,
	HL_C_IPV6_FRAG,
	HL_C_IPV6_OTHER,
	HL_C_NON_IP,
	HL_C_MALFORMED,
	HL_NR_CLASSES,
};

/* Why a frame is malformed: the index of malformed_reasons. */
enum hl_xdp_reason {
	HL_M_NONE,		/* not malformed; never counted */
	HL_M_ETH_TRUNCATED,	/* shorter than an Ethernet header */
	HL_M_VLAN_TRUNCATED,	/* ends inside a VLAN tag */
	HL_M_VLAN_TOO_DEEP,	/* more than two VLAN tags */
	HL_M_IPV4_TRUNCATED,	/* ends inside the IPv4 header or packet */
	HL_M_IPV4_VERSION,	/* IPv4 EtherType, version field not 4 */
	HL_M_IPV4_IHL,		/* IHL below 5 */
	HL_M_IPV4_LENGTH,	/* total length shorter than the header */
	HL_M_IPV6_TRUNCATED,	/* ends inside the IPv6 header or payload */
	HL_M_IPV6_VERSION,	/* IPv6 EtherType, version field not 6 */
	HL_M_IPV6_EXT_TRUNCATED, /* ends inside an extension header */
	HL_M_IPV6_EXT_TOO_DEEP,	/* more than HL_MAX_IPV6_EXT extension headers */
	HL_M_TCP_TRUNCATED,	/* ends inside the TCP header */
	HL_M_TCP_OFFSET,	/* TCP data offset below 5 */
	HL_M_UDP_TRUNCATED,	/* ends inside the UDP header */
	HL_M_ICMP_TRUNCATED,	/* ends inside the ICMP/ICMPv6 header */
	HL_NR_REASONS,
};

/* Other per-CPU counters: the index of stats. */
enum hl_xdp_stat {
	HL_S_PACKETS,		/* every frame the program saw */
	HL_S_BYTES,		/* their bytes, from the Ethernet header on */
	HL_S_VLAN1,		/* frames with exactly one VLAN tag */
	HL_S_VLAN2,		/* frames with two (QinQ) */
	HL_S_IPV4_OPTIONS,	/* IPv4 headers with options (IHL > 5) */
	HL_S_IPV6_EXT,		/* IPv6 packets with extension headers */
	HL_S_FIRST_FRAG,	/* first fragments (more follow; L4 header read) */
	HL_S_DROP_MALFORMED,	/* drops, by the rule that made them */
	HL_S_DROP_ETHERTYPE,
	HL_S_DROP_CLASS,
	HL_S_DROP_UDP_PORT,
	HL_S_ETHERTYPE_FULL,	/* non-IP frames missing from the EtherType table */
	HL_NR_STATS,
};

#define HL_MAX_VLAN 2
#define HL_MAX_IPV6_EXT 8
#define HL_ETHERTYPE_SLOTS 64

/* The EtherType breakdown key for 802.3 frames (a length, not a type). */
#define HL_ETHERTYPE_8023 0

#define ETH_P_IP_ 0x0800
#define ETH_P_IPV6_ 0x86DD
#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88A8
#define ETH_P_QINQ1_ 0x9100
#define ETH_P_802_3_MIN_ 0x0600

#define IPPROTO_HOPOPTS_ 0
#define IPPROTO_ICMP_ 1
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define IPPROTO_ROUTING_ 43
#define IPPROTO_FRAGMENT_ 44
#define IPPROTO_AH_ 51
#define IPPROTO_ICMPV6_ 58
#define IPPROTO_DSTOPTS_ 60
#define IPPROTO_MH_ 135
#define IPPROTO_HIP_ 139
#define IPPROTO_SHIM6_ 140

#define bswap16(x) __builtin_bswap16(x)

struct class_counters {
	__u64 packets;
	__u64 bytes;
	__u64 dropped;
};

/*
 * Wire formats, our own rather than vmlinux.h's: those carry
 * preserve_access_index and would turn every packet read into a CO-RE
 * relocation against kernel structs that describe the same fixed layout.
 */
struct wire_eth {
	__u8 dst[6];
	__u8 src[6];
	__be16 proto;
};

struct wire_vlan {
	__be16 tci;
	__be16 proto;
};

struct wire_ipv4 {
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__be16 check;
	__be32 saddr;
	__be32 daddr;
};

struct wire_ipv6 {
	__u8 ver_tc;
	__u8 tc_flow;
	__be16 flow;
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u8 saddr[16];
	__u8 daddr[16];
};

/* The first two bytes of every chainable IPv6 extension header. */
struct wire_ipv6_ext {
	__u8 nexthdr;
	__u8 hdrlen;
};

struct wire_ipv6_frag {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off;
	__be32 id;
};

struct wire_l4_ports {
	__be16 source;
	__be16 dest;
};

/* ---- policy (.rodata, set before load) --------------------------------- */

const volatile __u32 drop_classes;
const volatile __u32 udp_allow_on;
const volatile __u64 udp_allow[65536 / 64];
const volatile __u32 ethertype_drop_on;
const volatile __u64 ethertype_drop[65536 / 64];

/* ---- counters ----------------------------------------------------------- */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HL_NR_CLASSES);
	__type(key, __u32);
	__type(value, struct class_counters);
} class_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HL_NR_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} malformed_reasons SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HL_NR_STATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Non-IP frames by EtherType (HL_ETHERTYPE_8023 for 802.3 length frames). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, HL_ETHERTYPE_SLOTS);
	__type(key, __u32);
	__type(value, struct class_counters);
} ethertypes SEC(".maps");

/* ---- parsing ------------------------------------------------------------ */

/* What the parser found out about one frame. */
struct frame {
	void *data;
	void *data_end;
	__u64 len;		/* frame length */
	__u64 off;		/* offset of the next header to read */
	__u64 limit;		/* end of the IP packet (<= len) */
	__u32 reason;		/* enum hl_xdp_reason, for HL_C_MALFORMED */
	__u32 ethertype;	/* innermost EtherType */
	__u16 udp_dport;	/* for UDP classes */
	__u8 ethertype_hit;	/* some EtherType in the chain is to be dropped */
	__u8 vlans;
	__u8 ipv4_options;
	__u8 ipv6_ext;
	__u8 first_frag;
};

/*
 * A pointer to n bytes at f->off, or NULL if they are not all inside the
 * packet limit. The pointer test is what the verifier needs; the limit test
 * is the logic (limit <= len, so it implies the first).
 */
static __always_inline void *header(struct frame *f, __u64 n)
{
	void *p = f->data + f->off;

	if (f->off + n > f->limit)
		return NULL;
	if (p + n > f->data_end)
		return NULL;
	return p;
}

static __always_inline int bit_set(const volatile __u64 *bitmap, __u16 v)
{
	return (bitmap[v >> 6] >> (v & 63)) & 1;
}

static __always_inline void check_ethertype(struct frame *f, __u16 et)
{
	if (ethertype_drop_on && bit_set(ethertype_drop, et))
		f->ethertype_hit = 1;
}

static __always_inline int is_vlan(__u16 et)
{
	return et == ETH_P_8021Q_ || et == ETH_P_8021AD_ || et == ETH_P_QINQ1_;
}

static __always_inline __u32 malformed(struct frame *f, __u32 reason)
{
	f->reason = reason;
	return HL_C_MALFORMED;
}

/* The L4 header at f->off, for IP protocol proto; v6 picks the class set. */
static __always_inline __u32 parse_l4(struct frame *f, __u8 proto, int v6)
{
	switch (proto) {
	case IPPROTO_TCP_: {
		__u8 *h = header(f, 20);
		__u8 doff;

		if (!h)
			return malformed(f, HL_M_TCP_TRUNCATED);
		doff = h[12] >> 4;
		if (doff < 5)
			return malformed(f, HL_M_TCP_OFFSET);
		if (f->off + doff * 4 > f->limit)
			return malformed(f, HL_M_TCP_TRUNCATED);
		return v6 ? HL_C_IPV6_TCP : HL_C_IPV4_TCP;
	}
	case IPPROTO_UDP_: {
		struct wire_l4_ports *h = header(f, 8);

		if (!h)
			return malformed(f, HL_M_UDP_TRUNCATED);
		f->udp_dport = bswap16(h->dest);
		return v6 ? HL_C_IPV6_UDP : HL_C_IPV4_UDP;
	}
	case IPPROTO_ICMP_:
		if (v6)
			return HL_C_IPV6_OTHER;
		if (!header(f, 8))
			return malformed(f, HL_M_ICMP_TRUNCATED);
		return HL_C_IPV4_ICMP;
	case IPPROTO_ICMPV6_:
		if (!v6)
			return HL_C_IPV4_OTHER;
		if (!header(f, 8))
			return malformed(f, HL_M_ICMP_TRUNCATED);
		return HL_C_IPV6_ICMPV6;
	}
	return v6 ? HL_C_IPV6_OTHER : HL_C_IPV4_OTHER;
}

static __always_inline __u32 parse_ipv4(struct frame *f)
{
	struct wire_ipv4 *ip = header(f, sizeof(*ip));
	__u64 ihl, tot_len;
	__u16 frag;

	if (!ip)
		return malformed(f, HL_M_IPV4_TRUNCATED);
	if (ip->ver_ihl >> 4 != 4)
		return malformed(f, HL_M_IPV4_VERSION);
	ihl = (ip->ver_ihl & 0xf) * 4;
	if (ihl < 20)
		return malformed(f, HL_M_IPV4_IHL);
	tot_len = bswap16(ip->tot_len);
	if (tot_len < ihl)
		return malformed(f, HL_M_IPV4_LENGTH);
	/* The header, then the whole packet, must be in the frame. */
	if (f->off + ihl > f->limit || f->off + tot_len > f->limit)
		return malformed(f, HL_M_IPV4_TRUNCATED);
	f->ipv4_options = ihl > 20;
	f->limit = f->off + tot_len;

	frag = bswap16(ip->frag_off);
	if (frag & 0x1fff)
		return HL_C_IPV4_FRAG;
	if (frag & 0x2000)
		f->first_frag = 1;
	f->off += ihl;
	return parse_l4(f, ip->protocol, 0);
}

static __always_inline __u32 parse_ipv6(struct frame *f)
{
	struct wire_ipv6 *ip = header(f, sizeof(*ip));
	__u64 payload;
	__u8 nh;
	int i;

	if (!ip)
		return malformed(f, HL_M_IPV6_TRUNCATED);
	if (ip->ver_tc >> 4 != 6)
		return malformed(f, HL_M_IPV6_VERSION);
	payload = bswap16(ip->payload_len);
	/* A zero payload length means a jumbogram (or BIG TCP): the frame
	 * length is all we have. */
	if (payload) {
		if (f->off + sizeof(*ip) + payload > f->limit)
			return malformed(f, HL_M_IPV6_TRUNCATED);
		f->limit = f->off + sizeof(*ip) + payload;
	}
	nh = ip->nexthdr;
	f->off += sizeof(*ip);

	for (i = 0; i < HL_MAX_IPV6_EXT; i++) {
		switch (nh) {
		case IPPROTO_HOPOPTS_:
		case IPPROTO_ROUTING_:
		case IPPROTO_DSTOPTS_:
		case IPPROTO_MH_:
		case IPPROTO_HIP_:
		case IPPROTO_SHIM6_:
		case IPPROTO_AH_: {
			struct wire_ipv6_ext *e = header(f, 8);
			__u64 len;

			if (!e)
				return malformed(f, HL_M_IPV6_EXT_TRUNCATED);
			if (nh == IPPROTO_AH_)
				len = ((__u64)e->hdrlen + 2) * 4;
			else
				len = ((__u64)e->hdrlen + 1) * 8;
			if (f->off + len > f->limit)
				return malformed(f, HL_M_IPV6_EXT_TRUNCATED);
			nh = e->nexthdr;
			f->off += len;
			f->ipv6_ext = 1;
			continue;
		}
		case IPPROTO_FRAGMENT_: {
			struct wire_ipv6_frag *fh = header(f, sizeof(*fh));

			if (!fh)
				return malformed(f, HL_M_IPV6_EXT_TRUNCATED);
			f->ipv6_ext = 1;
			if (bswap16(fh->frag_off) & 0xfff8)
				return HL_C_IPV6_FRAG;
			if (bswap16(fh->frag_off) & 1)
				f->first_frag = 1;
			nh = fh->nexthdr;
			f->off += sizeof(*fh);
			continue;
		}
		}
		return parse_l4(f, nh, 1);
	}
	switch (nh) {
	case IPPROTO_HOPOPTS_:
	case IPPROTO_ROUTING_:
	case IPPROTO_DSTOPTS_:
	case IPPROTO_MH_:
	case IPPROTO_HIP_:
	case IPPROTO_SHIM6_:
	case IPPROTO_AH_:
	case IPPROTO_FRAGMENT_:
		return malformed(f, HL_M_IPV6_EXT_TOO_DEEP);
	}
	return parse_l4(f, nh, 1);
}

static __always_inline __u32 classify(struct frame *f)
{
	struct wire_eth *eth = header(f, sizeof(*eth));
	__u16 et;
	int i;

	if (!eth)
		return malformed(f, HL_M_ETH_TRUNCATED);
	et = bswap16(eth->proto);
	f->off = sizeof(*eth);
	for (i = 0; i < HL_MAX_VLAN; i++) {
		struct wire_vlan *tag;

		if (!is_vlan(et))
			break;
		check_ethertype(f, et);
		tag = header(f, sizeof(*tag));
		if (!tag)
			return malformed(f, HL_M_VLAN_TRUNCATED);
		et = bswap16(tag->proto);
		f->off += sizeof(*tag);
		f->vlans++;
	}
	if (is_vlan(et))
		return malformed(f, HL_M_VLAN_TOO_DEEP);
	if (et >= ETH_P_802_3_MIN_)
		check_ethertype(f, et);
	f->ethertype = et;

	switch (et) {
	case ETH_P_IP_:
		return parse_ipv4(f);
	case ETH_P_IPV6_:
		return parse_ipv6(f);
	}
	return HL_C_NON_IP;
}

/* ---- counting and the verdict ------------------------------------------- */

static __always_inline void stat_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += n;
}

static __always_inline void count_ethertype(struct frame *f, int drop)
{
	__u32 key = f->ethertype >= ETH_P_802_3_MIN_ ? f->ethertype : HL_ETHERTYPE_8023;
	struct class_counters *c = bpf_map_lookup_elem(&ethertypes, &key);

	if (!c) {
		struct class_counters zero = {};

		/* Another CPU may insert the same key first (EEXIST): look up
		 * again either way; only a full table leaves c NULL. */
		bpf_map_update_elem(&ethertypes, &key, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&ethertypes, &key);
		if (!c) {
			stat_add(HL_S_ETHERTYPE_FULL, 1);
			return;
		}
	}
	c->packets++;
	c->bytes += f->len;
	c->dropped += drop;
}

/* Which rule drops the frame: an HL_S_DROP_* index, or 0 to pass it. */
static __always_inline __u32 verdict(struct frame *f, __u32 class)
{
	if (class == HL_C_MALFORMED)
		return (drop_classes >> HL_C_MALFORMED) & 1 ? HL_S_DROP_MALFORMED : 0;
	if (f->ethertype_hit)
		return HL_S_DROP_ETHERTYPE;
	if ((drop_classes >> class) & 1)
		return HL_S_DROP_CLASS;
	if (udp_allow_on && (class == HL_C_IPV4_UDP || class == HL_C_IPV6_UDP) &&
	    !bit_set(udp_allow, f->udp_dport))
		return HL_S_DROP_UDP_PORT;
	return 0;
}

SEC("xdp")
int hotlane_xdp(struct xdp_md *ctx)
{
	struct frame f = {
		.data = (void *)(long)ctx->data,
		.data_end = (void *)(long)ctx->data_end,
	};
	struct class_counters *c;
	__u32 class, rule;

	f.len = f.data_end - f.data;
	f.limit = f.len;
	stat_add(HL_S_PACKETS, 1);
	stat_add(HL_S_BYTES, f.len);

	class = classify(&f);
	rule = verdict(&f, class);

	c = bpf_map_lookup_elem(&class_counters, &class);
	if (c) {
		c->packets++;
		c->bytes += f.len;
		c->dropped += rule != 0;
	}
	if (class == HL_C_MALFORMED) {
		__u32 reason = f.reason;
		__u64 *n = bpf_map_lookup_elem(&malformed_reasons, &reason);

		if (n)
			*n += 1;
	} else if (class == HL_C_NON_IP) {
		count_ethertype(&f, rule != 0);
	}
	if (f.vlans == 1)
		stat_add(HL_S_VLAN1, 1);
	else if (f.vlans == 2)
		stat_add(HL_S_VLAN2, 1);
	if (f.ipv4_options)
		stat_add(HL_S_IPV4_OPTIONS, 1);
	if (f.ipv6_ext)
		stat_add(HL_S_IPV6_EXT, 1);
	if (f.first_frag && class != HL_C_MALFORMED)
		stat_add(HL_S_FIRST_FRAG, 1);

	if (rule) {
		stat_add(rule, 1);
		return XDP_DROP;
	}
	return XDP_PASS;
}
