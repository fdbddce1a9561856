package xdp

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotlane/hotlane/internal/safefile"
)

// maxFuzzFrame stays under what BPF_PROG_RUN accepts for XDP (a page less
// headroom and the shared-info tail, about 3.5 KiB).
const maxFuzzFrame = 2048

// fuzzPolicy exercises every kind of rule, so the fuzzer checks verdicts as
// well as classes.
var fuzzPolicy = Policy{
	Drop:           setOf(IPv4ICMP, IPv6Frag),
	AllowUDPPorts:  []PortRange{{53, 53}, {5000, 5010}},
	DropEtherTypes: []uint16{0x88cc, 0x9100},
}

// FuzzXDP runs arbitrary frames through the program with BPF_PROG_RUN. The
// program must never fail, every frame must be counted exactly once (total
// == the sum over classes, malformed frames with exactly one reason), and
// its class, reason and verdict must be what the Go reference
// (frames_test.go) says. The seed corpus is in testdata/fuzz/FuzzXDP.
func FuzzXDP(f *testing.F) {
	for _, tc := range classificationCases() {
		f.Add(tc.frame)
	}
	requireRoot(f)
	p := loadProgram(f, fuzzPolicy)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 || len(frame) > maxFuzzFrame {
			return // BPF_PROG_RUN refuses these; see TestShortFrame
		}
		o := runFrame(t, p, frame)
		class, reason, _, _ := reference(frame)
		if o.class != class || o.reason != reason {
			t.Fatalf("program: %s %v; reference: %s %v\nframe % x", o.class, o.reason, class, reason, frame)
		}
		if want := referenceVerdict(frame, fuzzPolicy); o.action != want {
			t.Fatalf("%s frame: program %v, reference %v\nframe % x", class, o.action, want, frame)
		}
		if class == NonIP && o.delta.EtherTypeTableFull == 0 {
			key := innerEtherType(frame)
			if key < 0x0600 {
				key = EtherType8023
			}
			if o.delta.EtherTypes[key].Packets != 1 {
				t.Fatalf("non-IP frame with EtherType 0x%04x not counted under it: %v", key, o.delta.EtherTypes)
			}
		}
		total, err := p.Counters()
		if err != nil {
			t.Fatal(err)
		}
		var sum uint64
		for _, c := range total.Classes {
			sum += c.Packets
		}
		if sum != total.Total.Packets {
			t.Fatalf("classes add up to %d packets, the total is %d", sum, total.Total.Packets)
		}
	})
}

// etherTypeChain returns every EtherType a frame's header names: the outer
// one, each VLAN tag's protocol the parser reads, and the inner one.
func etherTypeChain(f []byte) []uint16 {
	var chain []uint16
	off := 12
	for range MaxVLANTags + 1 {
		if off+2 > len(f) {
			break
		}
		t := binary.BigEndian.Uint16(f[off:])
		chain = append(chain, t)
		if t != 0x8100 && t != 0x88a8 && t != 0x9100 {
			break
		}
		off += 4
	}
	return chain
}

func innerEtherType(f []byte) uint16 {
	chain := etherTypeChain(f)
	return chain[len(chain)-1]
}

// referenceVerdict applies the policy rules of the package documentation.
func referenceVerdict(f []byte, pol Policy) Action {
	class, _, dport, _ := reference(f)
	if class == Malformed {
		if pol.Drop.Has(Malformed) {
			return Drop
		}
		return Pass
	}
	for _, t := range etherTypeChain(f) {
		if t >= 0x0600 && slices.Contains(pol.DropEtherTypes, t) {
			return Drop
		}
	}
	if pol.Drop.Has(class) {
		return Drop
	}
	if (class == IPv4UDP || class == IPv6UDP) && len(pol.AllowUDPPorts) > 0 {
		for _, r := range pol.AllowUDPPorts {
			if dport >= r.Lo && dport <= r.Hi {
				return Pass
			}
		}
		return Drop
	}
	return Pass
}

// TestWriteFuzzCorpus writes the crafted frames into the committed seed
// corpus when HOTLANE_WRITE_FUZZ_CORPUS=1; files already there (such as
// inputs the fuzzer found) are kept.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("HOTLANE_WRITE_FUZZ_CORPUS") != "1" {
		t.Skip("set HOTLANE_WRITE_FUZZ_CORPUS=1 to rewrite testdata/fuzz/FuzzXDP")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzXDP")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer(" ", "_", "/", "_", ",", "", "(", "", ")", "", ".", "", "+", "_").Replace
	for _, tc := range classificationCases() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", tc.frame)
		if err := safefile.WriteFile(filepath.Join(dir, name(tc.name)), []byte(body), safefile.Readable); err != nil {
			t.Fatal(err)
		}
	}
}
