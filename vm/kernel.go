package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/hotlane/hotlane/internal/safefile"
)

// DefaultKernel is the pinned sched_ext kernel: Debian's trixie-backports
// 7.3.4 cloud build, which has CONFIG_SCHED_CLASS_EXT=y, NVMe and virtio
// built in, and boots to a shell under TCG in a few seconds.
const DefaultKernel = "trixie-backports/linux-binary-7.3.4+deb13-cloud-amd64"

// NamedKernels are the kernels of the test matrix by short name, what
// --kernel accepts besides paths and suites: one per sched_ext kfunc
// generation (6.12: 6.12; 6.13-6.18: 6.17; 7.1+: 7.2 and 7.3). 6.12 is
// built here from Debian's source (no Debian 6.12 kernel has sched_ext);
// the others are Debian's cloud kernels.
var NamedKernels = map[string]string{
	"6.12": "trixie/linux-source-6.12",
	"6.17": "trixie-backports/linux-image-6.17.13+deb13-cloud-amd64",
	"7.2":  "sid/linux-binary-7.2.13+deb14-cloud-amd64",
	"7.3":  DefaultKernel,
}

// expandKernelName turns a NamedKernels name into its SUITE/PACKAGE spec
// and leaves any other spec as it is.
func expandKernelName(spec string) string {
	if full, ok := NamedKernels[spec]; ok {
		return full
	}
	return spec
}

// kernelPackagePattern selects the newest cloud kernel of a suite when
// --kernel names only the suite (e.g. "sid").
const kernelPackagePattern = `^linux-binary-[0-9.]+\+deb[0-9]+-cloud-amd64$`

// Kernel is a bootable kernel image and, when known, the uncompressed ELF
// whose .BTF section describes it (what vmlinux.h and scx_simple are built
// against).
type Kernel struct {
	Name    string // package name, or the local path
	Suite   string // Debian suite it came from; empty for a local image
	Vmlinuz string
	Vmlinux string // uncompressed ELF with BTF; empty if it could not be extracted
	// sourceOverride is the linux-source series its sched_ext examples
	// are built from when its own series has no source package.
	sourceOverride string
}

// ErrKernelNotFound is returned when a local kernel path does not exist.
var ErrKernelNotFound = errors.New("kernel image not found")

// ResolveKernel turns a --kernel value into a bootable kernel, fetching and
// caching it when needed. spec is one of:
//
//	""                          the pinned default (DefaultKernel)
//	6.12, 6.17, 7.2, 7.3        a kernel of the test matrix (NamedKernels)
//	/path/to/vmlinuz            a local image
//	SUITE                       the newest linux-binary-*-cloud-amd64 of a Debian suite
//	SUITE/PACKAGE               that package from that suite
//	SUITE/linux-source-X.Y      built here from that source (about 40 minutes)
//	SUITE/linux-source-X.Y,hz=N the same at another tick rate (100, 250, 300, 1000; 250 without)
//
// Progress goes to log.
func ResolveKernel(ctx context.Context, cacheDir, spec string, log io.Writer) (*Kernel, error) {
	if spec == "" {
		spec = DefaultKernel
	}
	spec = expandKernelName(spec)
	if err := CheckKernelSpec(spec); err != nil {
		return nil, err
	}
	if isLocalPath(spec) {
		k := &Kernel{Name: spec, Vmlinuz: spec}
		if vmlinux, err := cachedVmlinux(cacheDir, spec); err == nil {
			k.Vmlinux = vmlinux
		}
		return k, nil
	}
	suite, pkg, _ := strings.Cut(spec, "/")
	if b, ok, _ := parseSourceBuild(pkg); ok { // CheckKernelSpec refused a bad option above
		return buildKernel(ctx, cacheDir, suite, b, log)
	}
	if pkg != "" {
		if k, ok := cachedKernel(cacheDir, suite, pkg); ok {
			return k, nil
		}
	}
	a, err := newApt(ctx, cacheDir, suite)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "hotlane vm: updating the package list of %s (private apt state in %s)\n", suite, a.dir)
	if err := a.update(ctx); err != nil {
		return nil, err
	}
	if pkg == "" {
		if pkg, err = a.newestPackage(ctx, kernelPackagePattern); err != nil {
			return nil, err
		}
		if k, ok := cachedKernel(cacheDir, suite, pkg); ok {
			return k, nil
		}
	}
	fmt.Fprintf(log, "hotlane vm: downloading %s from %s\n", pkg, suite)
	deb, err := a.download(ctx, pkg)
	if err != nil {
		return nil, err
	}
	return unpackKernel(ctx, cacheDir, suite, pkg, deb)
}

