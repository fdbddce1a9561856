package vm

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/hotlane/hotlane/internal/safefile"
)

// Guest paths of the kernel's example schedulers the runner builds.
const (
	ScxSimpleGuestPath = "/usr/bin/scx_simple"
	ScxQmapGuestPath   = "/usr/bin/scx_qmap"
)

// ScxGuestPath is where the runner puts the kernel example scheduler name
// (e.g. scx_qmap) in the guest.
func ScxGuestPath(name string) string { return "/usr/bin/" + name }

// ScxExamples are the C example schedulers in the kernel's tools/sched_ext
// (7.3); BuildScx builds any of them.
var ScxExamples = []string{"scx_simple", "scx_qmap", "scx_central", "scx_flatcg", "scx_userland", "scx_pair", "scx_cpu0", "scx_sdt"}

// scxAlwaysBuilt are built whenever a build runs at all: libbpf and
// bpftool dominate the time, so a second scheduler costs a few seconds and
// later runs that need it find it cached.
var scxAlwaysBuilt = []string{"scx_simple", "scx_qmap"}

// CheckScxName returns an error unless name is one of ScxExamples.
func CheckScxName(name string) error {
	if !slices.Contains(ScxExamples, name) {
		return fmt.Errorf("%q is not one of the kernel's example schedulers: use one of %s", name, strings.Join(ScxExamples, ", "))
	}
	return nil
}

// scxClangs are the clang versions the build can use, newest first.
// scx_qmap in 7.3 keeps its task contexts in a BPF arena, and the verifier
// rejects what clang 19 makes of it ("Failed to load skel": qmap_dequeue
// does arithmetic on an arena pointer it did not cast); clang 22
// (bookworm-security) builds a loadable one. scx_simple loads with either.
var scxClangs = []string{"22", "21", "20", "19"}

// scxClang returns the newest usable clang version installed ("" if none).
func scxClang() string {
	for _, v := range scxClangs {
		_, e1 := exec.LookPath("clang-" + v)
		_, e2 := exec.LookPath("llvm-strip-" + v)
		if e1 == nil && e2 == nil {
			return v
		}
	}
	return ""
}

// scxBuildTools are the host programs the upstream build needs, with the
// Debian packages that provide them.
var scxBuildTools = map[string]string{
	"make":     "make",
	"gcc":      "gcc",
	"dpkg-deb": "dpkg",
	"tar":      "tar",
	"xz":       "xz-utils",
}

// BuildScxSimple builds the kernel's own tools/sched_ext/scx_simple; see
// BuildScx.
func BuildScxSimple(ctx context.Context, cacheDir string, k *Kernel, log io.Writer) (string, error) {
	bins, err := BuildScx(ctx, cacheDir, k, []string{"scx_simple"}, log)
	if err != nil {
		return "", err
	}
	return bins["scx_simple"], nil
}

