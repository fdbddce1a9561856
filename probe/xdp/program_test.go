package xdp

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// requireRoot skips privileged tests when not root, and with -short
// (`make unit` runs what needs neither root nor qemu).
func requireRoot(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("loads XDP programs into the running kernel; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to load XDP programs into the running kernel")
	}
}

func loadProgram(t testing.TB, pol Policy) *Program {
	t.Helper()
	requireRoot(t)
	p, err := Load(pol)
	if err != nil {
		t.Fatalf("Load(%v): %v", pol, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// outcome is what one frame did to the program's counters.
type outcome struct {
	action Action
	class  Class
	reason Reason // for Malformed
	delta  *Counters
}

// runFrame runs the program once on frame and checks the bookkeeping that
// must hold for any frame: the total grows by one frame of its length,
// exactly one class grows by the same, a malformed frame has exactly one
// reason, and the drop counters agree with the verdict.
func runFrame(t testing.TB, p *Program, frame []byte) outcome {
	t.Helper()
	before, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	action, err := p.Test(frame)
	if err != nil {
		t.Fatal(err)
	}
	after, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	o := outcome{action: action, class: -1, delta: d}
	n := uint64(len(frame))
	if d.Total.Packets != 1 || d.Total.Bytes != n {
		t.Errorf("total grew by %d packets, %d bytes; want 1 packet, %d bytes", d.Total.Packets, d.Total.Bytes, n)
	}
	for _, c := range Classes() {
		switch got := d.Classes[c]; {
		case got == Count{}:
		case got.Packets == 1 && got.Bytes == n && o.class < 0:
			o.class = c
		default:
			t.Errorf("class %s grew by %+v", c, got)
		}
	}
	if o.class < 0 {
		t.Fatalf("no class counted the frame")
	}
	var reasons []Reason
	for r, k := range d.Malformed {
		if k != 0 {
			reasons = append(reasons, r)
			if k != 1 {
				t.Errorf("malformed reason %s grew by %d", r, k)
			}
		}
	}
	switch {
	case o.class == Malformed && len(reasons) == 1:
		o.reason = reasons[0]
	case o.class == Malformed:
		t.Errorf("malformed frame with reasons %v, want exactly one", reasons)
	case len(reasons) > 0:
		t.Errorf("frame of class %s also counted as malformed %v", o.class, reasons)
	}
	if action != Pass && action != Drop {
		t.Errorf("action %v, want XDP_PASS or XDP_DROP", action)
	}
	wantDropped := uint64(0)
	if action == Drop {
		wantDropped = 1
	}
	if d.Classes[o.class].Dropped != wantDropped || d.Total.Dropped != wantDropped || d.Dropped() != wantDropped {
		t.Errorf("verdict %v but class dropped +%d, total dropped +%d, rule drops +%d",
			action, d.Classes[o.class].Dropped, d.Total.Dropped, d.Dropped())
	}
	if o.class == NonIP {
		var grown uint64
		for _, c := range d.EtherTypes {
			grown += c.Packets
		}
		if grown+d.EtherTypeTableFull != 1 {
			t.Errorf("non-IP frame: EtherType table grew by %d, table-full by %d", grown, d.EtherTypeTableFull)
		}
	}
	return o
}

type frameCase struct {
	name   string
	frame  []byte
	class  Class
	reason Reason // for Malformed
}

// classificationCases cover every class and every malformed reason that a
// BPF_PROG_RUN frame can reach (the kernel refuses frames shorter than an
// Ethernet header, so EthTruncated is left to the fuzz test's reference).
func classificationCases() []frameCase {
	bigOpts := make([]byte, 40) // IHL 15: the largest IPv4 header
	bigOpts[0] = 1              // NOP options
	return []frameCase{
		{"ipv4 tcp", pad(ether(0x0800, ipv4(protoTCP, tcp(80, nil)))), IPv4TCP, 0},
		{"ipv4 udp", pad(ether(0x0800, ipv4(protoUDP, udp(53, nil)))), IPv4UDP, 0},
		{"ipv4 icmp", pad(ether(0x0800, ipv4(protoICMP, icmpEcho(8)))), IPv4ICMP, 0},
		{"ipv4 gre is other", pad(ether(0x0800, ipv4(protoGRE, make([]byte, 8)))), IPv4Other, 0},
		{"ipv4 carrying icmpv6 is other", pad(ether(0x0800, ipv4(protoICMPv6, icmpEcho(128)))), IPv4Other, 0},
		{"ipv4 with options", ether(0x0800, ipv4(protoUDP, udp(53, nil), 1, 1, 1, 0)), IPv4UDP, 0},
		{"ipv4 IHL 15", ether(0x0800, ipv4(protoTCP, tcp(80, nil), bigOpts...)), IPv4TCP, 0},
		{"ipv4 first fragment", ether(0x0800, ipv4Frag(ipv4(protoUDP, udp(53, make([]byte, 16))), 0, true)), IPv4UDP, 0},
		{"ipv4 non-first fragment", ether(0x0800, ipv4Frag(ipv4(protoUDP, make([]byte, 16)), 3, false)), IPv4Frag, 0},
		{"ipv4 non-first fragment too short for udp", pad(ether(0x0800, ipv4Frag(ipv4(protoUDP, []byte{1, 2}), 1, true))), IPv4Frag, 0},
		{"ipv6 tcp", ether(0x86dd, ipv6(protoTCP, tcp(443, nil))), IPv6TCP, 0},
		{"ipv6 udp", ether(0x86dd, ipv6(protoUDP, udp(53, nil))), IPv6UDP, 0},
		{"ipv6 icmpv6", ether(0x86dd, ipv6(protoICMPv6, icmpEcho(128))), IPv6ICMPv6, 0},
		{"ipv6 carrying icmp is other", ether(0x86dd, ipv6(protoICMP, icmpEcho(8))), IPv6Other, 0},
		{"ipv6 esp is other", ether(0x86dd, ipv6(protoESP, make([]byte, 16))), IPv6Other, 0},
		{"ipv6 no next header", ether(0x86dd, ipv6(protoNoNext, nil)), IPv6Other, 0},
		{"ipv6 hop-by-hop, dstopts, fragment (first), udp", ether(0x86dd, ipv6(protoHopOpts,
			ext6(protoDstOpts, 0, ext6(protoFragment, 1, frag6(protoUDP, 0, true, udp(53, nil)))))), IPv6UDP, 0},
		{"ipv6 routing then tcp", ether(0x86dd, ipv6(protoRouting, ext6(protoTCP, 2, tcp(22, nil)))), IPv6TCP, 0},
		{"ipv6 AH then icmpv6", ether(0x86dd, ipv6(protoAH, ah6(protoICMPv6, 4, icmpEcho(128)))), IPv6ICMPv6, 0},
		{"ipv6 non-first fragment", ether(0x86dd, ipv6(protoHopOpts, ext6(protoFragment, 0, frag6(protoUDP, 2, false, make([]byte, 16))))), IPv6Frag, 0},
		{"ipv6 atomic fragment", ether(0x86dd, ipv6(protoFragment, frag6(protoICMPv6, 0, false, icmpEcho(128)))), IPv6ICMPv6, 0},
		{"ipv6 eight extension headers", ether(0x86dd, ipv6(protoHopOpts, nestExt(8, protoUDP, udp(53, nil)))), IPv6UDP, 0},
		{"ipv6 jumbo payload length 0", ether(0x86dd, zeroPayloadLen(ipv6(protoUDP, udp(53, nil)))), IPv6UDP, 0},
		{"arp", pad(ether(0x0806, make([]byte, 28))), NonIP, 0},
		{"lldp", pad(ether(0x88cc, make([]byte, 20))), NonIP, 0},
		{"802.3 length frame", pad(ether(0x0026, make([]byte, 38))), NonIP, 0},
		{"802.1Q ipv4 udp", pad(ether(0x0800, ipv4(protoUDP, udp(53, nil)), 0x8100)), IPv4UDP, 0},
		{"802.1Q arp", pad(ether(0x0806, make([]byte, 28), 0x8100)), NonIP, 0},
		{"QinQ 802.1ad+802.1Q ipv6 tcp", ether(0x86dd, ipv6(protoTCP, tcp(80, nil)), 0x88a8, 0x8100), IPv6TCP, 0},
		{"QinQ 0x9100+802.1Q ipv4 icmp", pad(ether(0x0800, ipv4(protoICMP, icmpEcho(8)), 0x9100, 0x8100)), IPv4ICMP, 0},

		// Malformed, one per reason; lengths are consistent unless the case
		// is about them, and Ethernet padding must not be taken for data.
		{"vlan tag cut short", cat(macDst, macSrc, be16(0x8100), []byte{0}), Malformed, VLANTruncated},
		{"three vlan tags", pad(ether(0x0800, ipv4(protoUDP, udp(53, nil)), 0x88a8, 0x8100, 0x8100)), Malformed, VLANTooDeep},
		{"ipv4 header cut short", ether(0x0800, ipv4(protoUDP, udp(53, nil))[:19]), Malformed, IPv4Truncated},
		{"ipv4 total length beyond the frame", ether(0x0800, ipv4(protoUDP, udp(53, nil))[:27]), Malformed, IPv4Truncated},
		{"ipv4 options beyond the frame", ether(0x0800, setTotLen(setIHL(ipv4(protoUDP, nil), 6), 24)), Malformed, IPv4Truncated},
		{"ipv4 version 6", pad(ether(0x0800, setVersion(ipv4(protoUDP, udp(53, nil)), 6))), Malformed, IPv4Version},
		{"ipv4 IHL 4", pad(ether(0x0800, setIHL(ipv4(protoUDP, udp(53, nil)), 4))), Malformed, IPv4IHL},
		{"ipv4 IHL 0", pad(ether(0x0800, setIHL(ipv4(protoUDP, udp(53, nil)), 0))), Malformed, IPv4IHL},
		{"ipv4 total length below header", pad(ether(0x0800, setTotLen(ipv4(protoUDP, udp(53, nil)), 19))), Malformed, IPv4Length},
		{"ipv6 header cut short", ether(0x86dd, ipv6(protoUDP, nil)[:39]), Malformed, IPv6Truncated},
		{"ipv6 payload length beyond the frame", ether(0x86dd, ipv6(protoUDP, udp(53, nil))[:47]), Malformed, IPv6Truncated},
		{"ipv6 version 4", ether(0x86dd, setVersion(ipv6(protoUDP, udp(53, nil)), 4)), Malformed, IPv6Version},
		{"ipv6 hop-by-hop longer than the payload", ether(0x86dd, shortPayload(ipv6(protoHopOpts, ext6(protoUDP, 1, udp(53, nil))), 8)), Malformed, IPv6ExtTruncated},
		{"ipv6 extension header cut short", ether(0x86dd, ipv6(protoHopOpts, []byte{protoUDP, 0, 1, 2})), Malformed, IPv6ExtTruncated},
		{"ipv6 fragment header cut short", ether(0x86dd, ipv6(protoFragment, []byte{protoUDP, 0, 0, 0})), Malformed, IPv6ExtTruncated},
		{"ipv6 nine extension headers", ether(0x86dd, ipv6(protoHopOpts, nestExt(9, protoUDP, udp(53, nil)))), Malformed, IPv6ExtTooDeep},
		{"tcp header cut short", pad(ether(0x0800, ipv4(protoTCP, tcp(80, nil)[:12]))), Malformed, TCPTruncated},
		{"tcp options beyond the packet", pad(ether(0x0800, ipv4(protoTCP, setDoff(tcp(80, nil), 15)))), Malformed, TCPTruncated},
		{"tcp data offset 4", pad(ether(0x0800, ipv4(protoTCP, setDoff(tcp(80, nil), 4)))), Malformed, TCPOffset},
		{"ipv6 tcp cut short", ether(0x86dd, ipv6(protoTCP, tcp(80, nil)[:19])), Malformed, TCPTruncated},
		{"udp header cut short", pad(ether(0x0800, ipv4(protoUDP, udp(53, nil)[:4]))), Malformed, UDPTruncated},
		{"ipv6 udp after extension header cut short", ether(0x86dd, ipv6(protoDstOpts, ext6(protoUDP, 0, udp(53, nil)[:7]))), Malformed, UDPTruncated},
		{"icmp header cut short", pad(ether(0x0800, ipv4(protoICMP, icmpEcho(8)[:4]))), Malformed, ICMPTruncated},
		{"icmpv6 header cut short", ether(0x86dd, ipv6(protoICMPv6, icmpEcho(128)[:7])), Malformed, ICMPTruncated},
		{"ipv4 first fragment too short for tcp", pad(ether(0x0800, ipv4Frag(ipv4(protoTCP, tcp(80, nil)[:8]), 0, true))), Malformed, TCPTruncated},
	}
}

func setVersion(pkt []byte, v byte) []byte {
	pkt = cat(pkt)
	pkt[0] = v<<4 | pkt[0]&0xf
	return pkt
}

func setIHL(pkt []byte, ihl byte) []byte {
	pkt = cat(pkt)
	pkt[0] = pkt[0]&0xf0 | ihl
	return pkt
}

func setTotLen(pkt []byte, n uint16) []byte {
	pkt = cat(pkt)
	copy(pkt[2:4], be16(n))
	return pkt
}

func setDoff(seg []byte, doff byte) []byte {
	seg = cat(seg)
	seg[12] = doff << 4
	return seg
}

func zeroPayloadLen(pkt []byte) []byte {
	pkt = cat(pkt)
	pkt[4], pkt[5] = 0, 0
	return pkt
}

// shortPayload sets an IPv6 packet's payload length to n, leaving the
// bytes after it in the frame (as padding).
func shortPayload(pkt []byte, n uint16) []byte {
	pkt = cat(pkt)
	copy(pkt[4:6], be16(n))
	return pkt
}

// nestExt chains n destination-options headers (the first announced by the
// IPv6 header as hop-by-hop) in front of payload of protocol last.
func nestExt(n int, last byte, payload []byte) []byte {
	b := payload
	next := last
	for range n {
		b = ext6(next, 0, b)
		next = protoDstOpts
	}
	return b
}

func TestClassify(t *testing.T) {
	p := loadProgram(t, Policy{})
	seen := map[Class]bool{}
	seenReason := map[Reason]bool{}
	for _, tc := range classificationCases() {
		t.Run(tc.name, func(t *testing.T) {
			if c, r, _, _ := reference(tc.frame); c != tc.class || r != tc.reason {
				t.Errorf("the Go reference says %s %v; the case says %s %v", c, r, tc.class, tc.reason)
			}
			o := runFrame(t, p, tc.frame)
			if o.class != tc.class || o.reason != tc.reason {
				t.Errorf("classified %s (reason %v), want %s (reason %v)", o.class, o.reason, tc.class, tc.reason)
			}
			if o.action != Pass {
				t.Errorf("a policy that drops nothing returned %v", o.action)
			}
			seen[o.class] = true
			seenReason[o.reason] = true
		})
	}
	for _, c := range Classes() {
		if !seen[c] {
			t.Errorf("no case reaches class %s", c)
		}
	}
	for _, r := range Reasons() {
		if !seenReason[r] && r != EthTruncated {
			t.Errorf("no case reaches malformed reason %s", r)
		}
	}
}

// TestTruncatedEverywhere cuts well-formed frames at every length from the
// Ethernet header on: each cut must be counted as malformed at the layer
// whose length it breaks (the VLAN tag, or the IP header's length field),
// never as a smaller packet of some class.
func TestTruncatedEverywhere(t *testing.T) {
	p := loadProgram(t, Policy{})
	frames := map[string][]byte{
		"ipv4 tcp":      ether(0x0800, ipv4(protoTCP, tcp(80, []byte("payload")))),
		"ipv4 options":  ether(0x0800, ipv4(protoUDP, udp(53, nil), 1, 1, 1, 0)),
		"qinq ipv4 udp": ether(0x0800, ipv4(protoUDP, udp(53, nil)), 0x88a8, 0x8100),
		"vlan ipv6 ext": ether(0x86dd, ipv6(protoHopOpts, ext6(protoFragment, 0, frag6(protoUDP, 0, true, udp(53, nil)))), 0x8100),
		"ipv6 icmpv6":   ether(0x86dd, ipv6(protoICMPv6, icmpEcho(128))),
	}
	for name, full := range frames {
		tags := 0
		for off := 12; ; off += 4 {
			if t := be16u(full[off:]); t != 0x8100 && t != 0x88a8 {
				break
			}
			tags++
		}
		for n := 14; n < len(full); n++ {
			o := runFrame(t, p, full[:n])
			want := IPv4Truncated
			switch {
			case tags > 0 && n < 14+4*tags:
				want = VLANTruncated
			case be16u(full[12+4*tags:]) == 0x86dd:
				want = IPv6Truncated
			}
			if o.class != Malformed || o.reason != want {
				t.Errorf("%s cut to %d of %d bytes: %s %v, want malformed %v", name, n, len(full), o.class, o.reason, want)
			}
			if o.action != Pass {
				t.Errorf("%s cut to %d bytes: %v; malformed frames pass", name, n, o.action)
			}
		}
	}
}

func be16u(b []byte) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }

func TestPolicyDecisions(t *testing.T) {
	pol := Policy{
		Drop:           setOf(IPv4ICMP),
		AllowUDPPorts:  []PortRange{{53, 53}, {5000, 5010}},
		DropEtherTypes: []uint16{0x88cc},
	}
	p := loadProgram(t, pol)
	udp4 := func(port uint16, tags ...uint16) []byte {
		return pad(ether(0x0800, ipv4(protoUDP, udp(port, nil)), tags...))
	}
	udp6 := func(port uint16) []byte { return ether(0x86dd, ipv6(protoUDP, udp(port, nil))) }
	cases := []struct {
		name  string
		frame []byte
		want  Action
		rule  *uint64 // which drop counter, for drops
	}{
		{"icmp dropped", pad(ether(0x0800, ipv4(protoICMP, icmpEcho(8)))), Drop, nil},
		{"icmp in 802.1Q dropped", pad(ether(0x0800, ipv4(protoICMP, icmpEcho(8)), 0x8100)), Drop, nil},
		{"icmpv6 passes (only icmp dropped)", ether(0x86dd, ipv6(protoICMPv6, icmpEcho(128))), Pass, nil},
		{"tcp passes", pad(ether(0x0800, ipv4(protoTCP, tcp(54, nil)))), Pass, nil},
		{"udp 53 allowed", udp4(53), Pass, nil},
		{"udp 5000 allowed (range start)", udp4(5000), Pass, nil},
		{"udp 5010 allowed (range end)", udp4(5010), Pass, nil},
		{"udp 5011 dropped", udp4(5011), Drop, nil},
		{"udp 54 dropped", udp4(54), Drop, nil},
		{"udp 53 in QinQ allowed", udp4(53, 0x88a8, 0x8100), Pass, nil},
		{"udp 123 in QinQ dropped", udp4(123, 0x88a8, 0x8100), Drop, nil},
		{"ipv6 udp 53 allowed", udp6(53), Pass, nil},
		{"ipv6 udp 123 dropped", udp6(123), Drop, nil},
		{"ipv6 udp 5005 after extension headers allowed", ether(0x86dd, ipv6(protoHopOpts, ext6(protoUDP, 0, udp(5005, nil)))), Pass, nil},
		{"ipv4 udp first fragment to 54 dropped", ether(0x0800, ipv4Frag(ipv4(protoUDP, udp(54, make([]byte, 16))), 0, true)), Drop, nil},
		{"ipv4 udp non-first fragment passes", ether(0x0800, ipv4Frag(ipv4(protoUDP, make([]byte, 16)), 3, false)), Pass, nil},
		{"lldp dropped", pad(ether(0x88cc, make([]byte, 20))), Drop, nil},
		{"lldp in 802.1Q dropped", pad(ether(0x88cc, make([]byte, 20), 0x8100)), Drop, nil},
		{"arp passes", pad(ether(0x0806, make([]byte, 28))), Pass, nil},
		{"truncated icmp passes (malformed)", pad(ether(0x0800, ipv4(protoICMP, icmpEcho(8)[:4]))), Pass, nil},
		{"truncated udp passes (malformed)", pad(ether(0x0800, ipv4(protoUDP, udp(54, nil)[:4]))), Pass, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := runFrame(t, p, tc.frame)
			if o.action != tc.want {
				t.Errorf("%v, want %v (class %s)", o.action, tc.want, o.class)
			}
		})
	}

	t.Run("drop rules counted", func(t *testing.T) {
		check := func(frame []byte, rule func(*Counters) uint64, what string) {
			t.Helper()
			o := runFrame(t, p, frame)
			if rule(o.delta) != 1 {
				t.Errorf("%s: the %s drop counter did not grow: %+v", o.class, what, o.delta)
			}
		}
		check(pad(ether(0x0800, ipv4(protoICMP, icmpEcho(8)))), func(c *Counters) uint64 { return c.DroppedClass }, "class")
		check(udp4(99), func(c *Counters) uint64 { return c.DroppedUDPPort }, "UDP port")
		check(pad(ether(0x88cc, make([]byte, 20))), func(c *Counters) uint64 { return c.DroppedEtherType }, "EtherType")
	})
}

func TestPolicyDropMalformedAndVLAN(t *testing.T) {
	t.Run("drop malformed", func(t *testing.T) {
		p := loadProgram(t, Policy{Drop: setOf(Malformed)})
		for _, tc := range classificationCases() {
			o := runFrame(t, p, tc.frame)
			want := Pass
			if tc.class == Malformed {
				want = Drop
				if o.delta.DroppedMalformed != 1 {
					t.Errorf("%s: dropped but not counted as a malformed drop", tc.name)
				}
			}
			if o.action != want {
				t.Errorf("%s (%s): %v, want %v", tc.name, o.class, o.action, want)
			}
		}
	})
	t.Run("drop EtherType 0x8100 at any VLAN layer", func(t *testing.T) {
		p := loadProgram(t, Policy{DropEtherTypes: []uint16{0x8100}})
		cases := []struct {
			name  string
			frame []byte
			want  Action
		}{
			{"untagged", pad(ether(0x0800, ipv4(protoUDP, udp(53, nil)))), Pass},
			{"802.1Q", pad(ether(0x0800, ipv4(protoUDP, udp(53, nil)), 0x8100)), Drop},
			{"802.1ad outer, 802.1Q inner", pad(ether(0x0800, ipv4(protoUDP, udp(53, nil)), 0x88a8, 0x8100)), Drop},
			{"802.1ad only", pad(ether(0x0800, ipv4(protoUDP, udp(53, nil)), 0x88a8)), Pass},
			// Malformed frames are passed whatever their EtherTypes.
			{"802.1Q tag cut short", cat(macDst, macSrc, be16(0x8100), []byte{0}), Pass},
		}
		for _, tc := range cases {
			if o := runFrame(t, p, tc.frame); o.action != tc.want {
				t.Errorf("%s: %v, want %v", tc.name, o.action, tc.want)
			}
		}
	})
	t.Run("drop ipv6 and non-ip", func(t *testing.T) {
		p := loadProgram(t, Policy{Drop: dropNames["ipv6"] | setOf(NonIP)})
		for _, tc := range classificationCases() {
			o := runFrame(t, p, tc.frame)
			want := Pass
			if tc.class >= IPv6TCP && tc.class <= NonIP {
				want = Drop
			}
			if o.action != want {
				t.Errorf("%s (%s): %v, want %v", tc.name, o.class, o.action, want)
			}
		}
	})
}

// TestCountersAddUp runs every case many times and checks the totals
// against the sums over classes, EtherTypes and reasons.
func TestCountersAddUp(t *testing.T) {
	p := loadProgram(t, Policy{Drop: setOf(IPv4ICMP, Malformed)})
	const repeat = 7
	want := map[Class]uint64{}
	// One run per BPF_PROG_RUN: with Repeat > 1 a signal (the Go runtime
	// sends SIGURG to preempt) can interrupt the kernel's loop with EINTR,
	// and cilium/ebpf then starts all repetitions again, so the program
	// runs more often than asked.
	for range repeat {
		for _, tc := range classificationCases() {
			if _, err := p.Test(tc.frame); err != nil {
				t.Fatal(err)
			}
			want[tc.class]++
		}
	}
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var classes, bytes, reasons, ethers uint64
	for _, cl := range Classes() {
		if got := c.Classes[cl].Packets; got != want[cl] {
			t.Errorf("%s: %d packets, want %d", cl, got, want[cl])
		}
		classes += c.Classes[cl].Packets
		bytes += c.Classes[cl].Bytes
	}
	for _, n := range c.Malformed {
		reasons += n
	}
	for _, e := range c.EtherTypes {
		ethers += e.Packets
	}
	if classes != c.Total.Packets || bytes != c.Total.Bytes {
		t.Errorf("classes add up to %d packets, %d bytes; total says %d, %d", classes, bytes, c.Total.Packets, c.Total.Bytes)
	}
	if reasons != c.Classes[Malformed].Packets {
		t.Errorf("malformed reasons add up to %d, class says %d", reasons, c.Classes[Malformed].Packets)
	}
	if ethers+c.EtherTypeTableFull != c.Classes[NonIP].Packets {
		t.Errorf("EtherTypes add up to %d (+%d table full), class says %d", ethers, c.EtherTypeTableFull, c.Classes[NonIP].Packets)
	}
	if c.Dropped() != c.Classes[IPv4ICMP].Packets+c.Classes[Malformed].Packets {
		t.Errorf("dropped %d, want every ICMP and malformed frame (%d)", c.Dropped(), c.Classes[IPv4ICMP].Packets+c.Classes[Malformed].Packets)
	}
	if c.VLAN1 == 0 || c.VLAN2 == 0 || c.IPv4Options == 0 || c.IPv6Ext == 0 || c.FirstFragments == 0 {
		t.Errorf("feature counters missed something: %+v", c)
	}
}

// TestEtherTypeTableFull fills the EtherType breakdown and checks that the
// frames that find it full are still counted, and the miss too.
func TestEtherTypeTableFull(t *testing.T) {
	p := loadProgram(t, Policy{})
	const extra = 5
	for i := range EtherTypeSlots + extra {
		runFrame(t, p, pad(ether(uint16(0x9000+i*2), nil)))
	}
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.EtherTypes) != EtherTypeSlots || c.EtherTypeTableFull != extra || c.Classes[NonIP].Packets != EtherTypeSlots+extra {
		t.Errorf("%d EtherTypes, %d table-full, %d non-IP; want %d, %d, %d",
			len(c.EtherTypes), c.EtherTypeTableFull, c.Classes[NonIP].Packets, EtherTypeSlots, extra, EtherTypeSlots+extra)
	}
}

// TestShortFrame: BPF_PROG_RUN refuses frames without a full Ethernet
// header on current kernels, so the EthTruncated path is reachable only if
// a kernel lets one through; either way nothing may be miscounted.
func TestShortFrame(t *testing.T) {
	p := loadProgram(t, Policy{})
	short := make([]byte, 13)
	if _, err := p.Test(short); err != nil {
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("13-byte frame: %v, want EINVAL", err)
		}
		c, err := p.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if c.Total.Packets != 0 {
			t.Errorf("a refused frame was counted: %+v", c.Total)
		}
		return
	}
	c, _ := p.Counters()
	if c.Classes[Malformed].Packets != 1 || c.Malformed[EthTruncated] != 1 {
		t.Errorf("13-byte frame not counted as a truncated Ethernet header: %+v", c)
	}
}