// debianPackageName is what Debian policy allows as a package name.
var debianPackageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// CheckKernelSpec checks a ResolveKernel spec using only what is on this
// machine: a local image must be an x86 bzImage, a suite one the runner
// knows and a package name well-formed. Callers run it before anything
// slow, so that a typo does not cost an apt update and a download first.
func CheckKernelSpec(spec string) error {
	if spec == "" {
		spec = DefaultKernel
	}
	spec = expandKernelName(spec)
	if isLocalPath(spec) {
		if _, err := os.Stat(spec); err != nil {
			return fmt.Errorf("%w: %s does not exist; pass a vmlinuz path, a Debian suite such as sid, or SUITE/PACKAGE", ErrKernelNotFound, spec)
		}
		return checkBzImage(spec)
	}
	suite, pkg, hasPkg := strings.Cut(spec, "/")
	if !validSuite(suite) {
		return fmt.Errorf("%w %q in --kernel %q: use one of %s, SUITE/PACKAGE, a kernel of the test matrix (%s), or a vmlinuz path", ErrUnknownSuite, suite, spec, strings.Join(knownSuites(), ", "), strings.Join(slices.Sorted(maps.Keys(NamedKernels)), ", "))
	}
	if _, ok, err := parseSourceBuild(pkg); ok {
		if err != nil {
			return fmt.Errorf("--kernel %q: %w", spec, err)
		}
		return nil
	}
	if hasPkg && !debianPackageName.MatchString(pkg) {
		return fmt.Errorf("--kernel %q: %q is not a Debian package name; write SUITE/PACKAGE, e.g. %s", spec, pkg, DefaultKernel)
	}
	return nil
}

func isLocalPath(spec string) bool {
	return strings.HasPrefix(spec, "/") || strings.HasPrefix(spec, ".") || strings.HasSuffix(spec, "vmlinuz") || strings.Contains(spec, "vmlinuz-")
}

func kernelDir(cacheDir, pkg string) string {
	return filepath.Join(cacheDir, "kernels", pkg)
}

func cachedKernel(cacheDir, suite, pkg string) (*Kernel, bool) {
	dir := kernelDir(cacheDir, pkg)
	k := &Kernel{Name: pkg, Suite: suite, Vmlinuz: filepath.Join(dir, "vmlinuz"), Vmlinux: filepath.Join(dir, "vmlinux")}
	for _, f := range []string{k.Vmlinuz, k.Vmlinux} {
		if _, err := os.Stat(f); err != nil {
			return nil, false
		}
	}
	return k, true
}

