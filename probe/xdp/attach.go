package xdp

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Mode is how an XDP program is attached.
type Mode int

// The XDP attach modes. ModeAuto tries driver mode and falls back to
// generic; ModeOffload only describes other programs (hotlane never
// offloads).
const (
	ModeAuto    Mode = iota
	ModeDriver       // native: the driver runs the program before any skb exists
	ModeGeneric      // skb mode: any interface, after the skb is built; slower
	ModeOffload      // on the NIC itself
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeDriver:
		return "driver"
	case ModeGeneric:
		return "generic"
	case ModeOffload:
		return "offload"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// MarshalText makes modes JSON strings.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// ParseMode parses --mode: auto, driver (or native) or generic (or skb).
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "auto", "":
		return ModeAuto, nil
	case "driver", "native", "drv":
		return ModeDriver, nil
	case "generic", "skb":
		return ModeGeneric, nil
	}
	return 0, fmt.Errorf("unknown XDP mode %q; valid: auto, driver, generic", s)
}

func (m Mode) linkFlags() link.XDPAttachFlags {
	switch m {
	case ModeDriver:
		return link.XDPDriverMode
	case ModeGeneric:
		return link.XDPGenericMode
	case ModeOffload:
		return link.XDPOffloadMode
	}
	return 0
}

func (m Mode) netlinkFlag() uint32 {
	switch m {
	case ModeDriver:
		return unix.XDP_FLAGS_DRV_MODE
	case ModeGeneric:
		return unix.XDP_FLAGS_SKB_MODE
	case ModeOffload:
		return unix.XDP_FLAGS_HW_MODE
	}
	return 0
}

// Errors from Attach and Run; test with errors.Is.
var (
	// ErrNoInterface: the interface does not exist (in this network
	// namespace).
	ErrNoInterface = errors.New("no interface")
	// ErrBusy: another XDP program is attached and --replace was not
	// given, or it could not be removed.
	ErrBusy = errors.New("interface already has an XDP program")
	// ErrDriverMode: driver mode was asked for and the driver refused.
	ErrDriverMode = errors.New("driver mode XDP not available")
)

// kindError is an error whose message stands alone but which matches a
// sentinel such as ErrBusy with errors.Is.
type kindError struct {
	kind error
	msg  string
}

func (e kindError) Error() string { return e.msg }
func (e kindError) Unwrap() error { return e.kind }

// AttachOptions say how to attach.
type AttachOptions struct {
	Mode Mode
	// Replace removes XDP programs already attached to the interface
	// (bpf_link or netlink). They are not restored afterwards.
	Replace bool
}

// Attachment is the program attached to an interface through a bpf_link:
// the kernel detaches it when the link is closed or the process dies.
type Attachment struct {
	Interface string
	Ifindex   int
	Mode      Mode // driver or generic: what was used
	// DriverModeError says why driver mode was not used when ModeAuto
	// fell back to generic.
	DriverModeError error
	// Replaced lists the programs Replace removed.
	Replaced []Attached

	link link.Link
}

// LookupInterface returns the index of the interface called name in this
// thread's network namespace, or an error wrapping ErrNoInterface.
func LookupInterface(name string) (int, error) {
	if name == "" {
		return 0, fmt.Errorf("%w given; name one with --iface (see `ip link`)", ErrNoInterface)
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		var nerr *net.OpError
		if errors.As(err, &nerr) && !strings.Contains(err.Error(), "no such network interface") {
			return 0, fmt.Errorf("look up interface %s: %w", name, err)
		}
		return 0, fmt.Errorf("%w %s; see `ip link`", ErrNoInterface, name)
	}
	return ifi.Index, nil
}

