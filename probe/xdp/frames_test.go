package xdp

import (
	"encoding/binary"
	"slices"
)

// Frame builders for the tests: plain byte slices, no packet library.
// Lengths and next-header fields are filled in; checksums are not (the
// program does not check them, and BPF_PROG_RUN frames reach no stack).

var (
	macDst = []byte{0x02, 0, 0, 0, 0, 0x02}
	macSrc = []byte{0x02, 0, 0, 0, 0, 0x01}
)

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

// ether builds an Ethernet header: each of tags adds a VLAN tag with that
// tag protocol (0x8100, 0x88a8, 0x9100), then etherType, then payload.
func ether(etherType uint16, payload []byte, tags ...uint16) []byte {
	b := cat(macDst, macSrc)
	for i, tpid := range tags {
		b = cat(b, be16(tpid), be16(uint16(100+i))) // TCI: VLAN 100, 101
	}
	return cat(b, be16(etherType), payload)
}

// ipv4 builds an IPv4 header with options (a multiple of 4 bytes) and the
// total length set for payload.
func ipv4(proto byte, payload []byte, options ...byte) []byte {
	ihl := (20 + len(options)) / 4
	h := []byte{
		0x40 | byte(ihl), 0, 0, 0, // version, IHL, TOS, total length
		0x12, 0x34, 0, 0, // id, flags + fragment offset
		64, proto, 0, 0, // TTL, protocol, checksum
		192, 0, 2, 1, // source 192.0.2.1
		192, 0, 2, 2, // destination 192.0.2.2
	}
	h = cat(h, options)
	binary.BigEndian.PutUint16(h[2:4], uint16(len(h)+len(payload)))
	return cat(h, payload)
}

// ipv4Frag sets the fragment fields of an IPv4 packet built by ipv4:
// offset in 8-byte units and the more-fragments flag.
func ipv4Frag(pkt []byte, offset uint16, more bool) []byte {
	pkt = slices.Clone(pkt)
	v := offset & 0x1fff
	if more {
		v |= 0x2000
	}
	binary.BigEndian.PutUint16(pkt[6:8], v)
	return pkt
}

// ipv6 builds an IPv6 header with the payload length set.
func ipv6(next byte, payload []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:6], uint16(len(payload)))
	h[6] = next
	h[7] = 64
	copy(h[8:24], []byte{0x20, 0x01, 0x0d, 0xb8, 15: 1})  // 2001:db8::1
	copy(h[24:40], []byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}) // 2001:db8::2
	return cat(h, payload)
}

// ext6 builds a hop-by-hop, routing, destination options (or other
// 8-octet-unit) extension header of 8*(units+1) bytes, padded with PadN.
func ext6(next byte, units byte, payload []byte) []byte {
	h := make([]byte, 8*(int(units)+1))
	h[0], h[1] = next, units
	h[2], h[3] = 1, byte(len(h)-4) // PadN option covering the rest
	return cat(h, payload)
}

// ah6 builds an Authentication Header of 4*(units+2) bytes.
func ah6(next byte, units byte, payload []byte) []byte {
	h := make([]byte, 4*(int(units)+2))
	h[0], h[1] = next, units
	return cat(h, payload)
}

// frag6 builds an IPv6 fragment header.
func frag6(next byte, offset uint16, more bool, payload []byte) []byte {
	v := offset << 3
	if more {
		v |= 1
	}
	return cat([]byte{next, 0}, be16(v), []byte{0, 0, 0x56, 0x78}, payload)
}

func tcp(dport uint16, payload []byte) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:2], 40000)
	binary.BigEndian.PutUint16(h[2:4], dport)
	h[12] = 5 << 4
	h[13] = 0x02 // SYN
	return cat(h, payload)
}

func udp(dport uint16, payload []byte) []byte {
	h := make([]byte, 8)
	binary.BigEndian.PutUint16(h[0:2], 40000)
	binary.BigEndian.PutUint16(h[2:4], dport)
	binary.BigEndian.PutUint16(h[4:6], uint16(8+len(payload)))
	return cat(h, payload)
}

// icmpEcho is an ICMP (type 8) or ICMPv6 (type 128) echo request.
func icmpEcho(typ byte) []byte {
	return []byte{typ, 0, 0, 0, 0x12, 0x34, 0, 1, 'h', 'i'}
}

// pad extends a frame to the 60-byte Ethernet minimum, as a NIC would.
func pad(f []byte) []byte {
	if len(f) < 60 {
		f = cat(f, make([]byte, 60-len(f)))
	}
	return f
}

// IP protocol numbers used in tests.
const (
	protoICMP     = 1
	protoTCP      = 6
	protoUDP      = 17
	protoRouting  = 43
	protoFragment = 44
	protoGRE      = 47
	protoESP      = 50
	protoAH       = 51
	protoICMPv6   = 58
	protoNoNext   = 59
	protoDstOpts  = 60
	protoHopOpts  = 0
)

