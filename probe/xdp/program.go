package xdp

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/loader"
)

// Action is what the program told the kernel to do with a frame.
type Action uint32

// The XDP actions the probe returns (enum xdp_action).
const (
	Drop Action = 1
	Pass Action = 2
)

func (a Action) String() string {
	switch a {
	case Drop:
		return "XDP_DROP"
	case Pass:
		return "XDP_PASS"
	}
	return fmt.Sprintf("xdp_action(%d)", uint32(a))
}

// Program is the probe's XDP program loaded into the kernel with a policy,
// attached nowhere yet: Attach puts it on an interface, Test runs it on a
// frame (BPF_PROG_RUN). Its counters count both.
type Program struct {
	objs   bpf.XdpObjects
	policy Policy
}

// statIndex mirrors enum hl_xdp_stat in bpf/xdp.bpf.c.
const (
	statPackets = iota
	statBytes
	statVLAN1
	statVLAN2
	statIPv4Options
	statIPv6Ext
	statFirstFrag
	statDropMalformed
	statDropEtherType
	statDropClass
	statDropUDPPort
	statEtherTypeFull
	numStats
)

// Load checks pol and loads the program with it. The policy is compiled
// into the program's read-only data, so the verifier sees it as constants;
// a new policy means a new Program.
func Load(pol Policy) (*Program, error) {
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	spec, err := bpf.LoadXdp()
	if err != nil {
		return nil, fmt.Errorf("read XDP object: %w", err)
	}
	if err := configure(spec, pol); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise RLIMIT_MEMLOCK: %w", err)
	}
	p := &Program{policy: pol}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel's verifier rejected the XDP program: %v\n  %s", ve.Cause, strings.Join(loader.VerifierExcerpt(ve.Log, 8), "\n  "))
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("load XDP program: %w (needs CAP_BPF and CAP_NET_ADMIN)", err)
		}
		return nil, fmt.Errorf("load XDP program: %w", err)
	}
	return p, nil
}

// configure writes the policy into the object's .rodata.
func configure(spec *ebpf.CollectionSpec, pol Policy) error {
	var udp, eth [65536 / 64]uint64
	for _, r := range pol.AllowUDPPorts {
		for port := int(r.Lo); port <= int(r.Hi); port++ {
			udp[port/64] |= 1 << (port % 64)
		}
	}
	for _, t := range pol.DropEtherTypes {
		eth[t/64] |= 1 << (t % 64)
	}
	var v bpf.XdpVariableSpecs
	if err := spec.Assign(&v); err != nil {
		return fmt.Errorf("XDP object: %w; rebuild bpf/xdp.bpf.c", err)
	}
	return loader.SetVariables(map[*ebpf.VariableSpec]any{
		v.DropClasses:     uint32(pol.Drop),
		v.UdpAllowOn:      boolU32(len(pol.AllowUDPPorts) > 0),
		v.UdpAllow:        udp,
		v.EthertypeDropOn: boolU32(len(pol.DropEtherTypes) > 0),
		v.EthertypeDrop:   eth,
	})
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// Policy is the policy the program was loaded with.
func (p *Program) Policy() Policy { return p.policy }

// BPF is the loaded XDP program itself.
func (p *Program) BPF() *ebpf.Program { return p.objs.HotlaneXdp }

// Close unloads the program; attachments must be closed first.
func (p *Program) Close() error { return p.objs.Close() }

// Test runs the program once on frame through BPF_PROG_RUN, as if the frame
// had arrived on an interface, and returns its verdict. The kernel wants at
// least an Ethernet header (14 bytes) and at most about a page.
func (p *Program) Test(frame []byte) (Action, error) {
	ret, err := p.objs.HotlaneXdp.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		return 0, fmt.Errorf("BPF_PROG_RUN on a %d-byte frame: %w", len(frame), err)
	}
	return Action(ret), nil
}

// Count is packets, bytes and drops of one class or EtherType.
type Count struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	Dropped uint64 `json:"dropped"`
}

func (c Count) sub(o Count) Count {
	return Count{c.Packets - o.Packets, c.Bytes - o.Bytes, c.Dropped - o.Dropped}
}

// Counters are the program's counters summed over CPUs.
type Counters struct {
	// Total counts every frame the program saw, whatever its class.
	Total Count `json:"total"`
	// Classes has one entry per Class; every frame is in exactly one, so
	// they add up to Total.
	Classes [numClasses]Count `json:"-"`
	// EtherTypes breaks NonIP down by EtherType (EtherType8023 for 802.3
	// length frames). It holds up to EtherTypeSlots types; frames of
	// further types are in NonIP but not here, counted in
	// EtherTypeTableFull.
	EtherTypes map[uint16]Count `json:"-"`
	// Malformed breaks the Malformed class down by reason.
	Malformed map[Reason]uint64 `json:"-"`

	VLAN1              uint64 `json:"vlan_single_tagged"` // frames with one VLAN tag
	VLAN2              uint64 `json:"vlan_double_tagged"` // frames with two (QinQ)
	IPv4Options        uint64 `json:"ipv4_with_options"`
	IPv6Ext            uint64 `json:"ipv6_with_extension_headers"`
	FirstFragments     uint64 `json:"first_fragments"`
	DroppedMalformed   uint64 `json:"dropped_malformed"`    // by --drop malformed
	DroppedEtherType   uint64 `json:"dropped_ethertype"`    // by --drop-ethertype
	DroppedClass       uint64 `json:"dropped_class"`        // by --drop
	DroppedUDPPort     uint64 `json:"dropped_udp_port"`     // by --allow-udp-ports
	EtherTypeTableFull uint64 `json:"ethertype_table_full"` // non-IP frames missing from EtherTypes
}