// BuildScx builds the named example schedulers of the kernel's
// tools/sched_ext (scx_simple, scx_qmap, ...) from Debian's linux-source
// package against the BTF of k, in one build, and caches the binaries. It
// returns each one's host path. The source is never copied into the
// repository: it is fetched and built here, at test time.
func BuildScx(ctx context.Context, cacheDir string, k *Kernel, names []string, log io.Writer) (map[string]string, error) {
	for _, n := range names {
		if err := CheckScxName(n); err != nil {
			return nil, err
		}
	}
	if k.Vmlinux == "" {
		return nil, fmt.Errorf("sched_ext examples: no vmlinux with BTF for %s", k.Name)
	}
	suite, series := sourceFor(k)
	srcPkg := "linux-source-" + series
	outDir := scxOutDir(cacheDir, k)
	bins := map[string]string{}
	var missing []string
	for _, n := range names {
		bins[n] = filepath.Join(outDir, n)
		if _, err := os.Stat(bins[n]); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return bins, nil
	}
	// Built before from the fallback source (its own series has none):
	// use that build without asking apt again.
	if k.sourceOverride == "" {
		if fb, ok := cachedScx(scxOutDir(cacheDir, withFallbackSource(k)), names); ok {
			return fb, nil
		}
	}
	// Build what was asked for, and the always-built ones not yet cached.
	for _, n := range scxAlwaysBuilt {
		if _, err := os.Stat(filepath.Join(outDir, n)); err != nil && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	what := strings.Join(missing, " ")
	if err := checkScxTools(what); err != nil {
		return nil, err
	}
	clang := scxClang()

	srcDir := filepath.Join(cacheDir, "src", srcPkg)
	tree := filepath.Join(srcDir, "linux-source-"+series)
	if _, err := os.Stat(filepath.Join(tree, "tools/sched_ext/Makefile")); err != nil {
		deb, err := fetchDeb(ctx, cacheDir, suite, srcPkg, what, log)
		if err != nil && (suite != fallbackSourceSuite || series != fallbackSourceSeries) {
			// Not every kernel's series has its source in the suite
			// (trixie-backports has 6.17's image but no
			// linux-source-6.17). Newer examples need newer kernel
			// types (7.3's use struct scx_cmask), so the fallback is
			// the oldest sched_ext source Debian keeps, trixie's 6.12.
			fmt.Fprintf(log, "hotlane vm: %s is not in %s (%v); building the examples from linux-source-%s instead\n", srcPkg, suite, err, fallbackSourceSeries)
			return BuildScx(ctx, cacheDir, withFallbackSource(k), names, log)
		}
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(srcDir, 0o755); err != nil {
			return nil, err
		}
		// Only the parts tools/sched_ext builds from (libbpf, bpftool,
		// uapi headers) are unpacked from the 160 MB tarball.
		top := "linux-source-" + series
		parts := []string{top + "/tools", top + "/include", top + "/arch/x86/include", top + "/scripts", top + "/kernel/bpf", top + "/Makefile"}
		if err := unpackSource(ctx, deb, top, srcDir, parts...); err != nil {
			return nil, fmt.Errorf("unpack %s: %w", srcPkg, err)
		}
	}
	for _, n := range missing {
		if _, err := os.Stat(filepath.Join(tree, "tools/sched_ext", n+".bpf.c")); err != nil {
			return nil, fmt.Errorf("%s has no tools/sched_ext/%s.bpf.c: that kernel does not ship %s", srcPkg, n, n)
		}
	}

	if clang < "20" && slices.Contains(missing, "scx_qmap") {
		fmt.Fprintf(log, "hotlane vm: warning: building scx_qmap with clang-%s; the kernel's verifier rejects that build (install clang-22 llvm-22)\n", clang)
	}
	fmt.Fprintf(log, "hotlane vm: building %s from %s against %s with clang-%s (about a minute)\n", what, srcPkg, k.Name, clang)
	build := filepath.Join(srcDir, "build-"+filepath.Base(k.Name))
	os.RemoveAll(build)
	if err := os.MkdirAll(build, 0o755); err != nil {
		return nil, err
	}
	clangCmd := "clang-" + clang
	if needsKfuncRenames(k) {
		// The Makefile has no hook for extra BPF flags; CLANG is the one
		// variable every BPF compile (and nothing else) goes through.
		shim := filepath.Join(build, "scx_kfunc_renames.h")
		if err := safefile.WriteFile(shim, scxKfuncRenames, safefile.Readable); err != nil {
			return nil, err
		}
		clangCmd += " -include " + shim
		fmt.Fprintf(log, "hotlane vm: renaming 6.12's dispatch kfuncs to their 6.13+ names for %s\n", k.Name)
	}
	args := append([]string{"-C", filepath.Join(tree, "tools/sched_ext"), "-j2",
		"O=" + build, "CLANG=" + clangCmd, "LLVM_STRIP=llvm-strip-" + clang, "VMLINUX_BTF=" + k.Vmlinux}, missing...)
	out, err := exec.CommandContext(ctx, "make", args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("build %s: %v: %s", what, err, lastLines(string(out), 10))
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	for _, n := range missing {
		data, err := os.ReadFile(filepath.Join(build, "build/bin", n))
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", n, err)
		}
		if err := safefile.WriteFile(filepath.Join(outDir, n), data, safefile.Executable); err != nil {
			return nil, err
		}
	}
	return bins, nil
}

// scxKfuncRenames maps 6.12's dispatch kfunc names to the 6.13+ ones; see
// the header's comment.
//
//go:embed scx_kfunc_renames.h
var scxKfuncRenames []byte

// needsKfuncRenames reports whether k's examples are built from the 6.12
// fallback source for a newer kernel. Only the fallback does that: a
// kernel whose own series has a source builds from it, and 6.12 itself
// still has the old names.
func needsKfuncRenames(k *Kernel) bool {
	return k.sourceOverride == fallbackSourceSeries
}

// withFallbackSource is k with its examples built from the fallback source.
func withFallbackSource(k *Kernel) *Kernel {
	fb := *k
	fb.Suite, fb.sourceOverride = fallbackSourceSuite, fallbackSourceSeries
	return &fb
}

// cachedScx returns the paths of the named examples in dir if all are there.
func cachedScx(dir string, names []string) (map[string]string, bool) {
	bins := map[string]string{}
	for _, n := range names {
		bins[n] = filepath.Join(dir, n)
		if _, err := os.Stat(bins[n]); err != nil {
			return nil, false
		}
	}
	return bins, true
}

// scxOutDir is where the example schedulers built for k are cached.
func scxOutDir(cacheDir string, k *Kernel) string {
	_, series := sourceFor(k)
	// The clang version is part of the key: a build by another clang
	// (scx_qmap from clang 19 does not load) is not reused.
	dir := "linux-source-" + series + "--" + filepath.Base(k.Name) + "--clang-" + scxClang()
	if needsKfuncRenames(k) {
		// Builds from before the renames existed do not load; never reuse them.
		dir += "--kfunc-renames"
	}
	return filepath.Join(cacheDir, "scx", dir)
}

// checkScxTools says which host program a build of what is missing.
func checkScxTools(what string) error {
	if scxClang() == "" {
		return fmt.Errorf("%s: no clang-%s found: apt-get install clang-22 llvm-22 libelf-dev zlib1g-dev (scx_qmap needs clang 20 or newer)", what, strings.Join(scxClangs, "/"))
	}
	tools := make([]string, 0, len(scxBuildTools))
	for tool := range scxBuildTools {
		tools = append(tools, tool)
	}
	sort.Strings(tools) // the same tool named every time
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s: %s not found: apt-get install %s libelf-dev zlib1g-dev", what, tool, scxBuildTools[tool])
		}
	}
	return nil
}

