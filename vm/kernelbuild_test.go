package vm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A kernel built here is named after its source's Debian version, and the
// sched_ext examples for it come from the same source series and suite.
func TestBuiltKernelSource(t *testing.T) {
	for _, tc := range []struct {
		k             Kernel
		suite, series string
	}{
		{Kernel{Name: "linux-hotlane-6.12.117-1", Suite: "trixie"}, "trixie", "6.12"},
		{Kernel{Name: "linux-binary-7.3.4+deb13-cloud-amd64", Suite: "trixie-backports"}, "trixie-backports", "7.3"},
		{Kernel{Name: "linux-image-6.17.13+deb13-cloud-amd64", Suite: "trixie-backports"}, "trixie-backports", "6.17"},
		{Kernel{Name: "/boot/vmlinuz-local"}, "trixie-backports", "7.3"},
	} {
		suite, series := sourceFor(&tc.k)
		if suite != tc.suite || series != tc.series {
			t.Errorf("sourceFor(%s) = %s %s, want %s %s", tc.k.Name, suite, series, tc.suite, tc.series)
		}
	}
	for _, pkg := range []string{"linux-source-6.12", "linux-source-7.3"} {
		if !sourcePackageRE.MatchString(pkg) {
			t.Errorf("%s is not taken for a source to build", pkg)
		}
	}
	for _, pkg := range []string{"linux-source", "linux-binary-7.3.4+deb13-cloud-amd64", "linux-source-6.12-extra"} {
		if sourcePackageRE.MatchString(pkg) {
			t.Errorf("%s is taken for a source to build", pkg)
		}
	}
}

// A source spec may ask for a tick rate; the build is configured with it
// alone, and a rate Kconfig does not offer is refused before anything is
// fetched.
func TestSourceBuildTickRate(t *testing.T) {
	for _, tc := range []struct {
		pkg    string
		ok     bool
		hz     int
		errIs  error
		errHas string
	}{
		{pkg: "linux-source-7.3", ok: true, hz: 250},
		{pkg: "linux-source-7.3,hz=1000", ok: true, hz: 1000},
		{pkg: "linux-source-6.12,hz=100", ok: true, hz: 100},
		{pkg: "linux-source-7.3,hz=500", ok: true, errIs: ErrBadKernelHZ},
		{pkg: "linux-source-7.3,preempt=full", ok: true, errHas: "the one option is hz=N"},
		{pkg: "linux-binary-7.3.4+deb13-cloud-amd64", ok: false},
	} {
		b, ok, err := parseSourceBuild(tc.pkg)
		if ok != tc.ok {
			t.Errorf("%s: taken for a source build: %v, want %v", tc.pkg, ok, tc.ok)
			continue
		}
		switch {
		case tc.errIs != nil || tc.errHas != "":
			if err == nil || (tc.errIs != nil && !errors.Is(err, tc.errIs)) || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%s: error %v, want %v %q", tc.pkg, err, tc.errIs, tc.errHas)
			}
			if cerr := CheckKernelSpec("trixie/" + tc.pkg); cerr == nil {
				t.Errorf("CheckKernelSpec(trixie/%s) passed", tc.pkg)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.pkg, err)
		case tc.ok && b.hz != tc.hz:
			t.Errorf("%s: %d Hz, want %d", tc.pkg, b.hz, tc.hz)
		case tc.ok:
			if cerr := CheckKernelSpec("trixie/" + tc.pkg); cerr != nil {
				t.Errorf("CheckKernelSpec(trixie/%s): %v", tc.pkg, cerr)
			}
		}
	}

	opts := strings.Join(sourceBuild{pkg: "linux-source-7.3", series: "7.3", hz: 1000}.configOptions(), " ")
	if !strings.HasSuffix(opts, "-d HZ_100 -d HZ_250 -d HZ_300 -e HZ_1000") {
		t.Errorf("1000 Hz build options end %q", opts[max(len(opts)-60, 0):])
	}
	if strings.Count(opts, "HZ_") != 4 {
		t.Errorf("options name a tick rate other than through configOptions: %s", opts)
	}
}