// reference is the classification rule of bpf/xdp.bpf.c written again in
// Go, as plainly as possible, for the fuzz test to hold the program to.
func reference(f []byte) (c Class, r Reason, dport uint16, vlans int) {
	if len(f) < 14 {
		return Malformed, EthTruncated, 0, 0
	}
	et := binary.BigEndian.Uint16(f[12:14])
	off := 14
	isVLAN := func(t uint16) bool { return t == 0x8100 || t == 0x88a8 || t == 0x9100 }
	for vlans < MaxVLANTags && isVLAN(et) {
		if off+4 > len(f) {
			return Malformed, VLANTruncated, 0, vlans
		}
		et = binary.BigEndian.Uint16(f[off+2 : off+4])
		off += 4
		vlans++
	}
	if isVLAN(et) {
		return Malformed, VLANTooDeep, 0, vlans
	}
	limit := len(f)
	l4 := func(proto byte, v6 bool) (Class, Reason, uint16) {
		need := func(n int) bool { return off+n <= limit }
		switch {
		case proto == protoTCP:
			if !need(20) {
				return Malformed, TCPTruncated, 0
			}
			doff := int(f[off+12] >> 4)
			if doff < 5 {
				return Malformed, TCPOffset, 0
			}
			if !need(doff * 4) {
				return Malformed, TCPTruncated, 0
			}
			if v6 {
				return IPv6TCP, 0, 0
			}
			return IPv4TCP, 0, 0
		case proto == protoUDP:
			if !need(8) {
				return Malformed, UDPTruncated, 0
			}
			p := binary.BigEndian.Uint16(f[off+2 : off+4])
			if v6 {
				return IPv6UDP, 0, p
			}
			return IPv4UDP, 0, p
		case proto == protoICMP && !v6:
			if !need(8) {
				return Malformed, ICMPTruncated, 0
			}
			return IPv4ICMP, 0, 0
		case proto == protoICMPv6 && v6:
			if !need(8) {
				return Malformed, ICMPTruncated, 0
			}
			return IPv6ICMPv6, 0, 0
		case v6:
			return IPv6Other, 0, 0
		}
		return IPv4Other, 0, 0
	}
	switch et {
	case 0x0800:
		if off+20 > limit {
			return Malformed, IPv4Truncated, 0, vlans
		}
		if f[off]>>4 != 4 {
			return Malformed, IPv4Version, 0, vlans
		}
		ihl := int(f[off]&0xf) * 4
		if ihl < 20 {
			return Malformed, IPv4IHL, 0, vlans
		}
		tot := int(binary.BigEndian.Uint16(f[off+2 : off+4]))
		if tot < ihl {
			return Malformed, IPv4Length, 0, vlans
		}
		if off+ihl > limit || off+tot > limit {
			return Malformed, IPv4Truncated, 0, vlans
		}
		limit = off + tot
		if binary.BigEndian.Uint16(f[off+6:off+8])&0x1fff != 0 {
			return IPv4Frag, 0, 0, vlans
		}
		proto := f[off+9]
		off += ihl
		c, r, p := l4(proto, false)
		return c, r, p, vlans
	case 0x86dd:
		if off+40 > limit {
			return Malformed, IPv6Truncated, 0, vlans
		}
		if f[off]>>4 != 6 {
			return Malformed, IPv6Version, 0, vlans
		}
		if pl := int(binary.BigEndian.Uint16(f[off+4 : off+6])); pl != 0 {
			if off+40+pl > limit {
				return Malformed, IPv6Truncated, 0, vlans
			}
			limit = off + 40 + pl
		}
		nh := f[off+6]
		off += 40
		for i := 0; ; i++ {
			var size int
			switch nh {
			case protoHopOpts, protoRouting, protoDstOpts, 135, 139, 140, protoAH, protoFragment:
			default:
				c, r, p := l4(nh, true)
				return c, r, p, vlans
			}
			if i == MaxIPv6ExtHeaders {
				return Malformed, IPv6ExtTooDeep, 0, vlans
			}
			if off+8 > limit {
				return Malformed, IPv6ExtTruncated, 0, vlans
			}
			switch nh {
			case protoFragment:
				if binary.BigEndian.Uint16(f[off+2:off+4])&0xfff8 != 0 {
					return IPv6Frag, 0, 0, vlans
				}
				size = 8
			case protoAH:
				size = (int(f[off+1]) + 2) * 4
			default:
				size = (int(f[off+1]) + 1) * 8
			}
			if off+size > limit {
				return Malformed, IPv6ExtTruncated, 0, vlans
			}
			nh = f[off]
			off += size
		}
	}
	return NonIP, 0, 0, vlans
}
