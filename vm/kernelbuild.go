package vm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
)

// Kernels of the matrix that no distribution ships for the VM with
// sched_ext are built here from Debian's linux-source package: their
// ResolveKernel spec is SUITE/linux-source-SERIES. No Debian 6.12 kernel
// has sched_ext (Debian enabled it from 6.14.3), but the 6.12 kernels of
// Fedora, Arch, openSUSE and the CentOS family do, and users run those.

// sourcePackageRE matches a linux-source package name and takes its series.
var sourcePackageRE = regexp.MustCompile(`^linux-source-(\d+\.\d+)$`)

// sourceBuild is what a SUITE/linux-source-X.Y[,hz=N] spec asks to build.
type sourceBuild struct {
	pkg    string // linux-source-X.Y
	series string // X.Y
	hz     int    // the kernel's tick rate, CONFIG_HZ
}

// defaultKernelHZ is the tick rate of a kernel built here unless the spec
// names another: Debian's.
const defaultKernelHZ = 250

// kernelHZs are the tick rates Kconfig offers (HZ_100 ... HZ_1000).
var kernelHZs = []int{100, 250, 300, 1000}

// ErrBadKernelHZ is returned for a hz= that Kconfig does not offer.
var ErrBadKernelHZ = errors.New("not a tick rate the kernel can be built with")

// parseSourceBuild reads PACKAGE of a SUITE/PACKAGE spec: ok is false
// when it is not a linux-source package. The tick rate matters to a
// sched_ext scheduler: it ends a slice only at a tick, where EEVDF ends
// one by a high-resolution timer (docs/results.md, 2026-11-28).
func parseSourceBuild(pkg string) (b sourceBuild, ok bool, err error) {
	name, opt, hasOpt := strings.Cut(pkg, ",")
	m := sourcePackageRE.FindStringSubmatch(name)
	if m == nil {
		return sourceBuild{}, false, nil
	}
	b = sourceBuild{pkg: name, series: m[1], hz: defaultKernelHZ}
	if !hasOpt {
		return b, true, nil
	}
	v, found := strings.CutPrefix(opt, "hz=")
	if !found {
		return b, true, fmt.Errorf("%q is not an option of a kernel built from source; the one option is hz=N, e.g. %s,hz=1000", opt, name)
	}
	for _, hz := range kernelHZs {
		if v == fmt.Sprint(hz) {
			b.hz = hz
			return b, true, nil
		}
	}
	return b, true, fmt.Errorf("hz=%s: %w; use one of %v", v, ErrBadKernelHZ, kernelHZs)
}

// builtName is the cache name of the build of a source version, e.g.
// linux-hotlane-6.12.57-1, or linux-hotlane-hz1000-6.12.57-1 at another
// tick rate than the default.
func (b sourceBuild) builtName(version string) string {
	return b.namePrefix() + version
}

func (b sourceBuild) namePrefix() string {
	if b.hz == defaultKernelHZ {
		return builtKernelPrefix
	}
	return fmt.Sprintf("%shz%d-", builtKernelPrefix, b.hz)
}

// configOptions are kernelBuildOptions with the build's tick rate chosen.
func (b sourceBuild) configOptions() []string {
	opts := slices.Clone(kernelBuildOptions)
	for _, hz := range kernelHZs {
		if hz != b.hz {
			opts = append(opts, "-d", fmt.Sprintf("HZ_%d", hz))
		}
	}
	return append(opts, "-e", fmt.Sprintf("HZ_%d", b.hz))
}

// builtKernelPrefix names a kernel built here in the cache (kernels/) and
// in Kernel.Name: linux-hotlane-<Debian version of its source>, e.g.
// linux-hotlane-6.12.57-1.
const builtKernelPrefix = "linux-hotlane-"