// EtherTypeSlots is how many EtherTypes the non-IP breakdown holds.
const EtherTypeSlots = 64

// Dropped is the number of frames dropped, by any rule.
func (c *Counters) Dropped() uint64 {
	return c.DroppedMalformed + c.DroppedEtherType + c.DroppedClass + c.DroppedUDPPort
}

// Sub returns the counts of c minus those of prev (an earlier snapshot of
// the same program).
func (c *Counters) Sub(prev *Counters) *Counters {
	d := *c
	d.Total = c.Total.sub(prev.Total)
	for i := range d.Classes {
		d.Classes[i] = c.Classes[i].sub(prev.Classes[i])
	}
	d.EtherTypes = make(map[uint16]Count, len(c.EtherTypes))
	for t, n := range c.EtherTypes {
		d.EtherTypes[t] = n.sub(prev.EtherTypes[t])
	}
	d.Malformed = make(map[Reason]uint64, len(c.Malformed))
	for r, n := range c.Malformed {
		d.Malformed[r] = n - prev.Malformed[r]
	}
	for _, f := range [][2]*uint64{
		{&d.VLAN1, &prev.VLAN1}, {&d.VLAN2, &prev.VLAN2}, {&d.IPv4Options, &prev.IPv4Options},
		{&d.IPv6Ext, &prev.IPv6Ext}, {&d.FirstFragments, &prev.FirstFragments},
		{&d.DroppedMalformed, &prev.DroppedMalformed}, {&d.DroppedEtherType, &prev.DroppedEtherType},
		{&d.DroppedClass, &prev.DroppedClass}, {&d.DroppedUDPPort, &prev.DroppedUDPPort},
		{&d.EtherTypeTableFull, &prev.EtherTypeTableFull},
	} {
		*f[0] -= *f[1]
	}
	return &d
}

// Counters reads and sums the per-CPU counters. The program keeps counting
// while they are read, so counters read at one instant can be a few frames
// apart; snapshots taken while no frames arrive add up exactly.
func (p *Program) Counters() (*Counters, error) {
	c := &Counters{EtherTypes: map[uint16]Count{}, Malformed: map[Reason]uint64{}}
	var per []bpf.XdpClassCounters
	for i := range c.Classes {
		if err := p.objs.ClassCounters.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("read class counters: %w", err)
		}
		c.Classes[i] = sumCounts(per)
	}
	var vals []uint64
	for _, r := range Reasons() {
		if err := p.objs.MalformedReasons.Lookup(uint32(r), &vals); err != nil {
			return nil, fmt.Errorf("read malformed counters: %w", err)
		}
		if n := sum(vals); n > 0 {
			c.Malformed[r] = n
		}
	}
	var stats [numStats]uint64
	for i := range stats {
		if err := p.objs.Stats.Lookup(uint32(i), &vals); err != nil {
			return nil, fmt.Errorf("read stats: %w", err)
		}
		stats[i] = sum(vals)
	}
	c.Total = Count{Packets: stats[statPackets], Bytes: stats[statBytes], Dropped: stats[statDropMalformed] +
		stats[statDropEtherType] + stats[statDropClass] + stats[statDropUDPPort]}
	c.VLAN1, c.VLAN2 = stats[statVLAN1], stats[statVLAN2]
	c.IPv4Options, c.IPv6Ext, c.FirstFragments = stats[statIPv4Options], stats[statIPv6Ext], stats[statFirstFrag]
	c.DroppedMalformed, c.DroppedEtherType = stats[statDropMalformed], stats[statDropEtherType]
	c.DroppedClass, c.DroppedUDPPort = stats[statDropClass], stats[statDropUDPPort]
	c.EtherTypeTableFull = stats[statEtherTypeFull]

	var key uint32
	it := p.objs.Ethertypes.Iterate()
	for it.Next(&key, &per) {
		c.EtherTypes[uint16(key)] = sumCounts(per)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read EtherType counters: %w", err)
	}
	return c, nil
}

func sumCounts(per []bpf.XdpClassCounters) Count {
	var c Count
	for _, v := range per {
		c.Packets += v.Packets
		c.Bytes += v.Bytes
		c.Dropped += v.Dropped
	}
	return c
}

func sum(vals []uint64) uint64 {
	var n uint64
	for _, v := range vals {
		n += v
	}
	return n
}
