package ioctl

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestResolverHostDev resolves devices every Linux /dev has.
func TestResolverHostDev(t *testing.T) {
	r := NewResolver("/dev")
	for _, c := range []struct {
		ftype uint16
		major uint32
		minor uint32
		want  string
	}{
		{ftypeChar, 1, 3, "/dev/null"},
		{ftypeChar, 1, 5, "/dev/zero"},
		{ftypeChar, 5, 2, "/dev/ptmx"}, // not /dev/pts/ptmx: the shorter path wins
		{ftypeChar, 4095, 1048575, "char 4095:1048575"},
		{ftypeBlock, 4095, 7, "block 4095:7"},
	} {
		if _, err := os.Stat(c.want); c.want[0] == '/' && err != nil {
			t.Logf("skip %s: %v", c.want, err)
			continue
		}
		if got := r.Device(c.ftype, makeKernelDev(c.major, c.minor)).String(); got != c.want {
			t.Errorf("%d:%d = %q, want %q", c.major, c.minor, got, c.want)
		}
	}
}

// TestResolverNodes builds a fake /dev: nodes in subdirectories are found,
// the shallowest name wins, symlinks and skipped directories are not
// followed, and nodes created after the first scan are found by a rescan.
func TestResolverNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs CAP_MKNOD: run as root")
	}
	dir := t.TempDir()
	mk := func(path string, mode uint32, major, minor uint32) {
		t.Helper()
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mknod(p, mode|0o600, int(unix.Mkdev(major, minor))); err != nil {
			t.Fatal(err)
		}
	}
	mk("nvidia0", unix.S_IFCHR, 195, 0)
	mk("nvidiactl", unix.S_IFCHR, 195, 255)
	mk("dri/card0", unix.S_IFCHR, 226, 0)
	mk("dri/by-path/x/card0-again", unix.S_IFCHR, 226, 0)
	mk("sda", unix.S_IFBLK, 8, 0)
	mk("sg0", unix.S_IFCHR, 8, 0) // same numbers, other type
	mk("shm/hidden", unix.S_IFCHR, 10, 10)
	if err := os.Symlink(filepath.Join(dir, "nvidia0"), filepath.Join(dir, "a-link")); err != nil {
		t.Fatal(err)
	}

	r := NewResolver(dir)
	r.mountinfo = "/nonexistent"
	check := func(ftype uint16, major, minor uint32, want string) {
		t.Helper()
		if got := r.Device(ftype, makeKernelDev(major, minor)); got.Path != want {
			t.Errorf("%d:%d type %d: path %q, want %q", major, minor, ftype, got.Path, want)
		}
	}
	check(ftypeChar, 195, 0, filepath.Join(dir, "nvidia0"))
	check(ftypeChar, 195, 255, filepath.Join(dir, "nvidiactl"))
	check(ftypeChar, 226, 0, filepath.Join(dir, "dri/card0"))
	check(ftypeBlock, 8, 0, filepath.Join(dir, "sda"))
	check(ftypeChar, 8, 0, filepath.Join(dir, "sg0"))
	check(ftypeChar, 10, 10, "")

	mk("pts/7", unix.S_IFCHR, 136, 7)
	r.scanned = r.scanned.Add(-2 * 1e9) // as if the scan were 2 s old
	check(ftypeChar, 136, 7, filepath.Join(dir, "pts/7"))

	// The filter accepts a path or MAJOR:MINOR, char before block.
	for _, c := range []struct{ in, want string }{
		{filepath.Join(dir, "nvidia0"), "195:0"},
		{filepath.Join(dir, "a-link"), "195:0"},
		{"226:0", "226:0"},
		{"8:0", "8:0"},
	} {
		dev, d, err := r.ParseDevice(c.in)
		if err != nil {
			t.Errorf("ParseDevice(%q): %v", c.in, err)
			continue
		}
		if d.Number() != c.want || dev != makeKernelDev(d.Major, d.Minor) {
			t.Errorf("ParseDevice(%q) = %#x %+v, want %s", c.in, dev, d, c.want)
		}
	}
	if _, d, _ := r.ParseDevice("8:0"); d.Type != TypeChar || d.Path != filepath.Join(dir, "sg0") {
		t.Errorf("8:0 resolved to %+v, want the char device", d)
	}
	if _, _, err := r.ParseDevice("10:10"); err == nil {
		t.Error("10:10 (only under shm/) resolved")
	}
}

func TestResolverMounts(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(mi, []byte(`22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
40 22 0:45 / /mnt/with\040space rw - tmpfs tmpfs rw
41 22 254:0 /sub /bind rw - ext4 /dev/vda1 rw
`), 0o644)
	r := NewResolver(t.TempDir())
	r.mountinfo = mi
	for _, c := range []struct {
		ftype uint16
		dev   uint32
		want  string
	}{
		{ftypeRegular, makeKernelDev(254, 0), "file on /"},
		{ftypeDir, makeKernelDev(0, 45), "dir on /mnt/with space"},
		{ftypeRegular, makeKernelDev(0, 99), "file on 0:99"},
		{ftypeFIFO, makeKernelDev(0, 14), "pipe"}, // pipefs is never mounted
		{ftypeFIFO, makeKernelDev(254, 0), "fifo on /"},
		{ftypeSocket, makeKernelDev(0, 9), "socket"},
		{ftypeAnon, makeKernelDev(0, 16), "anon_inode"},
		{ftypeBadFD, 0, "(fd not open)"},
	} {
		if got := r.Device(c.ftype, c.dev).String(); got != c.want {
			t.Errorf("type %d dev %#x = %q, want %q", c.ftype, c.dev, got, c.want)
		}
	}
}

func TestKernelDev(t *testing.T) {
	// include/linux/kdev_t.h: MINORBITS 20.
	if maj, min := kernelDev(0x0c300000 | 5); maj != 195 || min != 5 {
		t.Errorf("kernelDev = %d:%d", maj, min)
	}
	if d := makeKernelDev(136, 3); d != 136<<20|3 {
		t.Errorf("makeKernelDev = %#x", d)
	}
}
