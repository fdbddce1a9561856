package ioctl

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// File types as the BPF side reports them: the inode's S_IFMT bits shifted
// down by 12, 0 for anonymous inodes (their mode has no type bits) and 15
// when the fd was not open.
const (
	ftypeAnon    = 0
	ftypeFIFO    = unix.S_IFIFO >> 12
	ftypeChar    = unix.S_IFCHR >> 12
	ftypeDir     = unix.S_IFDIR >> 12
	ftypeBlock   = unix.S_IFBLK >> 12
	ftypeRegular = unix.S_IFREG >> 12
	ftypeSymlink = unix.S_IFLNK >> 12
	ftypeSocket  = unix.S_IFSOCK >> 12
	ftypeBadFD   = 15
)

// Device types in reports.
const (
	TypeChar      = "char"
	TypeBlock     = "block"
	TypePipe      = "pipe"
	TypeFIFO      = "fifo"
	TypeSocket    = "socket"
	TypeFile      = "file"
	TypeDir       = "dir"
	TypeSymlink   = "symlink"
	TypeAnonInode = "anon_inode"
	TypeBadFD     = "bad_fd"
	// TypeOther is the row of the devices beyond Limits.Devices.
	TypeOther = "other"
)

// Device is what an ioctl's fd refers to. For character and block devices
// Major:Minor is the device number and Path its node under /dev; for other
// files it is the number of the filesystem holding the inode and Path is
// that filesystem's mount point, when it has one (pipes, sockets and
// anonymous inodes live on internal filesystems that have none).
type Device struct {
	Type  string `json:"type"`
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
	Path  string `json:"path,omitempty"`
}

// Number is "major:minor".
func (d Device) Number() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// String names the device for people: its /dev path, "char 195:0" when
// it has no node, "pipe", "socket", "file on /home", ...
func (d Device) String() string {
	switch d.Type {
	case TypeChar, TypeBlock:
		if d.Path != "" {
			return d.Path
		}
		return d.Type + " " + d.Number()
	case TypeFile, TypeDir, TypeSymlink, TypeFIFO:
		if d.Path != "" {
			return d.Type + " on " + d.Path
		}
		return d.Type + " on " + d.Number()
	case TypeBadFD:
		return "(fd not open)"
	}
	return d.Type
}

// kernelDev splits a kernel-internal dev_t (include/linux/kdev_t.h:
// major << 20 | minor), which is what BPF reads from i_rdev and s_dev.
func kernelDev(dev uint32) (major, minor uint32) { return dev >> 20, dev & (1<<20 - 1) }

// makeKernelDev is the inverse of kernelDev.
func makeKernelDev(major, minor uint32) uint32 { return major<<20 | minor }

type nodeKey struct {
	block        bool
	major, minor uint32
}

// Resolver turns the device numbers the BPF side reports into paths: it
// scans /dev for device nodes and reads the mount table for filesystems.
// Nodes that appear later (a new /dev/pts/N) are found by a rescan, done
// on a miss at most once per second. It is safe for concurrent use.
type Resolver struct {
	devDir    string
	mountinfo string

	mu      sync.Mutex
	nodes   map[nodeKey]string
	mounts  map[uint64]string // unix.Mkdev(major, minor) -> mount point
	scanned time.Time
}

// NewResolver returns a resolver over devDir (normally /dev) and the
// mount table in /proc/self/mountinfo.
func NewResolver(devDir string) *Resolver {
	return &Resolver{devDir: devDir, mountinfo: "/proc/self/mountinfo"}
}

// skipDevDirs hold no device nodes worth scanning.
var skipDevDirs = map[string]bool{"shm": true, "mqueue": true, "hugepages": true, "fd": true}

// Rescan reads the device nodes and mounts again.
func (r *Resolver) Rescan() {
	nodes := map[nodeKey]string{}
	better := func(a, b string) bool { // is path a a better name than b?
		da, db := strings.Count(a, "/"), strings.Count(b, "/")
		if da != db {
			return da < db
		}
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return a < b
	}
	filepath.WalkDir(r.devDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() && path != r.devDir {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if path != r.devDir && skipDevDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type()&(fs.ModeDevice) == 0 {
			return nil // symlinks are not followed: /dev/stdin, by-id/...
		}
		var st unix.Stat_t
		if unix.Lstat(path, &st) != nil {
			return nil
		}
		k := nodeKey{block: st.Mode&unix.S_IFMT == unix.S_IFBLK, major: unix.Major(st.Rdev), minor: unix.Minor(st.Rdev)}
		if old, ok := nodes[k]; !ok || better(path, old) {
			nodes[k] = path
		}
		return nil
	})
	mounts := readMounts(r.mountinfo)
	r.mu.Lock()
	r.nodes, r.mounts, r.scanned = nodes, mounts, time.Now()
	r.mu.Unlock()
}

