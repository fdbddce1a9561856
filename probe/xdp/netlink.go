package xdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// cilium/ebpf attaches XDP with bpf_link and has no netlink. Finding out
// what is already attached to an interface (a bpf_link of another process,
// or a program attached the old way through netlink by `ip link set xdp` or
// libxdp) and removing an old-style program take rtnetlink, done here with
// x/sys/unix: RTM_GETLINK reports IFLA_XDP, RTM_SETLINK with IFLA_XDP_FD -1
// detaches.

// XDP_ATTACHED_* (linux/if_link.h), not in x/sys/unix.
const (
	xdpAttachedNone  = 0
	xdpAttachedDrv   = 1
	xdpAttachedSkb   = 2
	xdpAttachedHw    = 3
	xdpAttachedMulti = 4

	rtextFilterSkipStats = 1 << 3 // RTEXT_FILTER_SKIP_STATS
	nlaTypeMask          = 0x3fff // ^(NLA_F_NESTED | NLA_F_NET_BYTEORDER)
)

// Attached is what an interface has attached in one XDP mode.
type Attached struct {
	Mode   Mode   `json:"mode"`
	ProgID uint32 `json:"prog_id"`
}

// QueryXDP returns the XDP programs attached to the interface with index
// ifindex in this thread's network namespace, one per mode (at most
// driver, generic and offload); none when nothing is attached.
func QueryXDP(ifindex int) ([]Attached, error) {
	req := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(req[4:8], uint32(ifindex)) // ifi_index
	req = appendAttr(req, unix.IFLA_EXT_MASK, binary.NativeEndian.AppendUint32(nil, rtextFilterSkipStats))
	msgs, err := netlinkRoundTrip(unix.RTM_GETLINK, 0, req)
	if err != nil {
		if errors.Is(err, unix.ENODEV) {
			return nil, fmt.Errorf("%w: ifindex %d", ErrNoInterface, ifindex)
		}
		return nil, fmt.Errorf("query interface %d over netlink: %w", ifindex, err)
	}
	for _, m := range msgs {
		if m.typ != unix.RTM_NEWLINK || len(m.data) < unix.SizeofIfInfomsg {
			continue
		}
		for typ, val := range attrs(m.data[unix.SizeofIfInfomsg:]) {
			if typ == unix.IFLA_XDP {
				return parseIFLAXDP(val), nil
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("query interface %d over netlink: no link in the reply", ifindex)
}

// parseIFLAXDP decodes the nested IFLA_XDP attribute.
func parseIFLAXDP(b []byte) []Attached {
	var mode uint8
	ids := map[uint16]uint32{}
	for typ, val := range attrs(b) {
		switch {
		case typ == unix.IFLA_XDP_ATTACHED && len(val) >= 1:
			mode = val[0]
		case len(val) >= 4:
			ids[typ] = binary.NativeEndian.Uint32(val)
		}
	}
	switch mode {
	case xdpAttachedNone:
		return nil
	case xdpAttachedDrv:
		return []Attached{{ModeDriver, ids[unix.IFLA_XDP_PROG_ID]}}
	case xdpAttachedSkb:
		return []Attached{{ModeGeneric, ids[unix.IFLA_XDP_PROG_ID]}}
	case xdpAttachedHw:
		return []Attached{{ModeOffload, ids[unix.IFLA_XDP_PROG_ID]}}
	}
	var out []Attached
	for _, x := range []struct {
		attr uint16
		mode Mode
	}{{unix.IFLA_XDP_DRV_PROG_ID, ModeDriver}, {unix.IFLA_XDP_SKB_PROG_ID, ModeGeneric}, {unix.IFLA_XDP_HW_PROG_ID, ModeOffload}} {
		if id := ids[x.attr]; id != 0 {
			out = append(out, Attached{x.mode, id})
		}
	}
	return out
}

// detachNetlinkXDP removes a program attached through netlink in mode.
// It fails with EBUSY when the program is held by a bpf_link instead.
func detachNetlinkXDP(ifindex int, mode Mode) error {
	return setNetlinkXDP(ifindex, -1, mode.netlinkFlag())
}

// setNetlinkXDP attaches the program fd (or, with fd -1, detaches) the way
// `ip link set dev IF xdp` does: RTM_SETLINK with IFLA_XDP. hotlane itself
// attaches through bpf_link; tests use this to play an older tool.
func setNetlinkXDP(ifindex, fd int, flags uint32) error {
	req := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(req[4:8], uint32(ifindex))
	var nested []byte
	nested = appendAttr(nested, unix.IFLA_XDP_FD, binary.NativeEndian.AppendUint32(nil, uint32(int32(fd))))
	nested = appendAttr(nested, unix.IFLA_XDP_FLAGS, binary.NativeEndian.AppendUint32(nil, flags))
	req = appendAttr(req, unix.IFLA_XDP|unix.NLA_F_NESTED, nested)
	_, err := netlinkRoundTrip(unix.RTM_SETLINK, unix.NLM_F_ACK, req)
	return err
}

// appendAttr appends one rtattr (header, value, padding) to b.
func appendAttr(b []byte, typ uint16, val []byte) []byte {
	n := unix.SizeofRtAttr + len(val)
	b = binary.NativeEndian.AppendUint16(b, uint16(n))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, val...)
	return append(b, make([]byte, align4(n)-n)...)
}

func align4(n int) int { return (n + 3) &^ 3 }

// attrs iterates over the rtattrs in b, yielding type (flags masked off)
// and value; it stops at the first malformed attribute.
func attrs(b []byte) func(yield func(uint16, []byte) bool) {
	return func(yield func(uint16, []byte) bool) {
		for len(b) >= unix.SizeofRtAttr {
			l := int(binary.NativeEndian.Uint16(b[0:2]))
			typ := binary.NativeEndian.Uint16(b[2:4])
			if l < unix.SizeofRtAttr || l > len(b) {
				return
			}
			if !yield(typ&nlaTypeMask, b[unix.SizeofRtAttr:l]) {
				return
			}
			b = b[min(align4(l), len(b)):]
		}
	}
}

type netlinkMsg struct {
	typ  uint16
	data []byte
}

var netlinkSeq atomic.Uint32

// netlinkRoundTrip sends one rtnetlink request on a fresh socket (in this
// thread's network namespace) and returns the reply messages. An
// NLMSG_ERROR with a non-zero code becomes an error carrying the errno and
// the kernel's extended-ack message, if any.
func netlinkRoundTrip(typ, flags uint16, body []byte) ([]netlinkMsg, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, os.NewSyscallError("socket(AF_NETLINK)", err)
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1) // best effort: error texts
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("bind(AF_NETLINK)", err)
	}
	seq := netlinkSeq.Add(1)
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:4], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:6], typ)
	binary.NativeEndian.PutUint16(msg[6:8], unix.NLM_F_REQUEST|flags)
	binary.NativeEndian.PutUint32(msg[8:12], seq)
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto(AF_NETLINK)", err)
	}

	var out []netlinkMsg
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, os.NewSyscallError("recvfrom(AF_NETLINK)", err)
		}
		b := buf[:n]
		for len(b) >= unix.NLMSG_HDRLEN {
			l := int(binary.NativeEndian.Uint32(b[0:4]))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return nil, errors.New("netlink: malformed reply")
			}
			mtyp := binary.NativeEndian.Uint16(b[4:6])
			mflags := binary.NativeEndian.Uint16(b[6:8])
			mseq := binary.NativeEndian.Uint32(b[8:12])
			data := b[unix.NLMSG_HDRLEN:l]
			b = b[min(align4(l), len(b)):]
			if mseq != seq {
				continue
			}
			switch mtyp {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(data) < 4 {
					return nil, errors.New("netlink: short error reply")
				}
				code := int32(binary.NativeEndian.Uint32(data[0:4]))
				if code == 0 {
					return out, nil // the ACK
				}
				return nil, netlinkError(unix.Errno(-code), mflags, data)
			}
			out = append(out, netlinkMsg{mtyp, append([]byte(nil), data...)})
			if mflags&unix.NLM_F_MULTI == 0 {
				return out, nil
			}
		}
	}
}

// netlinkError wraps errno with the kernel's extended-ack text, which
// follows the echoed request in the error message.
func netlinkError(errno unix.Errno, flags uint16, data []byte) error {
	if flags&unix.NLM_F_ACK_TLVS == 0 || len(data) < unix.SizeofNlMsgerr {
		return errno
	}
	skip := unix.SizeofNlMsgerr // error code + the request's header
	if flags&unix.NLM_F_CAPPED == 0 {
		skip = 4 + int(binary.NativeEndian.Uint32(data[4:8])) // the whole request was echoed
	}
	if skip > len(data) {
		return errno
	}
	for typ, val := range attrs(data[align4(skip):]) {
		if typ == unix.NLMSGERR_ATTR_MSG {
			if i := len(val); i > 0 && val[i-1] == 0 {
				val = val[:i-1]
			}
			return &kernelMsgError{errno, string(val)}
		}
	}
	return errno
}

// kernelMsgError is an errno with the kernel's explanation.
type kernelMsgError struct {
	errno unix.Errno
	msg   string
}

func (e *kernelMsgError) Error() string { return fmt.Sprintf("%v (%s)", e.errno, e.msg) }
func (e *kernelMsgError) Unwrap() error { return e.errno }
