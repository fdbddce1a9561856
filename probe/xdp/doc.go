// Package xdp is `hotlane probe xdp`: an XDP program that counts every
// frame an interface receives, per protocol class and per CPU, and applies
// a small drop policy; plus the Go side that loads it, attaches it,
// reports on it, and explains what went wrong when it cannot.
//
// # Classes
//
// Each frame is counted once, packets and bytes (from the Ethernet header
// on), in one Class: IPv4 or IPv6 × TCP, UDP, ICMP (ICMPv6 for IPv6),
// non-first fragment, other protocol; non-IP, broken down by EtherType
// (802.3 length frames under EtherType8023); or malformed, broken down by
// Reason. The parser walks up to MaxVLANTags VLAN tags (802.1Q, 802.1ad and
// 0x9100 QinQ) and up to MaxIPv6ExtHeaders IPv6 extension headers
// (hop-by-hop, routing, destination options, fragment, AH, mobility, HIP,
// shim6). Non-first fragments have no L4 header and are counted as
// fragments. NICs with VLAN offload strip the outer tag before XDP runs.
//
// # The rule for malformed frames
//
// A frame the parser cannot read to the end of the headers its class needs
// is counted in class Malformed, with the first problem found (layer and
// Reason), and is passed (XDP_PASS), never dropped by the policy. This
// covers frames cut short (a VLAN tag, IP header, extension header or
// TCP/UDP/ICMP header ending early, or an IP length field claiming more
// bytes than the frame holds), invalid fields (IP version, IPv4 IHL below 5,
// total length below the header, TCP data offset below 5) and frames nested
// deeper than the parser walks. Every header must lie inside the IP packet's
// own length, so Ethernet padding is never taken for a header. The kernel's
// stack checks these frames again and discards what it cannot use, so
// passing them hides nothing and loses nothing. A policy meant to hold
// against hostile traffic should add `--drop malformed`, which drops them
// all: otherwise an IPv6 packet with nine extension headers, for one, would
// reach the stack unfiltered.
//
// # Policy
//
// See Policy: drop classes (--drop icmp,icmpv6), allow-list UDP destination
// ports (--allow-udp-ports 53,123: UDP to other ports is dropped), drop
// EtherTypes at any VLAN layer (--drop-ethertype 0x88cc), or the same in a
// JSON file (ParsePolicy). The policy is written into the program's
// read-only data before it is loaded.
//
// # Attaching
//
// Attach uses a bpf_link, so the kernel detaches the program when hotlane
// exits, however it exits. Driver mode is tried first, generic mode if the
// driver has no native XDP (ModeAuto). An XDP program already on the
// interface, whether held by a bpf_link or attached through netlink, is
// left alone with ErrBusy unless Replace is set, which detaches it for good.
// QueryXDP reads what is attached over rtnetlink. Generic mode runs after
// the kernel has built an skb, possibly after GRO merged TCP segments, so
// it can count fewer, larger TCP packets than driver mode would.
//
// Counters are plain per-CPU maps read from user space: nothing is sampled
// and there is no ring buffer, so no event can be lost. The only bounded
// table is the EtherType breakdown (EtherTypeSlots types); frames of further
// types are still counted as non-IP and the miss is reported as a loss.
package xdp