// The newest cached build of a series is used, and only a complete one.
func TestCachedBuiltKernel(t *testing.T) {
	cache := t.TempDir()
	at250 := sourceBuild{pkg: "linux-source-6.12", series: "6.12", hz: defaultKernelHZ}
	if _, ok := cachedBuiltKernel(cache, "trixie", at250); ok {
		t.Fatal("an empty cache has a built kernel")
	}
	for _, name := range []string{"linux-hotlane-6.12.9-1", "linux-hotlane-6.12.117-1", "linux-hotlane-6.12.200-1"} {
		dir := filepath.Join(cache, "kernels", name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "vmlinuz"), nil, 0o644)
		if name != "linux-hotlane-6.12.200-1" { // half-written: no vmlinux
			os.WriteFile(filepath.Join(dir, "vmlinux"), nil, 0o644)
		}
	}
	k, ok := cachedBuiltKernel(cache, "trixie", at250)
	if !ok || k.Name != "linux-hotlane-6.12.117-1" || k.Suite != "trixie" {
		t.Errorf("cached build = %+v, %v; want linux-hotlane-6.12.117-1 from trixie", k, ok)
	}
	if _, ok := cachedBuiltKernel(cache, "trixie", sourceBuild{pkg: "linux-source-6.1", series: "6.1", hz: defaultKernelHZ}); ok {
		t.Error("series 6.1 matched a 6.12 build")
	}
	at1000 := sourceBuild{pkg: "linux-source-6.12", series: "6.12", hz: 1000}
	if k, ok := cachedBuiltKernel(cache, "trixie", at1000); ok {
		t.Errorf("a 250 Hz build %s was taken for a 1000 Hz one", k.Name)
	}
	dir := filepath.Join(cache, "kernels", at1000.builtName("6.12.117-1"))
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "vmlinuz"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "vmlinux"), nil, 0o644)
	if k, ok := cachedBuiltKernel(cache, "trixie", at1000); !ok || k.Name != "linux-hotlane-hz1000-6.12.117-1" {
		t.Errorf("1000 Hz build = %+v, %v; want linux-hotlane-hz1000-6.12.117-1", k, ok)
	}
	if k, _ := cachedBuiltKernel(cache, "trixie", at250); k.Name != "linux-hotlane-6.12.117-1" {
		t.Errorf("the 250 Hz build is now %s", k.Name)
	}
}

// A build is cached whole in a cache that has no kernels/ yet (a fresh
// one), and becomes the series' cached build.
func TestInstallBuiltKernelIntoAFreshCache(t *testing.T) {
	cache, build := t.TempDir(), t.TempDir()
	files := map[string]string{"arch/x86/boot/bzImage": "bz", "vmlinux": "elf", ".config": "CONFIG_HZ=250"}
	for f, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(build, f)), 0o755)
		if err := os.WriteFile(filepath.Join(build, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := installBuiltKernel(cache, build, "linux-hotlane-7.3.4-1"); err != nil {
		t.Fatal(err)
	}
	k, ok := cachedBuiltKernel(cache, "trixie", sourceBuild{pkg: "linux-source-7.3", series: "7.3", hz: defaultKernelHZ})
	if !ok {
		t.Fatal("the installed build is not cached")
	}
	for path, want := range map[string]string{k.Vmlinuz: "bz", k.Vmlinux: "elf"} {
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "kernels", "build-*")); len(left) > 0 {
		t.Errorf("staging directories left behind: %v", left)
	}
}