// Attach attaches prog to the interface called iface. Before anything is
// attached it checks that no other XDP program is on the interface: if one
// is, it fails with ErrBusy, or with opts.Replace removes it first. In
// ModeAuto it tries driver mode, then generic mode, and reports which
// worked. On error nothing of ours is left attached.
func Attach(prog *Program, iface string, opts AttachOptions) (*Attachment, error) {
	ifindex, err := LookupInterface(iface)
	if err != nil {
		return nil, err
	}
	a := &Attachment{Interface: iface, Ifindex: ifindex}

	existing, err := QueryXDP(ifindex)
	if err != nil {
		return nil, err
	}
	if len(existing) > 0 {
		if !opts.Replace {
			return nil, kindError{ErrBusy, fmt.Sprintf("%s already has %s; hotlane leaves it alone unless you pass --replace, which detaches it for good",
				iface, describeAttached(existing))}
		}
		for _, x := range existing {
			if err := detachExisting(ifindex, x); err != nil {
				return nil, kindError{ErrBusy, fmt.Sprintf("--replace could not detach %s from %s: %v", describeAttached([]Attached{x}), iface, err)}
			}
			a.Replaced = append(a.Replaced, x)
		}
	}

	modes := []Mode{opts.Mode}
	if opts.Mode == ModeAuto {
		modes = []Mode{ModeDriver, ModeGeneric}
	}
	for _, m := range modes {
		l, err := link.AttachXDP(link.XDPOptions{Program: prog.BPF(), Interface: ifindex, Flags: m.linkFlags()})
		if err == nil {
			a.Mode, a.link = m, l
			return a, nil
		}
		switch {
		case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST):
			now, _ := QueryXDP(ifindex)
			return nil, kindError{ErrBusy, fmt.Sprintf("%s already has %s (attached while hotlane was starting); pass --replace to detach it",
				iface, describeAttached(now))}
		case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
			return nil, fmt.Errorf("attach XDP to %s: %w (needs CAP_NET_ADMIN and CAP_BPF)", iface, err)
		case m == ModeDriver && opts.Mode == ModeAuto:
			a.DriverModeError = explainDriverError(err)
			continue
		case m == ModeDriver:
			return nil, fmt.Errorf("%w on %s: %v; try --mode generic", ErrDriverMode, iface, explainDriverError(err))
		}
		return nil, fmt.Errorf("attach XDP to %s in %s mode: %w", iface, m, err)
	}
	// Not reached: generic mode either attaches or returns above.
	return nil, fmt.Errorf("attach XDP to %s: no mode worked", iface)
}

// explainDriverError shortens the kernel's refusal of driver mode.
func explainDriverError(err error) error {
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, ebpf.ErrNotSupported) {
		return errors.New("the driver has no native XDP support")
	}
	return err
}

// detachExisting removes one program found by QueryXDP: first the way
// `ip link set xdp off` does; if a bpf_link holds it (EBUSY), by detaching
// that link.
func detachExisting(ifindex int, x Attached) error {
	err := detachNetlinkXDP(ifindex, x.Mode)
	if err == nil || !errors.Is(err, unix.EBUSY) {
		return err
	}
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil || info.Type != link.XDPType || uint32(info.Program) != x.ProgID {
			continue
		}
		if xi := info.XDP(); xi == nil || int(xi.Ifindex) != ifindex {
			continue
		}
		return it.Link.Detach()
	}
	if err := it.Err(); err != nil {
		return err
	}
	return fmt.Errorf("a bpf_link holds program %d but it was not found", x.ProgID)
}

func describeAttached(xs []Attached) string {
	if len(xs) == 0 {
		return "an XDP program"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("XDP program id %d in %s mode", x.ProgID, x.Mode)
		if x.ProgID == 0 {
			parts[i] = fmt.Sprintf("an XDP program in %s mode", x.Mode)
		}
	}
	return strings.Join(parts, " and ")
}

// Close detaches the program. It is safe to call twice.
func (a *Attachment) Close() error {
	if a == nil || a.link == nil {
		return nil
	}
	err := a.link.Close()
	a.link = nil
	if err != nil {
		return fmt.Errorf("detach XDP from %s: %w", a.Interface, err)
	}
	return nil
}
