package xdp

import (
	"fmt"
	"strings"
)

// Class is what the BPF program sorts each frame into. Every frame lands in
// exactly one class. The values are the indexes of the BPF class_counters
// map and must match enum hl_xdp_class in bpf/xdp.bpf.c.
type Class int

// The classes, in report order.
const (
	IPv4TCP Class = iota
	IPv4UDP
	IPv4ICMP
	IPv4Frag // a non-first IPv4 fragment: no L4 header to read
	IPv4Other
	IPv6TCP
	IPv6UDP
	IPv6ICMPv6
	IPv6Frag // a non-first IPv6 fragment
	IPv6Other
	NonIP     // neither IPv4 nor IPv6; broken down by EtherType
	Malformed // could not be parsed; broken down by Reason
	numClasses
)

var classNames = [numClasses]string{
	"ipv4/tcp", "ipv4/udp", "ipv4/icmp", "ipv4/frag", "ipv4/other",
	"ipv6/tcp", "ipv6/udp", "ipv6/icmpv6", "ipv6/frag", "ipv6/other",
	"non-ip", "malformed",
}

// Classes returns every class in report order.
func Classes() []Class {
	cs := make([]Class, numClasses)
	for i := range cs {
		cs[i] = Class(i)
	}
	return cs
}

// String is the class's name as reports and --drop spell it: "ipv4/udp".
func (c Class) String() string {
	if c >= 0 && c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// MarshalText makes classes JSON map keys and values by name.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// ClassSet is a set of classes, one bit per class; the BPF program's
// drop_classes has the same layout.
type ClassSet uint32

// Has reports whether c is in the set.
func (s ClassSet) Has(c Class) bool { return s&(1<<c) != 0 }

// Classes lists the members in report order.
func (s ClassSet) Classes() []Class {
	var cs []Class
	for _, c := range Classes() {
		if s.Has(c) {
			cs = append(cs, c)
		}
	}
	return cs
}

// String lists the members by name, comma-separated.
func (s ClassSet) String() string {
	names := make([]string, 0, numClasses)
	for _, c := range s.Classes() {
		names = append(names, c.String())
	}
	return strings.Join(names, ",")
}

func setOf(cs ...Class) ClassSet {
	var s ClassSet
	for _, c := range cs {
		s |= 1 << c
	}
	return s
}

// dropNames are the names --drop and the policy file's "drop" accept: every
// class name, plus shorthands for groups of classes.
var dropNames = func() map[string]ClassSet {
	m := map[string]ClassSet{
		"tcp":    setOf(IPv4TCP, IPv6TCP),
		"udp":    setOf(IPv4UDP, IPv6UDP),
		"icmp":   setOf(IPv4ICMP),
		"icmpv6": setOf(IPv6ICMPv6),
		"frag":   setOf(IPv4Frag, IPv6Frag),
		"other":  setOf(IPv4Other, IPv6Other),
		"ipv4":   setOf(IPv4TCP, IPv4UDP, IPv4ICMP, IPv4Frag, IPv4Other),
		"ipv6":   setOf(IPv6TCP, IPv6UDP, IPv6ICMPv6, IPv6Frag, IPv6Other),
	}
	for _, c := range Classes() {
		m[c.String()] = setOf(c)
	}
	return m
}()

// dropNameList is dropNames' keys in the order help and errors list them;
// errors list only the first ten (the shorthands, non-ip and malformed).
var dropNameList = append([]string{"tcp", "udp", "icmp", "icmpv6", "frag", "other", "ipv4", "ipv6", "non-ip", "malformed"}, classNames[:10]...)

// Reason says why a frame is in class Malformed: the first problem the
// parser found. The values index the BPF malformed_reasons map and must
// match enum hl_xdp_reason in bpf/xdp.bpf.c.
type Reason int

// The reasons, by layer.
const (
	reasonNone Reason = iota
	EthTruncated
	VLANTruncated
	VLANTooDeep
	IPv4Truncated
	IPv4Version
	IPv4IHL
	IPv4Length
	IPv6Truncated
	IPv6Version
	IPv6ExtTruncated
	IPv6ExtTooDeep
	TCPTruncated
	TCPOffset
	UDPTruncated
	ICMPTruncated
	numReasons
)

// MaxVLANTags and MaxIPv6ExtHeaders are how deep the parser walks; deeper
// frames are Malformed (VLANTooDeep, IPv6ExtTooDeep).
const (
	MaxVLANTags       = 2
	MaxIPv6ExtHeaders = 8
)

var reasonInfo = [numReasons]struct{ layer, name, desc string }{
	{"-", "none", "not malformed"},
	{"ethernet", "truncated", "shorter than the 14-byte Ethernet header"},
	{"vlan", "truncated", "ends inside a VLAN tag"},
	{"vlan", "too-deep", "more than 2 VLAN tags"},
	{"ipv4", "truncated", "ends inside the IPv4 header or before its total length"},
	{"ipv4", "bad-version", "IPv4 EtherType but the version field is not 4"},
	{"ipv4", "bad-ihl", "header length (IHL) below 5"},
	{"ipv4", "bad-length", "total length shorter than the header"},
	{"ipv6", "truncated", "ends inside the IPv6 header or before its payload length"},
	{"ipv6", "bad-version", "IPv6 EtherType but the version field is not 6"},
	{"ipv6-ext", "truncated", "ends inside an extension header"},
	{"ipv6-ext", "too-deep", "more than 8 extension headers"},
	{"tcp", "truncated", "ends inside the TCP header"},
	{"tcp", "bad-offset", "TCP data offset below 5"},
	{"udp", "truncated", "ends inside the UDP header"},
	{"icmp", "truncated", "ends inside the 8-byte ICMP/ICMPv6 header"},
}

// Reasons returns every reason a frame can be malformed, by layer.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := reasonNone + 1; r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// Layer is the protocol layer where the problem is: "ipv4", "ipv6-ext", ….
func (r Reason) Layer() string {
	if r >= 0 && r < numReasons {
		return reasonInfo[r].layer
	}
	return "?"
}

// Description says what is wrong, for people.
func (r Reason) Description() string {
	if r >= 0 && r < numReasons {
		return reasonInfo[r].desc
	}
	return "unknown reason"
}

// String is "layer/name": "ipv4/bad-ihl".
func (r Reason) String() string {
	if r > reasonNone && r < numReasons {
		return reasonInfo[r].layer + "/" + reasonInfo[r].name
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// MarshalText makes reasons JSON map keys by name.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// EtherType8023 is the key under which the EtherType table counts 802.3
// frames, whose type/length field holds a length (below 0x0600).
const EtherType8023 = 0

// etherTypeNames names the EtherTypes people meet; reports show the name
// next to the number, and --drop-ethertype accepts the lower-case name.
var etherTypeNames = map[uint16]string{
	0x0800: "IPv4",
	0x0806: "ARP",
	0x0842: "Wake-on-LAN",
	0x22f0: "AVTP",
	0x22f3: "TRILL",
	0x6003: "DECnet",
	0x8035: "RARP",
	0x809b: "AppleTalk",
	0x80f3: "AARP",
	0x8100: "802.1Q",
	0x8137: "IPX",
	0x86dd: "IPv6",
	0x8808: "Ethernet-flow-control",
	0x8809: "Slow-protocols",
	0x8847: "MPLS",
	0x8848: "MPLS-multicast",
	0x8863: "PPPoE-discovery",
	0x8864: "PPPoE-session",
	0x887b: "HomePlug",
	0x888e: "EAPOL",
	0x8892: "PROFINET",
	0x889a: "HyperSCSI",
	0x88a2: "ATAoE",
	0x88a4: "EtherCAT",
	0x88a8: "802.1ad",
	0x88b5: "Local-experimental-1",
	0x88b6: "Local-experimental-2",
	0x88cc: "LLDP",
	0x88e1: "HomePlug-AV",
	0x88e3: "MRP",
	0x88e5: "MACsec",
	0x88e7: "PBB",
	0x88f7: "PTP",
	0x8902: "CFM",
	0x8906: "FCoE",
	0x8914: "FIP",
	0x8915: "RoCE",
	0x892f: "HSR",
	0x9000: "Loopback",
	0x9100: "QinQ",
}

// EtherTypeName names an EtherType ("ARP"), "802.3" for EtherType8023, or
// "" when it has no well-known name.
func EtherTypeName(t uint16) string {
	if t == EtherType8023 {
		return "802.3"
	}
	return etherTypeNames[t]
}