// readMounts maps each filesystem's device number to its first mount
// point in a mountinfo file.
func readMounts(path string) map[uint64]string {
	m := map[uint64]string{}
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		maj, min, ok := strings.Cut(fields[2], ":")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		k := unix.Mkdev(uint32(a), uint32(b))
		if _, ok := m[k]; !ok {
			m[k] = unescapeMountinfo(fields[4])
		}
	}
	return m
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of
// mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lookup returns the node path of a device, rescanning on a miss when the
// last scan is more than a second old.
func (r *Resolver) lookup(k nodeKey) string {
	r.mu.Lock()
	p, ok := r.nodes[k]
	stale := time.Since(r.scanned) > time.Second
	r.mu.Unlock()
	if ok || !stale {
		return p
	}
	r.Rescan()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes[k]
}

func (r *Resolver) mountPoint(major, minor uint32) string {
	// Maps are replaced, never changed, so they can be read unlocked.
	r.mu.Lock()
	m := r.mounts
	r.mu.Unlock()
	if m == nil {
		r.Rescan()
		r.mu.Lock()
		m = r.mounts
		r.mu.Unlock()
	}
	return m[unix.Mkdev(major, minor)]
}

// Device describes what the BPF side saw: the file type ftype and the
// kernel dev_t dev (the device for char/block, the filesystem otherwise).
func (r *Resolver) Device(ftype uint16, dev uint32) Device {
	major, minor := kernelDev(dev)
	d := Device{Major: major, Minor: minor}
	switch ftype {
	case ftypeChar, ftypeBlock:
		d.Type = TypeChar
		if ftype == ftypeBlock {
			d.Type = TypeBlock
		}
		d.Path = r.lookup(nodeKey{block: ftype == ftypeBlock, major: major, minor: minor})
	case ftypeFIFO:
		// pipe(2) pipes live on pipefs, which is never mounted; a named
		// FIFO lives on a mounted filesystem.
		d.Type = TypePipe
		if p := r.mountPoint(major, minor); p != "" {
			d.Type, d.Path = TypeFIFO, p
		}
	case ftypeSocket:
		d.Type = TypeSocket
	case ftypeRegular, ftypeDir, ftypeSymlink:
		d.Type = map[uint16]string{ftypeRegular: TypeFile, ftypeDir: TypeDir, ftypeSymlink: TypeSymlink}[ftype]
		d.Path = r.mountPoint(major, minor)
	case ftypeAnon:
		d.Type = TypeAnonInode
	case ftypeBadFD:
		d = Device{Type: TypeBadFD}
	default:
		d.Type = fmt.Sprintf("type%d", ftype)
	}
	return d
}

// ErrUnknownDevice is returned (wrapped) for a --dev that names no device.
var ErrUnknownDevice = errors.New("unknown device")

// ParseDevice resolves a device filter: a path to a character or block
// device node (/dev/nvidia0), or MAJOR:MINOR of a device that has a node
// under the resolver's /dev. It returns the kernel dev_t and a
// description for reports.
func (r *Resolver) ParseDevice(s string) (uint32, Device, error) {
	if s == "" {
		return 0, Device{}, fmt.Errorf("%w: empty device", ErrUnknownDevice)
	}
	if maj, min, ok := strings.Cut(s, ":"); ok && !strings.Contains(s, "/") {
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil || a >= 1<<12 || b >= 1<<20 {
			return 0, Device{}, fmt.Errorf("%w %q: give a device path (/dev/nvidia0) or MAJOR:MINOR (195:0)", ErrUnknownDevice, s)
		}
		major, minor := uint32(a), uint32(b)
		r.Rescan()
		for _, block := range []bool{false, true} {
			if p := r.lookup(nodeKey{block: block, major: major, minor: minor}); p != "" {
				typ := TypeChar
				if block {
					typ = TypeBlock
				}
				return makeKernelDev(major, minor), Device{Type: typ, Major: major, Minor: minor, Path: p}, nil
			}
		}
		return 0, Device{}, fmt.Errorf("%w %s: no character or block device node under %s has that number", ErrUnknownDevice, s, r.devDir)
	}
	var st unix.Stat_t
	if err := unix.Stat(s, &st); err != nil {
		return 0, Device{}, fmt.Errorf("%w %s: %v", ErrUnknownDevice, s, err)
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = TypeChar
	case unix.S_IFBLK:
		typ = TypeBlock
	default:
		return 0, Device{}, fmt.Errorf("%w %s: not a character or block device node", ErrUnknownDevice, s)
	}
	major, minor := unix.Major(st.Rdev), unix.Minor(st.Rdev)
	return makeKernelDev(major, minor), Device{Type: typ, Major: major, Minor: minor, Path: s}, nil
}
