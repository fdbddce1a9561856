package ioctl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestDecodeCommand(t *testing.T) {
	cases := []struct {
		raw    uint32
		want   Command
		String string
	}{
		{unix.TCGETS, Command{Raw: 0x5401, Dir: "none", Type: 'T', Nr: 1, Name: "TCGETS", Family: "tty"}, "TCGETS"},
		{unix.TIOCGPTN, Command{Raw: 0x80045430, Dir: "read", Type: 'T', Nr: 0x30, Size: 4, Name: "TIOCGPTN", Family: "tty"}, "TIOCGPTN"},
		{unix.TIOCSPTLCK, Command{Raw: 0x40045431, Dir: "write", Type: 'T', Nr: 0x31, Size: 4, Name: "TIOCSPTLCK", Family: "tty"}, "TIOCSPTLCK"},
		{0x541b, Command{Raw: 0x541b, Dir: "none", Type: 'T', Nr: 0x1b, Name: "FIONREAD", Family: "tty"}, "FIONREAD"},
		{0x5421, Command{Raw: 0x5421, Dir: "none", Type: 'T', Nr: 0x21, Name: "FIONBIO", Family: "tty"}, "FIONBIO"},
		// DRM: a core ioctl, a driver-private one.
		{0xc010640c, Command{Raw: 0xc010640c, Dir: "read/write", Type: 'd', Nr: 0x0c, Size: 16, Name: "DRM_IOCTL_GET_CAP", Family: "drm"}, "DRM_IOCTL_GET_CAP"},
		{0xc0206445, Command{Raw: 0xc0206445, Dir: "read/write", Type: 'd', Nr: 0x45, Size: 32, Name: "DRM_DRIVER+0x05", Family: "drm"}, "DRM_DRIVER+0x05"},
		{0x40086437, Command{Raw: 0x40086437, Dir: "write", Type: 'd', Nr: 0x37, Size: 8, Family: "drm"}, "_IOW('d',0x37,8) drm"},
		// NVIDIA: _IOWR('F', NV_ESC_RM_CONTROL, 32); 'F' without a
		// direction is the framebuffer.
		{0xc020462a, Command{Raw: 0xc020462a, Dir: "read/write", Type: 'F', Nr: 0x2a, Size: 32, Name: "NV_ESC_RM_CONTROL", Family: "nvidia"}, "NV_ESC_RM_CONTROL"},
		{0xc0d04699, Command{Raw: 0xc0d04699, Dir: "read/write", Type: 'F', Nr: 0x99, Size: 0xd0, Family: "nvidia"}, "_IOWR('F',0x99,208) nvidia"},
		{0x4600, Command{Raw: 0x4600, Dir: "none", Type: 'F', Nr: 0, Family: "fb"}, "_IO('F',0x00) fb"},
		{0xae80, Command{Raw: 0xae80, Dir: "none", Type: 0xae, Nr: 0x80, Name: "KVM_RUN", Family: "kvm"}, "KVM_RUN"},
		{unix.BLKGETSIZE64, Command{Raw: 0x80081272, Dir: "read", Type: 0x12, Nr: 0x72, Size: 8, Name: "BLKGETSIZE64", Family: "block"}, "BLKGETSIZE64"},
		// Nothing known: the _IOC spelling, the type in hex when it is
		// not a printable letter.
		{0xdeadbeef, Command{Raw: 0xdeadbeef, Dir: "read/write", Type: 0xbe, Nr: 0xef, Size: 0x1ead}, "_IOWR(0xbe,0xef,7853)"},
		// A driver number outside the _IOC scheme (NVIDIA UVM's
		// UVM_INITIALIZE): size bits without a direction.
		{0x30000001, Command{Raw: 0x30000001, Dir: "none", Type: 0, Nr: 1, Size: 0x3000}, "0x30000001"},
	}
	for _, c := range cases {
		got := DecodeCommand(c.raw)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("DecodeCommand(%#x) (-want +got):\n%s", c.raw, diff)
		}
		if s := got.String(); s != c.String {
			t.Errorf("DecodeCommand(%#x).String() = %q, want %q", c.raw, s, c.String)
		}
	}
}

// TestWellKnownNumbers checks the hand-encoded numbers of the table
// against their values in the kernel headers.
func TestWellKnownNumbers(t *testing.T) {
	want := map[string]uint32{
		"FIFREEZE": 0xc0045877, "FITHAW": 0xc0045878, "FITRIM": 0xc0185879,
		"FS_IOC_FIEMAP": 0xc020660b, "FS_IOC_GETVERSION": 0x80087601,
		"FIBMAP": 1, "FIGETBSZ": 2, "EVIOCGVERSION": 0x80044501, "EVIOCGID": 0x80084502,
		"VIDIOC_QUERYCAP": 0x80685600, "DMA_BUF_IOCTL_SYNC": 0x40086200,
		"KVM_GET_API_VERSION": 0xae00, "KVM_CREATE_VM": 0xae01, "KVM_CREATE_VCPU": 0xae41,
		"FIOCLEX": 0x5451, "FIONCLEX": 0x5450, "TCGETS2": 0x802c542a,
	}
	got := map[string]uint32{}
	for raw, name := range wellKnown {
		got[name] = raw
	}
	for name, raw := range want {
		if got[name] != raw {
			t.Errorf("%s = %#x, want %#x", name, got[name], raw)
		}
	}
}

func TestErrnoName(t *testing.T) {
	for e, want := range map[int]string{25: "ENOTTY", 9: "EBADF", 22: "EINVAL", 512: "ERESTARTSYS", 515: "ENOIOCTLCMD", 3999: "errno 3999"} {
		if got := ErrnoName(e); got != want {
			t.Errorf("ErrnoName(%d) = %q, want %q", e, got, want)
		}
	}
}
