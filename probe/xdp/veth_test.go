package xdp

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// runInB starts Run on B's veth end (inside namespace B) and returns once
// the program is attached. stop ends the run and returns its report.
func runInB(t *testing.T, tp *topology, cfg Config, progress *bytes.Buffer) (att *Attachment, stop func() *Report) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	attached := make(chan *Attachment, 1)
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	opts := Options{Interval: 100 * time.Millisecond, Attached: func(a *Attachment) { attached <- a }}
	if progress != nil {
		opts.Progress = progress
	}
	go func() {
		var r result
		r.err = inNetns(tp.nsB, func() error {
			var err error
			r.rep, err = Run(ctx, cfg, opts)
			return err
		})
		done <- r
	}()
	select {
	case att = <-attached:
	case r := <-done:
		cancel()
		t.Fatalf("Run ended before attaching: %v", r.err)
	}
	stop = func() *Report {
		cancel()
		r := <-done
		if r.err != nil {
			t.Fatalf("Run: %v", r.err)
		}
		return r.rep
	}
	t.Cleanup(func() { cancel() })
	return att, stop
}

// TestVeth sends known traffic from namespace A to B across the veth pair
// and checks the probe's counts on B's end, first counting only in generic
// mode, then in driver mode with ICMP dropped and UDP allowed to one port.
//
// Frame sizes are exact: an echo request is 14 (Ethernet) + 20 (IPv4) + 8
// (ICMP) + payload bytes; veth adds no padding and no FCS.
func TestVeth(t *testing.T) {
	tp := newTopology(t)
	const (
		n        = 5
		udpOK    = 5353
		udpOther = 5354
		tcpPort  = 8080
	)
	icmpPayload := []byte("hotlane-xdp-test")
	udpPayload := []byte("hotlane udp")
	icmpFrame := uint64(14 + 20 + 8 + len(icmpPayload))
	udpFrame := uint64(14 + 20 + 8 + len(udpPayload))

	tcpSrv := listenTCP(t, tp.nsB, fmt.Sprintf("%s:%d", addrB, tcpPort))

	// sendAll sends n echo requests, n datagrams to each UDP port and n
	// TCP connections, and returns the echo replies and datagrams received.
	sendAll := func(t *testing.T) (replies, gotOK, gotOther int) {
		t.Helper()
		udpSrvOK := listenUDP(t, tp.nsB, fmt.Sprintf("%s:%d", addrB, udpOK))
		udpSrvOther := listenUDP(t, tp.nsB, fmt.Sprintf("%s:%d", addrB, udpOther))
		replies, err := ping(tp.nsA, addrB, n, icmpPayload, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, port := range []int{udpOK, udpOther} {
			if err := sendUDP(tp.nsA, fmt.Sprintf("%s:%d", addrB, port), n, udpPayload); err != nil {
				t.Fatal(err)
			}
		}
		if err := connectTCP(tp.nsA, fmt.Sprintf("%s:%d", addrB, tcpPort), n, "hello"); err != nil {
			t.Fatalf("TCP connections: %v", err)
		}
		for i := range n {
			select {
			case m := <-tcpSrv.msgs:
				if m != "hello" {
					t.Errorf("TCP connection %d delivered %q", i, m)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("only %d of %d TCP connections delivered their data", i, n)
			}
		}
		gotOK = udpSrvOK.count(300 * time.Millisecond)
		gotOther = udpSrvOther.count(0)
		// Let the last FIN/ACK exchanges finish before the counts are read.
		time.Sleep(200 * time.Millisecond)
		return replies, gotOK, gotOther
	}

	checkCommon := func(t *testing.T, rep *Report) {
		t.Helper()
		c := rep.Counters
		var sum Count
		for _, cl := range Classes() {
			sum.Packets += c.Classes[cl].Packets
			sum.Bytes += c.Classes[cl].Bytes
			sum.Dropped += c.Classes[cl].Dropped
		}
		if sum != c.Total {
			t.Errorf("classes add up to %+v, total %+v", sum, c.Total)
		}
		for _, cl := range []Class{IPv4Frag, IPv4Other, IPv6TCP, IPv6UDP, IPv6ICMPv6, IPv6Frag, IPv6Other, Malformed} {
			if got := c.Classes[cl]; got.Packets != 0 {
				t.Errorf("%s: %+v; the test sends none", cl, got)
			}
		}
		if got := c.Classes[IPv4TCP]; got.Packets < 3*n || got.Dropped != 0 {
			// Per connection at least SYN, the handshake's ACK and the data.
			t.Errorf("ipv4/tcp: %+v, want at least %d packets and none dropped", got, 3*n)
		}
		if arp := c.EtherTypes[0x0806]; arp.Packets != c.Classes[NonIP].Packets {
			t.Errorf("non-IP %+v, ARP %+v: want only ARP", c.Classes[NonIP], arp)
		}
		if rep.Losses.Total() != 0 {
			t.Errorf("losses: %+v", rep.Losses)
		}
		if got := attachedIn(t, tp.nsB, ifB); len(got) != 0 {
			t.Errorf("after Run, %s still has %v", ifB, got)
		}
		var text bytes.Buffer
		if err := rep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		t.Logf("report:\n%s", text.String())
	}

	t.Run("count only, generic mode", func(t *testing.T) {
		var progress bytes.Buffer
		att, stop := runInB(t, tp, Config{Interface: ifB, Mode: ModeGeneric}, &progress)
		if att.Mode != ModeGeneric {
			t.Errorf("attached in %s mode, asked for generic", att.Mode)
		}
		if got := attachedIn(t, tp.nsB, ifB); len(got) != 1 || got[0].Mode != ModeGeneric {
			t.Errorf("netlink says %s has %v, want one program in generic mode", ifB, got)
		}
		replies, gotOK, gotOther := sendAll(t)
		rep := stop()
		if replies != n || gotOK != n || gotOther != n {
			t.Errorf("received %d echo replies, %d and %d datagrams; want %d of each: nothing is dropped", replies, gotOK, gotOther, n)
		}
		c := rep.Counters
		if got, want := c.Classes[IPv4ICMP], (Count{n, n * icmpFrame, 0}); got != want {
			t.Errorf("ipv4/icmp %+v, want %+v", got, want)
		}
		if got, want := c.Classes[IPv4UDP], (Count{2 * n, 2 * n * udpFrame, 0}); got != want {
			t.Errorf("ipv4/udp %+v, want %+v", got, want)
		}
		if c.Dropped() != 0 {
			t.Errorf("dropped %d with an empty policy", c.Dropped())
		}
		// A's first frame to B needs B's MAC address: at least one ARP
		// frame (A's request) arrives. Later runs may find it cached.
		if c.EtherTypes[0x0806].Packets == 0 {
			t.Errorf("no ARP frame counted: %v", c.EtherTypes)
		}
		if !strings.Contains(progress.String(), "xdp hlvb [generic]") {
			t.Errorf("no progress lines: %q", progress.String())
		}
		checkCommon(t, rep)
	})

	t.Run("drop icmp, allow one udp port, driver mode", func(t *testing.T) {
		pol := Policy{Drop: setOf(IPv4ICMP), AllowUDPPorts: []PortRange{{udpOK, udpOK}}}
		att, stop := runInB(t, tp, Config{Interface: ifB, Policy: pol}, nil)
		if att.Mode != ModeDriver || att.DriverModeError != nil {
			t.Errorf("auto mode on veth chose %s (%v), want driver", att.Mode, att.DriverModeError)
		}
		replies, gotOK, gotOther := sendAll(t)
		rep := stop()
		if replies != 0 {
			t.Errorf("%d echo replies came back; ICMP should be dropped", replies)
		}
		if gotOK != n || gotOther != 0 {
			t.Errorf("UDP: %d datagrams to the allowed port, %d to the other; want %d and 0", gotOK, gotOther, n)
		}
		c := rep.Counters
		if got, want := c.Classes[IPv4ICMP], (Count{n, n * icmpFrame, n}); got != want {
			t.Errorf("ipv4/icmp %+v, want %+v", got, want)
		}
		if got, want := c.Classes[IPv4UDP], (Count{2 * n, 2 * n * udpFrame, n}); got != want {
			t.Errorf("ipv4/udp %+v, want %+v", got, want)
		}
		if c.DroppedClass != n || c.DroppedUDPPort != n || c.Dropped() != 2*n {
			t.Errorf("drops by rule: class %d, UDP port %d, total %d; want %d, %d, %d",
				c.DroppedClass, c.DroppedUDPPort, c.Dropped(), n, n, 2*n)
		}
		if rep.Mode != ModeDriver {
			t.Errorf("report says %s mode", rep.Mode)
		}
		checkCommon(t, rep)
	})
}