// kernelBuildOptions are what the VM and hotlane need on top of
// x86_64_defconfig and kvm_guest.config, as scripts/config arguments. A
// sched_ext kernel needs BPF with its JIT and BTF (so DWARF); the tracer
// and probes need tracepoints, kprobes, fprobe and fentry; the tests need
// cgroups with cpusets, NVMe (the DMA probe) and veth with namespaces (the
// XDP probe). Voluntary preemption as Debian's 6.12 kernels have; Kconfig
// offers it only where the architecture has no lazy preemption, so a
// 7.x build gets lazy preemption, as Debian's 7.x cloud kernels run. The
// tick rate is the spec's (sourceBuild.configOptions), 250 Hz unless
// said.
var kernelBuildOptions = []string{
	"-e", "BPF", "-e", "BPF_SYSCALL", "-e", "BPF_JIT", "-e", "BPF_JIT_ALWAYS_ON",
	"-d", "DEBUG_INFO_NONE", "-e", "DEBUG_INFO", "-e", "DEBUG_INFO_DWARF5",
	"-d", "DEBUG_INFO_REDUCED", "-d", "DEBUG_INFO_SPLIT", "-e", "DEBUG_INFO_BTF",
	"-e", "SCHED_CLASS_EXT",
	"-e", "FTRACE", "-e", "FUNCTION_TRACER", "-e", "DYNAMIC_FTRACE", "-e", "FPROBE",
	"-e", "KPROBES", "-e", "KPROBE_EVENTS", "-e", "UPROBES", "-e", "UPROBE_EVENTS",
	"-e", "BPF_EVENTS", "-e", "KALLSYMS", "-e", "KALLSYMS_ALL",
	"-e", "IKCONFIG", "-e", "IKCONFIG_PROC",
	"-e", "CGROUPS", "-e", "CGROUP_SCHED", "-e", "CPUSETS", "-e", "CGROUP_BPF",
	"-e", "IRQ_TIME_ACCOUNTING", "-e", "SCHEDSTATS",
	"-e", "BLK_DEV_NVME", "-e", "VETH", "-e", "NET_NS", "-e", "TUN",
	"-d", "PREEMPT_NONE", "-e", "PREEMPT_VOLUNTARY",
	"-d", "MODULES",
}

// kernelMustHave are options the build checks after olddefconfig: a
// dependency Kconfig could not meet (pahole too old for BTF, say) turns
// them off silently.
var kernelMustHave = []string{"CONFIG_SCHED_CLASS_EXT", "CONFIG_DEBUG_INFO_BTF", "CONFIG_BPF_JIT", "CONFIG_FPROBE", "CONFIG_KPROBE_EVENTS"}

// kernelBuildTools are the host programs a kernel build runs, and the
// Debian package of each.
var kernelBuildTools = [][2]string{
	{"gcc", "gcc"}, {"make", "make"}, {"bc", "bc"}, {"flex", "flex"}, {"bison", "bison"},
	{"pahole", "dwarves"}, {"xz", "xz-utils"}, {"perl", "perl"},
}

// cachedBuiltKernel returns the newest kernel built here as b asks, if
// any.
func cachedBuiltKernel(cacheDir, suite string, b sourceBuild) (*Kernel, bool) {
	dirs, _ := filepath.Glob(filepath.Join(cacheDir, "kernels", b.namePrefix()+b.series+".*"))
	var best *Kernel
	for _, d := range dirs {
		if k, ok := cachedKernel(cacheDir, suite, filepath.Base(d)); ok && (best == nil || versionLess(best.Name, k.Name)) {
			best = k
		}
	}
	return best, best != nil
}