// A configuration that lost an option to a missing dependency is refused
// by name.
func TestCheckKernelConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".config")
	os.WriteFile(path, []byte("#\nCONFIG_BPF_JIT=y\n# CONFIG_DEBUG_INFO_BTF is not set\nCONFIG_SCHED_CLASS_EXT=m\n"), 0o644)
	err := checkKernelConfig(path, []string{"CONFIG_BPF_JIT", "CONFIG_DEBUG_INFO_BTF", "CONFIG_SCHED_CLASS_EXT"})
	if err == nil || !strings.Contains(err.Error(), "CONFIG_DEBUG_INFO_BTF, CONFIG_SCHED_CLASS_EXT") || strings.Contains(err.Error(), "BPF_JIT") {
		t.Errorf("checkKernelConfig = %v, want the two missing options named and BPF_JIT not", err)
	}
	if err := checkKernelConfig(path, []string{"CONFIG_BPF_JIT"}); err != nil {
		t.Errorf("checkKernelConfig(present option) = %v", err)
	}
}

// The build's output is counted in steps, and its last lines kept for an
// error.
func TestFollowBuild(t *testing.T) {
	var in bytes.Buffer
	for i := range 20 {
		in.WriteString("  CC      kernel/f" + string(rune('a'+i)) + ".o\n")
	}
	in.WriteString("kernel/sched/ext.c:1:1: error: something\nmake: *** [Makefile:1] Error 2\n")
	var log bytes.Buffer
	tail, steps := followBuild(&in, &log, time.Now())
	if steps != 20 {
		t.Errorf("steps = %d, want 20", steps)
	}
	if len(tail) != 15 || tail[len(tail)-1] != "make: *** [Makefile:1] Error 2" {
		t.Errorf("tail = %q, want the last 15 lines", tail)
	}
}

// A kernel whose examples were built from the fallback source gets that
// build back from the cache, without asking apt for its own source again.
func TestBuildScxReusesTheFallbackBuild(t *testing.T) {
	cache := t.TempDir()
	k := &Kernel{Name: "linux-image-6.17.13+deb13-cloud-amd64", Suite: "trixie-backports", Vmlinux: "/nonexistent/vmlinux"}
	dir := scxOutDir(cache, withFallbackSource(k))
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "scx_simple"), nil, 0o755)
	bins, err := BuildScx(context.Background(), cache, k, []string{"scx_simple"}, io.Discard)
	if err != nil || bins["scx_simple"] != filepath.Join(dir, "scx_simple") {
		t.Errorf("BuildScx = %v, %v; want the fallback build in %s", bins, err, dir)
	}
	if !strings.Contains(dir, "linux-source-6.12--") {
		t.Errorf("fallback build cached in %s, want it named after linux-source-6.12", dir)
	}
}

// Examples built from the 6.12 fallback source for a newer kernel get the
// kfunc renames, and builds from before the renames (which do not load
// there) are never taken for them.
func TestFallbackBuildRenamesKfuncs(t *testing.T) {
	k := &Kernel{Name: "linux-image-6.17.13+deb13-cloud-amd64", Suite: "trixie-backports"}
	fb := withFallbackSource(k)
	if !needsKfuncRenames(fb) {
		t.Errorf("needsKfuncRenames(%s built from 6.12) = false, want true", k.Name)
	}
	own := &Kernel{Name: "linux-hotlane-6.12.117-1"}
	if needsKfuncRenames(own) || needsKfuncRenames(k) {
		t.Error("needsKfuncRenames = true for a kernel built from its own source")
	}
	cache := t.TempDir()
	if dir := scxOutDir(cache, fb); !strings.HasSuffix(dir, "--kfunc-renames") {
		t.Errorf("fallback build cached in %s, want a directory of its own (--kfunc-renames)", dir)
	}
	for _, old := range []string{"scx_bpf_dispatch", "scx_bpf_dispatch_vtime", "scx_bpf_consume"} {
		if !bytes.Contains(scxKfuncRenames, []byte("#define "+old+"\t")) {
			t.Errorf("the renames do not cover %s, which 6.12's scx_simple calls", old)
		}
	}
}
