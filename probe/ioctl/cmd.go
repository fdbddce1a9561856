package ioctl

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// ioctl command numbers as <asm-generic/ioctl.h> lays them out on x86-64:
// bits 0-7 nr, 8-15 type ("magic"), 16-29 argument size, 30-31 direction.
const (
	iocNrBits   = 8
	iocTypeBits = 8
	iocSizeBits = 14

	iocTypeShift = iocNrBits
	iocSizeShift = iocTypeShift + iocTypeBits
	iocDirShift  = iocSizeShift + iocSizeBits

	iocNone  = 0
	iocWrite = 1 // userspace writes, the kernel reads the argument
	iocRead  = 2 // the kernel writes the argument back
)

// ioc builds a command number like the kernel's _IOC macro.
func ioc(dir, typ, nr, size uint32) uint32 {
	return dir<<iocDirShift | typ<<iocTypeShift | nr | size<<iocSizeShift
}

// _IO, _IOR, _IOW and _IOWR.
func iocIO(typ, nr uint32) uint32       { return ioc(iocNone, typ, nr, 0) }
func iocR(typ, nr, size uint32) uint32  { return ioc(iocRead, typ, nr, size) }
func iocW(typ, nr, size uint32) uint32  { return ioc(iocWrite, typ, nr, size) }
func iocWR(typ, nr, size uint32) uint32 { return ioc(iocRead|iocWrite, typ, nr, size) }

type named struct {
	raw  uint32
	name string
}

// Command is an ioctl request number, decoded.
type Command struct {
	// Raw is the number as passed to ioctl(2).
	Raw uint32 `json:"raw"`
	// Dir is the _IOC_DIR field: "none", "write" (the kernel reads the
	// argument), "read" (the kernel fills it in) or "read/write".
	Dir string `json:"dir"`
	// Type is the _IOC_TYPE field, the driver's "magic" byte ('T' for
	// terminals, 'd' for DRM, 'F' for NVIDIA).
	Type uint8 `json:"type"`
	// Nr is the _IOC_NR field, the command within its type.
	Nr uint8 `json:"nr"`
	// Size is the _IOC_SIZE field, the size of the argument struct.
	Size uint16 `json:"size"`
	// Name is the command's name if it is a well-known one (TCGETS,
	// FIONREAD, DRM_IOCTL_GET_CAP, ...).
	Name string `json:"name,omitempty"`
	// Family names the subsystem that uses Type, when known.
	Family string `json:"family,omitempty"`
}

// DecodeCommand splits an ioctl number into its _IOC fields and names it
// from a table of well-known commands. Old-style numbers (most terminal
// ioctls, e.g. TCGETS = 0x5401) have direction none and size 0 even when
// they do read or write an argument; numbers a driver made up outside the
// _IOC scheme decode into meaningless fields, which is why Raw is kept.
func DecodeCommand(raw uint32) Command {
	if raw == OtherCommand {
		return Command{Raw: raw, Name: "other"}
	}
	c := Command{
		Raw:  raw,
		Dir:  dirName(raw >> iocDirShift),
		Type: uint8(raw >> iocTypeShift),
		Nr:   uint8(raw),
		Size: uint16(raw >> iocSizeShift & (1<<iocSizeBits - 1)),
	}
	c.Family = familyName(c)
	if n, ok := wellKnown[raw]; ok {
		c.Name = n
		return c
	}
	switch c.Family {
	case "drm":
		c.Name = drmName(c.Nr)
	case "nvidia":
		if n, ok := nvidiaEscapes[c.Nr]; ok {
			c.Name = "NV_ESC_" + n
		}
	}
	return c
}

func dirName(d uint32) string {
	switch d & 3 {
	case iocWrite:
		return "write"
	case iocRead:
		return "read"
	case iocRead | iocWrite:
		return "read/write"
	}
	return "none"
}