// unpackKernel extracts vmlinuz from the .deb and decompresses it next to
// it, then publishes the directory atomically so a crash never leaves a
// half-written cache entry.
func unpackKernel(ctx context.Context, cacheDir, suite, pkg, deb string) (*Kernel, error) {
	tmp, err := os.MkdirTemp(filepath.Join(cacheDir, "apt"), "unpack-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, tmp).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("dpkg-deb -x %s: %v: %s", deb, err, out)
	}
	images, _ := filepath.Glob(filepath.Join(tmp, "usr/lib/modules/*/vmlinuz"))
	boot, _ := filepath.Glob(filepath.Join(tmp, "boot/vmlinuz-*"))
	images = append(images, boot...)
	if len(images) == 0 {
		return nil, fmt.Errorf("%s contains no vmlinuz: is it a kernel image package?", pkg)
	}
	stage := filepath.Join(tmp, "out")
	if err := os.Mkdir(stage, 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(images[0], filepath.Join(stage, "vmlinuz")); err != nil {
		return nil, err
	}
	if err := ExtractVmlinux(ctx, filepath.Join(stage, "vmlinuz"), filepath.Join(stage, "vmlinux")); err != nil {
		return nil, err
	}
	dir := kernelDir(cacheDir, pkg)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	if err := os.Rename(stage, dir); err != nil {
		return nil, err
	}
	k, _ := cachedKernel(cacheDir, suite, pkg)
	return k, nil
}

// cachedVmlinux extracts (once) the ELF of a local vmlinuz into the cache.
func cachedVmlinux(cacheDir, vmlinuz string) (string, error) {
	out, err := localVmlinuxPath(cacheDir, vmlinuz)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	return out, ExtractVmlinux(context.Background(), vmlinuz, out)
}

// localVmlinuxPath is where cachedVmlinux keeps the ELF of a local
// vmlinuz: named after the image's name, size and time, so that a new
// image at the same path is extracted again.
func localVmlinuxPath(cacheDir, vmlinuz string) (string, error) {
	st, err := os.Stat(vmlinuz)
	if err != nil {
		return "", err
	}
	return filepath.Join(cacheDir, "local", fmt.Sprintf("%s-%d-%d.vmlinux", filepath.Base(vmlinuz), st.Size(), st.ModTime().Unix())), nil
}

// ExtractVmlinux decompresses the kernel ELF embedded in a bzImage. The
// x86 boot protocol's setup header gives where the compressed payload
// starts and how long it is; the format is told by its magic number.
func ExtractVmlinux(ctx context.Context, bzImage, out string) error {
	img, err := os.ReadFile(bzImage)
	if err != nil {
		return err
	}
	if len(img) < 0x250 || string(img[0x202:0x206]) != "HdrS" {
		return fmt.Errorf("%s is not an x86 bzImage (no HdrS setup header)", bzImage)
	}
	setupSects := int(img[0x1f1])
	if setupSects == 0 {
		setupSects = 4
	}
	payloadOff := int(binary.LittleEndian.Uint32(img[0x248:]))
	payloadLen := int(binary.LittleEndian.Uint32(img[0x24c:]))
	start := (setupSects+1)*512 + payloadOff
	if start+payloadLen > len(img) || payloadLen == 0 {
		return fmt.Errorf("%s: payload out of bounds", bzImage)
	}
	payload := img[start : start+payloadLen]

	var elfData []byte
	switch {
	case bytes.HasPrefix(payload, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(payload))
		if err != nil {
			return fmt.Errorf("%s: %w", bzImage, err)
		}
		// The kernel appends the uncompressed size after the stream.
		zr.Multistream(false)
		if elfData, err = io.ReadAll(zr); err != nil {
			return fmt.Errorf("%s: gunzip: %w", bzImage, err)
		}
	case bytes.HasPrefix(payload, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		// zstd frames: the trailing 4-byte size is not a frame, so
		// strip it before handing the stream to zstd.
		if elfData, err = decompressWith(ctx, "zstd", payload[:len(payload)-4], "-dcq"); err != nil {
			return fmt.Errorf("%s: %w", bzImage, err)
		}
	case bytes.HasPrefix(payload, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		if elfData, err = decompressWith(ctx, "xz", payload, "-dcq", "--single-stream"); err != nil {
			return fmt.Errorf("%s: %w", bzImage, err)
		}
	default:
		return fmt.Errorf("%s: unsupported kernel compression (magic % x): rebuild with gzip, xz or zstd", bzImage, payload[:4])
	}
	f, err := elf.NewFile(bytes.NewReader(elfData))
	if err != nil {
		return fmt.Errorf("%s: decompressed payload is not ELF: %w", bzImage, err)
	}
	if f.Section(".BTF") == nil {
		return fmt.Errorf("%s has no .BTF section: the kernel was built without CONFIG_DEBUG_INFO_BTF", bzImage)
	}
	return safefile.WriteFile(out, elfData, safefile.Readable)
}

func decompressWith(ctx context.Context, tool string, data []byte, args ...string) ([]byte, error) {
	if _, err := exec.LookPath(tool); err != nil {
		return nil, fmt.Errorf("%s not found: apt-get install %s", tool, map[string]string{"zstd": "zstd", "xz": "xz-utils"}[tool])
	}
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", tool, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ErrNoCacheDir is returned when no cache directory is given and none can
// be chosen safely.
var ErrNoCacheDir = errors.New("no cache directory: neither XDG_CACHE_HOME nor HOME names one; give --cache DIR or set HOTLANE_CACHE")

// ErrUnsafeCache is returned for a cache directory someone else could
// change: what is in it is built and run (as root, often).
var ErrUnsafeCache = errors.New("unsafe cache directory")

// DefaultCacheDir is where kernels, the sched_ext example builds and apt
// state are kept: $HOTLANE_CACHE, else $XDG_CACHE_HOME/hotlane or
// ~/.cache/hotlane, else /var/cache/hotlane for root, else none
// (ErrNoCacheDir). Never a fixed name under /tmp: another user could make
// it first, own it, and plant links and programs in it.
func DefaultCacheDir() (string, error) {
	return defaultCacheDir(os.Geteuid())
}

func defaultCacheDir(euid int) (string, error) {
	if d := os.Getenv("HOTLANE_CACHE"); d != "" {
		return d, nil
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "hotlane"), nil
	}
	if euid == 0 {
		return "/var/cache/hotlane", nil
	}
	return "", ErrNoCacheDir
}

// CheckCacheDir refuses a cache directory that exists and belongs to
// another user, or that anyone may write to: whoever can change it
// decides which kernel boots, which source tree make runs in, and which
// scheduler binary the guest gets. A missing one is fine: it is made by
// this user.
func CheckCacheDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s belongs to uid %d, not to this user (uid %d); use a cache of your own (--cache, HOTLANE_CACHE)", ErrUnsafeCache, dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("%w: anyone may write to %s (mode %v); chmod o-w it or use another (--cache, HOTLANE_CACHE)", ErrUnsafeCache, dir, fi.Mode().Perm())
	}
	return nil
}

// ErrNotAKernel: a --kernel path that is not an x86 bzImage.
var ErrNotAKernel = errors.New("not a kernel image")

// checkBzImage says whether path is an x86 boot image (bzImage, as
// /boot/vmlinuz-* are): the boot protocol puts "HdrS" at offset 0x202.
// Anything else, qemu would refuse with a puzzling message.
func checkBzImage(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file; pass a vmlinuz (bzImage) path", ErrNotAKernel, path)
	}
	magic := make([]byte, 4)
	if _, err := f.ReadAt(magic, 0x202); err != nil || string(magic) != "HdrS" {
		return fmt.Errorf("%w: %s is not an x86 bzImage (no \"HdrS\" boot header); pass a vmlinuz such as /boot/vmlinuz-*", ErrNotAKernel, path)
	}
	return nil
}
