package vm

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// ScxSimpleGuestPath is where the runner puts the upstream scx_simple.
const ScxSimpleGuestPath = "/usr/bin/scx_simple"

// scxBuildTools are the host programs the upstream build needs, with the
// Debian packages that provide them.
var scxBuildTools = map[string]string{
	"clang-19":      "clang-19",
	"llvm-strip-19": "llvm-19",
	"make":          "make",
	"gcc":           "gcc",
	"dpkg-deb":      "dpkg",
	"tar":           "tar",
	"xz":            "xz-utils",
}

// BuildScxSimple builds the kernel's own tools/sched_ext/scx_simple from
// Debian's linux-source package against the BTF of k, and caches the
// binary. The source is never copied into the repository: it is fetched
// and built here, at test time.
func BuildScxSimple(ctx context.Context, cacheDir string, k *Kernel, log io.Writer) (string, error) {
	if k.Vmlinux == "" {
		return "", fmt.Errorf("scx_simple: no vmlinux with BTF for %s", k.Name)
	}
	suite, series := sourceFor(k)
	srcPkg := "linux-source-" + series
	outDir := filepath.Join(cacheDir, "scx_simple", srcPkg+"--"+filepath.Base(k.Name))
	bin := filepath.Join(outDir, "scx_simple")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	for tool, pkg := range scxBuildTools {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("scx_simple: %s not found: apt-get install %s libelf-dev zlib1g-dev", tool, pkg)
		}
	}

	srcDir := filepath.Join(cacheDir, "src", srcPkg)
	tree := filepath.Join(srcDir, "linux-source-"+series)
	if _, err := os.Stat(filepath.Join(tree, "tools/sched_ext/Makefile")); err != nil {
		a, err := newApt(ctx, cacheDir, suite)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(log, "hotlane vm: fetching %s from %s for scx_simple\n", srcPkg, suite)
		if err := a.update(ctx); err != nil {
			return "", err
		}
		deb, err := a.download(ctx, srcPkg)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(srcDir, 0o755); err != nil {
			return "", err
		}
		// Only the parts tools/sched_ext builds from (libbpf, bpftool,
		// uapi headers) are unpacked from the 160 MB tarball.
		top := "linux-source-" + series
		parts := []string{top + "/tools", top + "/include", top + "/arch/x86/include", top + "/scripts", top + "/kernel/bpf", top + "/Makefile"}
		script := fmt.Sprintf("dpkg-deb --fsys-tarfile %q | tar -xOf - ./usr/src/%s.tar.xz | tar -xJf - -C %q %s",
			deb, top, srcDir, strings.Join(quoteAll(parts), " "))
		if out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput(); err != nil {
			return "", fmt.Errorf("unpack %s: %v: %s", srcPkg, err, lastLines(string(out), 5))
		}
	}

	fmt.Fprintf(log, "hotlane vm: building scx_simple from %s against %s (about a minute)\n", srcPkg, k.Name)
	build := filepath.Join(srcDir, "build-"+filepath.Base(k.Name))
	os.RemoveAll(build)
	if err := os.MkdirAll(build, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "make", "-C", filepath.Join(tree, "tools/sched_ext"), "-j2",
		"O="+build, "CLANG=clang-19", "LLVM_STRIP=llvm-strip-19", "VMLINUX_BTF="+k.Vmlinux, "scx_simple")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build scx_simple: %v: %s", err, lastLines(string(out), 10))
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	built := filepath.Join(build, "build/bin/scx_simple")
	data, err := os.ReadFile(built)
	if err != nil {
		return "", fmt.Errorf("build scx_simple: %w", err)
	}
	if err := os.WriteFile(bin+".tmp", data, 0o755); err != nil {
		return "", err
	}
	return bin, os.Rename(bin+".tmp", bin)
}

var seriesRE = regexp.MustCompile(`-(\d+\.\d+)\.\d+\+deb`)

// sourceFor picks the suite and kernel series (e.g. "7.3") whose
// linux-source matches the kernel; a local image gets the pinned one.
func sourceFor(k *Kernel) (suite, series string) {
	suite, series = "trixie-backports", "7.3"
	if m := seriesRE.FindStringSubmatch(k.Name); m != nil {
		series = m[1]
		if k.Suite != "" {
			suite = k.Suite
		}
	}
	return suite, series
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return q
}