// CheckScxBuild checks, before the kernel is fetched, what BuildScx will
// need for the kernel spec (a ResolveKernel spec) and names: the names
// must be kernel examples, and unless the binaries are cached the build
// tools must be on this machine. On a fresh machine the tools are the
// likeliest thing missing, and finding that out after downloading a
// kernel wastes the download.
func CheckScxBuild(cacheDir, spec string, names []string) error {
	for _, n := range names {
		if err := CheckScxName(n); err != nil {
			return err
		}
	}
	if len(names) == 0 || scxCached(cacheDir, spec, names) {
		return nil
	}
	sorted := slices.Clone(names)
	sort.Strings(sorted)
	return checkScxTools(strings.Join(slices.Compact(sorted), " "))
}

// scxCached reports whether BuildScx would find every name cached for the
// kernel spec. A bare suite names its kernel only after an apt update, so
// for it any cached build with all the names counts: refusing to run for
// lack of a compiler that turns out not to be needed would be worse than
// the rare late error.
func scxCached(cacheDir, spec string, names []string) bool {
	if spec == "" {
		spec = DefaultKernel
	}
	spec = expandKernelName(spec)
	var dirs []string
	switch suite, pkg, _ := strings.Cut(spec, "/"); {
	case isLocalPath(spec):
		dirs = []string{scxOutDir(cacheDir, &Kernel{Name: spec})}
	case pkg != "":
		dirs = []string{scxOutDir(cacheDir, &Kernel{Name: pkg, Suite: suite})}
	default:
		dirs, _ = filepath.Glob(filepath.Join(cacheDir, "scx", "*"))
	}
	for _, dir := range dirs {
		all := true
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// The pinned VM kernel's linux-source, the default for local images, and
// the one the sched_ext examples are built from when a kernel's own
// series has no source package.
const (
	pinnedSourceSuite, pinnedSourceSeries     = "trixie-backports", "7.3"
	fallbackSourceSuite, fallbackSourceSeries = "trixie", "6.12"
)

var seriesRE = regexp.MustCompile(`-(\d+\.\d+)\.\d+(\+deb|-\d)`)

// sourceFor picks the suite and kernel series (e.g. "7.3") whose
// linux-source matches the kernel; a local image gets the pinned one.
func sourceFor(k *Kernel) (suite, series string) {
	suite, series = pinnedSourceSuite, pinnedSourceSeries
	if k.sourceOverride != "" {
		return k.Suite, k.sourceOverride
	}
	if m := seriesRE.FindStringSubmatch(k.Name); m != nil {
		series = m[1]
		if k.Suite != "" {
			suite = k.Suite
		}
	}
	return suite, series
}