// buildKernel fetches linux-source-SERIES from suite, configures it for
// the VM (kernelBuildOptions), builds bzImage and caches it with its
// vmlinux. It takes long (the closing message says how long): progress
// goes to log every half minute.
func buildKernel(ctx context.Context, cacheDir, suite string, b sourceBuild, log io.Writer) (*Kernel, error) {
	srcPkg, series := b.pkg, b.series
	if k, ok := cachedBuiltKernel(cacheDir, suite, b); ok {
		return k, nil
	}
	var missing []string
	for _, t := range kernelBuildTools {
		if _, err := exec.LookPath(t[0]); err != nil {
			missing = append(missing, t[1])
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("building %s needs %s: run scripts/deps.sh --kernel-build (as root), or apt-get install %s", srcPkg, strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	deb, err := fetchDeb(ctx, cacheDir, suite, srcPkg, "a kernel build", log)
	if err != nil {
		return nil, err
	}
	// linux-source-6.12_6.12.57-1_all.deb: the version names the build.
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(deb), srcPkg+"_"), "_all.deb")
	name := b.builtName(version)
	if !strings.HasPrefix(version, series+".") {
		return nil, fmt.Errorf("%s: version %q is not of series %s", deb, version, series)
	}

	srcDir := filepath.Join(cacheDir, "src", srcPkg)
	tree := filepath.Join(srcDir, "linux-source-"+series)
	stamp := filepath.Join(srcDir, "unpacked-full-"+version)
	if _, err := os.Stat(stamp); err != nil {
		fmt.Fprintf(log, "hotlane vm: unpacking %s (about 1.5 GB)\n", filepath.Base(deb))
		os.RemoveAll(srcDir)
		if err := os.MkdirAll(srcDir, 0o755); err != nil {
			return nil, err
		}
		if err := unpackSource(ctx, deb, "linux-source-"+series, srcDir); err != nil {
			return nil, fmt.Errorf("unpack %s: %w", srcPkg, err)
		}
		if err := safefile.WriteFile(stamp, nil, safefile.Readable); err != nil {
			return nil, err
		}
	}

	// The objects of an interrupted build are kept: make picks up where
	// it stopped, since the configuration below comes out the same.
	build := filepath.Join(srcDir, "build-kernel")
	if err := os.MkdirAll(build, 0o755); err != nil {
		return nil, err
	}
	mk := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "make", append([]string{"-C", tree, "O=" + build}, args...)...)
		cmd.Env = append(os.Environ(), "KBUILD_BUILD_USER=hotlane", "KBUILD_BUILD_HOST=hotlane", "LOCALVERSION=-hotlane")
		return cmd
	}
	fmt.Fprintf(log, "hotlane vm: configuring %s for the VM (x86_64_defconfig, kvm_guest.config, sched_ext, BTF, tracing, %d Hz)\n", name, b.hz)
	if out, err := mk("x86_64_defconfig", "kvm_guest.config").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("configure %s: %v: %s", name, err, lastLines(string(out), 10))
	}
	config := filepath.Join(build, ".config")
	cfg := exec.CommandContext(ctx, filepath.Join(tree, "scripts/config"), append([]string{"--file", config}, b.configOptions()...)...)
	if out, err := cfg.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("configure %s: scripts/config: %v: %s", name, err, lastLines(string(out), 10))
	}
	if out, err := mk("olddefconfig").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("configure %s: olddefconfig: %v: %s", name, err, lastLines(string(out), 10))
	}
	if err := checkKernelConfig(config, append(slices.Clone(kernelMustHave), fmt.Sprintf("CONFIG_HZ_%d", b.hz))); err != nil {
		return nil, fmt.Errorf("configure %s: %w", name, err)
	}

	jobs := fmt.Sprint(runtime.NumCPU())
	fmt.Fprintf(log, "hotlane vm: building %s with %s jobs (about 40 minutes on 2 cores; progress every 30 s)\n", name, jobs)
	began := time.Now()
	cmd := mk("-j"+jobs, "bzImage")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	tail, steps := followBuild(out, log, began)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("build %s: %v: %s", name, err, strings.Join(tail, "\n"))
	}
	fmt.Fprintf(log, "hotlane vm: built %s in %s (%d build steps)\n", name, time.Since(began).Round(time.Second), steps)

	if err := installBuiltKernel(cacheDir, build, name); err != nil {
		return nil, fmt.Errorf("cache %s: %w", name, err)
	}
	// The objects are 2 GB or more; the tree stays for the sched_ext
	// examples (scx_simple) built against this kernel.
	os.RemoveAll(build)
	k, _ := cachedKernel(cacheDir, suite, name)
	return k, nil
}

// installBuiltKernel moves what a kernel build made (bzImage, vmlinux and
// .config) into the cache as kernels/NAME, whole or not at all. Moved, not
// copied: vmlinux with DWARF is hundreds of MB, and the objects go once
// the kernel is cached.
func installBuiltKernel(cacheDir, build, name string) error {
	kernels := filepath.Join(cacheDir, "kernels")
	// A fresh cache has no kernels/ yet when a build is the first kernel
	// it gets: a 35-minute build was lost at this step that way.
	if err := os.MkdirAll(kernels, 0o755); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(kernels, "build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	for _, f := range [][2]string{{"arch/x86/boot/bzImage", "vmlinuz"}, {"vmlinux", "vmlinux"}, {".config", "config"}} {
		if err := os.Rename(filepath.Join(build, f[0]), filepath.Join(stage, f[1])); err != nil {
			return err
		}
	}
	dir := kernelDir(cacheDir, name)
	os.RemoveAll(dir)
	return os.Rename(stage, dir)
}

// followBuild reads the build's output, prints how far it got every 30
// seconds, and returns its last lines (for an error) and its step count.
func followBuild(r io.Reader, log io.Writer, began time.Time) (tail []string, steps int) {
	sc := bufio.NewScanner(r)
	next := began.Add(30 * time.Second)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 2 && strings.ToUpper(f[0]) == f[0] {
			steps++ // "  CC      kernel/sched/core.o"
		}
		tail = append(tail, line)
		if len(tail) > 15 {
			tail = tail[1:]
		}
		if now := time.Now(); now.After(next) {
			fmt.Fprintf(log, "hotlane vm: kernel build: %s, %d steps, at %s\n", now.Sub(began).Round(time.Second), steps, strings.TrimSpace(line))
			next = now.Add(30 * time.Second)
		}
	}
	return tail, steps
}

// checkKernelConfig says which of the options a .config lacks.
func checkKernelConfig(path string, want []string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var lacking []string
	for _, o := range want {
		if !strings.Contains(string(data), "\n"+o+"=y\n") {
			lacking = append(lacking, o)
		}
	}
	if len(lacking) > 0 {
		return fmt.Errorf("the configuration lacks %s after olddefconfig (a dependency is missing: for BTF, pahole from dwarves)", strings.Join(lacking, ", "))
	}
	return nil
}