// String is the command's name, or its _IOC spelling such as
// _IOWR('d',0x40,16) followed by the family when it is known.
func (c Command) String() string {
	if c.Name != "" {
		return c.Name
	}
	s := c.Spelling()
	if c.Family != "" {
		s += " " + c.Family
	}
	return s
}

// Spelling writes the number the way the kernel's macros would:
// _IO('T',0x01), _IOR('d',0x0c,16), ...
func (c Command) Spelling() string {
	typ := fmt.Sprintf("0x%02x", c.Type)
	if c.Type >= 0x21 && c.Type < 0x7f && c.Type != '\'' && c.Type != '\\' {
		typ = "'" + string(rune(c.Type)) + "'"
	}
	switch c.Dir {
	case "write":
		return fmt.Sprintf("_IOW(%s,0x%02x,%d)", typ, c.Nr, c.Size)
	case "read":
		return fmt.Sprintf("_IOR(%s,0x%02x,%d)", typ, c.Nr, c.Size)
	case "read/write":
		return fmt.Sprintf("_IOWR(%s,0x%02x,%d)", typ, c.Nr, c.Size)
	}
	if c.Size != 0 { // no direction but a size: not an _IOC number
		return "0x" + strconv.FormatUint(uint64(c.Raw), 16)
	}
	return fmt.Sprintf("_IO(%s,0x%02x)", typ, c.Nr)
}

// familyName names the subsystem that owns the command's type byte
// (Documentation/userspace-api/ioctl/ioctl-number.rst); some type bytes
// are shared and are told apart by the direction.
func familyName(c Command) string {
	switch c.Type {
	case 'T':
		return "tty"
	case 0x89:
		return "socket"
	case 0x12:
		return "block"
	case 'f', 'X', 0x94, 'v':
		return "fs"
	case 'd':
		return "drm"
	case 'F':
		// NVIDIA's driver uses _IOWR('F', nr, size); the framebuffer's
		// FBIO* are old-style 0x46xx numbers.
		if c.Dir == "none" && c.Size == 0 {
			return "fb"
		}
		return "nvidia"
	case 'K':
		// AMD's KFD (/dev/kfd) uses _IOC numbers; the console's KD*
		// are old-style 0x4bxx.
		if c.Dir == "none" && c.Size == 0 {
			return "console"
		}
		return "amdkfd"
	case 0xAE:
		return "kvm"
	case '$':
		return "perf"
	case 'L':
		return "loop"
	case 'V':
		return "v4l2"
	case 'E':
		return "evdev"
	case 'b':
		return "dma-buf"
	case 0xB7:
		return "nsfs"
	case 'R':
		return "random"
	case 'H':
		return "hid/sound"
	case 'A':
		return "sound"
	}
	return ""
}

// drmName names DRM core ioctls (DRM_IOCTL_*) and the driver-private
// range DRM_COMMAND_BASE (0x40) to DRM_COMMAND_END (0xa0).
func drmName(nr uint8) string {
	if nr >= 0x40 && nr < 0xa0 {
		return fmt.Sprintf("DRM_DRIVER+0x%02x", nr-0x40)
	}
	if n, ok := drmCore[nr]; ok {
		return "DRM_IOCTL_" + n
	}
	return ""
}

var drmCore = map[uint8]string{
	0x00: "VERSION", 0x01: "GET_UNIQUE", 0x02: "GET_MAGIC",
	0x09: "GEM_CLOSE", 0x0a: "GEM_FLINK", 0x0b: "GEM_OPEN",
	0x0c: "GET_CAP", 0x0d: "SET_CLIENT_CAP",
	0x1e: "SET_MASTER", 0x1f: "DROP_MASTER",
	0x2d: "PRIME_HANDLE_TO_FD", 0x2e: "PRIME_FD_TO_HANDLE",
	0xa0: "MODE_GETRESOURCES", 0xb2: "MODE_CREATE_DUMB", 0xb3: "MODE_MAP_DUMB",
	0xb4: "MODE_DESTROY_DUMB", 0xbc: "MODE_ATOMIC",
	0xbf: "SYNCOBJ_CREATE", 0xc0: "SYNCOBJ_DESTROY", 0xc1: "SYNCOBJ_HANDLE_TO_FD",
	0xc2: "SYNCOBJ_FD_TO_HANDLE", 0xc3: "SYNCOBJ_WAIT", 0xc4: "SYNCOBJ_RESET",
	0xc5: "SYNCOBJ_SIGNAL", 0xca: "SYNCOBJ_TIMELINE_WAIT",
}

