package vm

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Initramfs is the content of the guest's root file system, written as a
// gzip-compressed cpio "newc" archive, the format the kernel unpacks into
// its rootfs before running /init.
type Initramfs struct {
	entries map[string]cpioEntry // keyed by guest path, without leading slash
}

type cpioEntry struct {
	mode     uint32 // file type and permission bits, as in struct stat
	hostPath string // regular files: where to read the content
	data     []byte // regular files: content when hostPath is empty
	target   string // symlinks
	rdev     [2]uint32
}

const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
	modeCharDev = 0o020000
)

// NewInitramfs returns an image with the directories and device nodes every
// guest needs. /dev/console must exist before devtmpfs is mounted: the
// kernel opens it as /init's stdin, stdout and stderr.
func NewInitramfs() *Initramfs {
	im := &Initramfs{entries: map[string]cpioEntry{}}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "results", "etc", "usr/bin", "usr/lib", "lib64"} {
		im.mkdirAll(d)
	}
	// Merged /usr layout, as on Debian, so host libraries resolve at the
	// same paths inside the guest.
	im.entries["bin"] = cpioEntry{mode: modeSymlink | 0o777, target: "usr/bin"}
	im.entries["lib"] = cpioEntry{mode: modeSymlink | 0o777, target: "usr/lib"}
	im.entries["dev/console"] = cpioEntry{mode: modeCharDev | 0o600, rdev: [2]uint32{5, 1}}
	im.entries["dev/null"] = cpioEntry{mode: modeCharDev | 0o666, rdev: [2]uint32{1, 3}}
	return im
}

func (im *Initramfs) mkdirAll(dir string) {
	dir = strings.Trim(path.Clean("/"+dir), "/")
	for dir != "" && dir != "." {
		if _, ok := im.entries[dir]; !ok {
			im.entries[dir] = cpioEntry{mode: modeDir | 0o755}
		}
		dir = path.Dir(dir)
	}
}

// resolve follows the image's own symlinks in the directory part of a
// guest path, so that /lib/x.so lands in /usr/lib like on the host.
func (im *Initramfs) resolve(guestPath string) string {
	p := strings.Trim(path.Clean("/"+guestPath), "/")
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		prefix := strings.Join(parts[:i], "/")
		if e, ok := im.entries[prefix]; ok && e.mode&0o170000 == modeSymlink {
			return im.resolve(path.Join(e.target, strings.Join(parts[i:], "/")))
		}
	}
	return p
}

// AddFile copies a host file into the image at guestPath, keeping its
// permission bits.
func (im *Initramfs) AddFile(hostPath, guestPath string) error {
	st, err := os.Stat(hostPath)
	if err != nil {
		return fmt.Errorf("add %s to initramfs: %w", hostPath, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("add %s to initramfs: not a regular file", hostPath)
	}
	p := im.resolve(guestPath)
	im.mkdirAll(path.Dir(p))
	im.entries[p] = cpioEntry{mode: modeRegular | uint32(st.Mode().Perm()), hostPath: hostPath}
	return nil
}

// AddData writes content into the image at guestPath.
func (im *Initramfs) AddData(guestPath string, content []byte, perm os.FileMode) {
	p := im.resolve(guestPath)
	im.mkdirAll(path.Dir(p))
	im.entries[p] = cpioEntry{mode: modeRegular | uint32(perm.Perm()), data: content}
}

// AddExecutable adds a host program at guestPath together with the shared
// libraries and dynamic loader it needs, at their host paths, as ldd
// reports them.
func (im *Initramfs) AddExecutable(hostPath, guestPath string) error {
	if err := im.AddFile(hostPath, guestPath); err != nil {
		return err
	}
	libs, err := sharedLibraries(hostPath)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return fmt.Errorf("library %s of %s: %w", lib, hostPath, err)
		}
		if err := im.AddFile(real, lib); err != nil {
			return err
		}
	}
	return nil
}

// sharedLibraries lists the absolute paths of the libraries a dynamically
// linked program loads; nil for a static one.
func sharedLibraries(program string) ([]string, error) {
	out, err := exec.Command("ldd", program).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", program, err, strings.TrimSpace(string(out)))
	}
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		// "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)"
		f := strings.Fields(sc.Text())
		for i, w := range f {
			if strings.HasPrefix(w, "/") && (i == 0 || f[i-1] == "=>") {
				libs = append(libs, w)
			}
		}
		if strings.Contains(sc.Text(), "not found") {
			return nil, fmt.Errorf("ldd %s: %s", program, strings.TrimSpace(sc.Text()))
		}
	}
	return libs, nil
}

// WriteTo writes the image as gzip-compressed newc cpio. Parents come
// before their children, as the kernel's unpacker requires.
func (im *Initramfs) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	zw, err := gzip.NewWriterLevel(cw, gzip.BestSpeed)
	if err != nil {
		return 0, err
	}
	names := make([]string, 0, len(im.entries))
	for name := range im.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		if err := writeCpioEntry(zw, uint32(i+1), name, im.entries[name]); err != nil {
			return cw.n, err
		}
	}
	if err := writeCpioHeader(zw, 0, "TRAILER!!!", 0, 0, [2]uint32{}); err != nil {
		return cw.n, err
	}
	if err := zw.Close(); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

func writeCpioEntry(w io.Writer, ino uint32, name string, e cpioEntry) error {
	var content []byte
	switch e.mode & 0o170000 {
	case modeRegular:
		content = e.data
		if e.hostPath != "" {
			b, err := os.ReadFile(e.hostPath)
			if err != nil {
				return fmt.Errorf("initramfs: %w", err)
			}
			content = b
		}
	case modeSymlink:
		content = []byte(e.target)
	}
	if err := writeCpioHeader(w, ino, name, e.mode, len(content), e.rdev); err != nil {
		return err
	}
	if _, err := w.Write(content); err != nil {
		return err
	}
	return writePad(w, len(content))
}

func writeCpioHeader(w io.Writer, ino uint32, name string, mode uint32, size int, rdev [2]uint32) error {
	nlink := 1
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	// newc: magic, then 13 fields of 8 hex digits: ino mode uid gid nlink
	// mtime filesize devmajor devminor rdevmajor rdevminor namesize check.
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev[0], rdev[1], len(name)+1, 0)
	if _, err := io.WriteString(w, hdr+name+"\x00"); err != nil {
		return err
	}
	return writePad(w, len(hdr)+len(name)+1)
}

// writePad aligns the stream to the 4-byte boundary newc requires after
// each header and each file body.
func writePad(w io.Writer, n int) error {
	if pad := (4 - n%4) % 4; pad > 0 {
		_, err := w.Write(make([]byte, pad))
		return err
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