// nvidiaEscapes are the NV_ESC_* numbers of NVIDIA's kernel driver
// (/dev/nvidiactl, /dev/nvidia0, ...), all _IOWR('F', nr, size).
var nvidiaEscapes = map[uint8]string{
	0x27: "RM_ALLOC_MEMORY", 0x28: "RM_ALLOC_OBJECT", 0x29: "RM_FREE",
	0x2a: "RM_CONTROL", 0x2b: "RM_ALLOC", 0x34: "RM_DUP_OBJECT", 0x35: "RM_SHARE",
	0x4a: "RM_VID_HEAP_CONTROL", 0x4e: "RM_MAP_MEMORY", 0x4f: "RM_UNMAP_MEMORY",
	0xc8: "CARD_INFO", 0xc9: "REGISTER_FD", 0xce: "ALLOC_OS_EVENT",
	0xcf: "FREE_OS_EVENT", 0xd2: "CHECK_VERSION_STR", 0xd4: "ATTACH_GPUS_TO_FD",
	0xd6: "SYS_PARAMS",
}

// wellKnown maps exact command numbers (x86-64) to names. Where
// golang.org/x/sys has the constant it is used, so the build checks it.
var wellKnown = func() map[uint32]string {
	list := []named{
		// Terminals (asm-generic/ioctls.h): old-style 'T' numbers.
		{unix.TCGETS, "TCGETS"}, {unix.TCSETS, "TCSETS"}, {unix.TCSETSW, "TCSETSW"},
		{unix.TCSETSF, "TCSETSF"}, {0x5405, "TCGETA"}, {0x5406, "TCSETA"},
		{0x5407, "TCSETAW"}, {0x5408, "TCSETAF"}, {unix.TCSBRK, "TCSBRK"},
		{unix.TCXONC, "TCXONC"}, {unix.TCFLSH, "TCFLSH"}, {unix.TIOCEXCL, "TIOCEXCL"},
		{unix.TIOCNXCL, "TIOCNXCL"}, {unix.TIOCSCTTY, "TIOCSCTTY"},
		{unix.TIOCGPGRP, "TIOCGPGRP"}, {unix.TIOCSPGRP, "TIOCSPGRP"},
		{unix.TIOCOUTQ, "TIOCOUTQ"}, {unix.TIOCSTI, "TIOCSTI"},
		{unix.TIOCGWINSZ, "TIOCGWINSZ"}, {unix.TIOCSWINSZ, "TIOCSWINSZ"},
		{unix.TIOCMGET, "TIOCMGET"}, {unix.TIOCMBIS, "TIOCMBIS"},
		{unix.TIOCMBIC, "TIOCMBIC"}, {unix.TIOCMSET, "TIOCMSET"},
		{0x5419, "TIOCGSOFTCAR"}, {0x541a, "TIOCSSOFTCAR"},
		{unix.TIOCINQ, "FIONREAD"}, {unix.TIOCLINUX, "TIOCLINUX"},
		{unix.TIOCCONS, "TIOCCONS"}, {0x541e, "TIOCGSERIAL"}, {0x541f, "TIOCSSERIAL"},
		{unix.TIOCPKT, "TIOCPKT"}, {0x5421, "FIONBIO"}, {unix.TIOCNOTTY, "TIOCNOTTY"},
		{unix.TIOCSETD, "TIOCSETD"}, {unix.TIOCGETD, "TIOCGETD"}, {0x5425, "TCSBRKP"},
		{unix.TIOCSBRK, "TIOCSBRK"}, {unix.TIOCCBRK, "TIOCCBRK"}, {unix.TIOCGSID, "TIOCGSID"},
		{unix.TCGETS2, "TCGETS2"}, {unix.TCSETS2, "TCSETS2"},
		{unix.TIOCGPTN, "TIOCGPTN"}, {unix.TIOCSPTLCK, "TIOCSPTLCK"},
		{unix.TIOCGDEV, "TIOCGDEV"}, {unix.TIOCSIG, "TIOCSIG"},
		{unix.TIOCVHANGUP, "TIOCVHANGUP"}, {unix.TIOCGPKT, "TIOCGPKT"},
		{unix.TIOCGPTLCK, "TIOCGPTLCK"}, {unix.TIOCGEXCL, "TIOCGEXCL"},
		{unix.TIOCGPTPEER, "TIOCGPTPEER"},
		{unix.TUNSETIFF, "TUNSETIFF"}, {unix.TUNGETIFF, "TUNGETIFF"},
		// Any file (fs/ioctl.c).
		{0x5450, "FIONCLEX"}, {0x5451, "FIOCLEX"}, {0x5452, "FIOASYNC"},
		{0x5460, "FIOQSIZE"}, {iocIO(0, 1), "FIBMAP"}, {iocIO(0, 2), "FIGETBSZ"},
		{unix.FS_IOC_GETFLAGS, "FS_IOC_GETFLAGS"}, {unix.FS_IOC_SETFLAGS, "FS_IOC_SETFLAGS"},
		{iocR('v', 1, 8), "FS_IOC_GETVERSION"}, {iocWR('f', 11, 32), "FS_IOC_FIEMAP"},
		{unix.FICLONE, "FICLONE"}, {unix.FICLONERANGE, "FICLONERANGE"},
		{unix.FIDEDUPERANGE, "FIDEDUPERANGE"}, {iocWR('X', 119, 4), "FIFREEZE"},
		{iocWR('X', 120, 4), "FITHAW"}, {iocWR('X', 121, 24), "FITRIM"},
		// Sockets (asm-generic/sockios.h, linux/sockios.h).
		{0x8901, "FIOSETOWN"}, {0x8902, "SIOCSPGRP"}, {0x8903, "FIOGETOWN"},
		{0x8904, "SIOCGPGRP"}, {unix.SIOCATMARK, "SIOCATMARK"},
		{unix.SIOCGSTAMP, "SIOCGSTAMP_OLD"}, {unix.SIOCGIFNAME, "SIOCGIFNAME"},
		{unix.SIOCGIFCONF, "SIOCGIFCONF"}, {unix.SIOCGIFFLAGS, "SIOCGIFFLAGS"},
		{unix.SIOCSIFFLAGS, "SIOCSIFFLAGS"}, {unix.SIOCGIFADDR, "SIOCGIFADDR"},
		{unix.SIOCGIFMTU, "SIOCGIFMTU"}, {unix.SIOCGIFHWADDR, "SIOCGIFHWADDR"},
		{unix.SIOCGIFINDEX, "SIOCGIFINDEX"}, {unix.SIOCGIFTXQLEN, "SIOCGIFTXQLEN"},
		{unix.SIOCETHTOOL, "SIOCETHTOOL"},
		// Block devices (linux/fs.h).
		{unix.BLKROSET, "BLKROSET"}, {unix.BLKROGET, "BLKROGET"}, {unix.BLKRRPART, "BLKRRPART"},
		{unix.BLKGETSIZE, "BLKGETSIZE"}, {unix.BLKFLSBUF, "BLKFLSBUF"},
		{unix.BLKRASET, "BLKRASET"}, {unix.BLKRAGET, "BLKRAGET"}, {unix.BLKSSZGET, "BLKSSZGET"},
		{unix.BLKBSZGET, "BLKBSZGET"}, {unix.BLKBSZSET, "BLKBSZSET"},
		{unix.BLKGETSIZE64, "BLKGETSIZE64"}, {unix.BLKDISCARD, "BLKDISCARD"},
		{unix.BLKPBSZGET, "BLKPBSZGET"}, {unix.BLKZEROOUT, "BLKZEROOUT"},
		{unix.LOOP_SET_FD, "LOOP_SET_FD"}, {unix.LOOP_CLR_FD, "LOOP_CLR_FD"},
		{unix.LOOP_SET_STATUS64, "LOOP_SET_STATUS64"}, {unix.LOOP_GET_STATUS64, "LOOP_GET_STATUS64"},
		{unix.LOOP_CONFIGURE, "LOOP_CONFIGURE"}, {unix.LOOP_CTL_ADD, "LOOP_CTL_ADD"},
		{unix.LOOP_CTL_REMOVE, "LOOP_CTL_REMOVE"}, {unix.LOOP_CTL_GET_FREE, "LOOP_CTL_GET_FREE"},
		// KVM (linux/kvm.h).
		{iocIO(0xAE, 0x00), "KVM_GET_API_VERSION"}, {iocIO(0xAE, 0x01), "KVM_CREATE_VM"},
		{iocIO(0xAE, 0x03), "KVM_CHECK_EXTENSION"}, {iocIO(0xAE, 0x04), "KVM_GET_VCPU_MMAP_SIZE"},
		{iocIO(0xAE, 0x41), "KVM_CREATE_VCPU"}, {iocIO(0xAE, 0x80), "KVM_RUN"},
		// perf events, namespaces, random, input.
		{unix.PERF_EVENT_IOC_ENABLE, "PERF_EVENT_IOC_ENABLE"}, {unix.PERF_EVENT_IOC_DISABLE, "PERF_EVENT_IOC_DISABLE"},
		{unix.PERF_EVENT_IOC_REFRESH, "PERF_EVENT_IOC_REFRESH"}, {unix.PERF_EVENT_IOC_RESET, "PERF_EVENT_IOC_RESET"},
		{unix.PERF_EVENT_IOC_PERIOD, "PERF_EVENT_IOC_PERIOD"}, {unix.PERF_EVENT_IOC_SET_OUTPUT, "PERF_EVENT_IOC_SET_OUTPUT"},
		{unix.PERF_EVENT_IOC_SET_FILTER, "PERF_EVENT_IOC_SET_FILTER"}, {unix.PERF_EVENT_IOC_ID, "PERF_EVENT_IOC_ID"},
		{unix.PERF_EVENT_IOC_SET_BPF, "PERF_EVENT_IOC_SET_BPF"}, {unix.PERF_EVENT_IOC_PAUSE_OUTPUT, "PERF_EVENT_IOC_PAUSE_OUTPUT"},
		{unix.NS_GET_USERNS, "NS_GET_USERNS"}, {unix.NS_GET_PARENT, "NS_GET_PARENT"},
		{unix.NS_GET_NSTYPE, "NS_GET_NSTYPE"}, {unix.RNDGETENTCNT, "RNDGETENTCNT"},
		{iocR('E', 0x01, 4), "EVIOCGVERSION"}, {iocR('E', 0x02, 8), "EVIOCGID"},
		{iocR('V', 0, 104), "VIDIOC_QUERYCAP"}, {iocW('b', 0, 8), "DMA_BUF_IOCTL_SYNC"},
	}
	m := make(map[uint32]string, len(list))
	for _, n := range list {
		if old, dup := m[n.raw]; dup {
			panic(fmt.Sprintf("ioctl table: 0x%x is both %s and %s", n.raw, old, n.name))
		}
		m[n.raw] = n.name
	}
	return m
}()
