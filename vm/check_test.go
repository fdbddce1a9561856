package vm

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// staticELF writes the smallest ELF executable header: no program
// headers, so no interpreter, which is all checkStatic looks at.
func staticELF(t *testing.T, dir string) string {
	t.Helper()
	h := make([]byte, 64)
	copy(h, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(h[16:], 2)  // ET_EXEC
	binary.LittleEndian.PutUint16(h[18:], 62) // EM_X86_64
	binary.LittleEndian.PutUint32(h[20:], 1)  // EV_CURRENT
	binary.LittleEndian.PutUint16(h[52:], 64) // e_ehsize
	binary.LittleEndian.PutUint16(h[54:], 56) // e_phentsize
	binary.LittleEndian.PutUint16(h[58:], 64) // e_shentsize
	p := filepath.Join(dir, "init")
	if err := os.WriteFile(p, h, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	initBin := staticELF(t, dir)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "no", "such")
	valid := func() Config {
		return Config{
			Init: initBin, Args: []string{"doctor"}, Env: []string{"A=1", "B="},
			Files:       map[string]string{"/data": file},
			Executables: map[string]string{"/x": initBin},
			ResultsDir:  filepath.Join(dir, "results", "new"),
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no command", func(c *Config) { c.Args = nil }, "no command"},
		{"empty command", func(c *Config) { c.Args = []string{""} }, "no command"},
		{"env without =", func(c *Config) { c.Env = []string{"NOEQ"} }, `"NOEQ" is not NAME=VALUE`},
		{"env without name", func(c *Config) { c.Env = []string{"=1"} }, "is not NAME=VALUE"},
		{"init missing", func(c *Config) { c.Init = missing }, "init binary"},
		{"init dynamic", func(c *Config) { c.Init = "/bin/sh" }, "dynamically linked"},
		{"file missing", func(c *Config) { c.Files["/m"] = missing }, "cannot add " + missing + " to the guest as /m: no such file"},
		{"file under a file", func(c *Config) { c.Files["/m"] = filepath.Join(file, "x") }, "no such file"},
		{"executable a directory", func(c *Config) { c.Executables["/d"] = dir }, "not a regular file"},
		{"results a file", func(c *Config) { c.ResultsDir = file }, "is a file, not a directory"},
	} {
		cfg := valid()
		tc.change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}

	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		cfg := valid()
		if err := cfg.Validate(); !errors.Is(err, ErrQemuMissing) {
			t.Errorf("without qemu: Validate() = %v, want ErrQemuMissing", err)
		}
		return
	}
	cfg := valid()
	if err := cfg.Validate(); err != nil {
		t.Errorf("valid config: Validate() = %v", err)
	}
	if _, err := os.Stat(cfg.ResultsDir); err == nil {
		t.Error("Validate created the results directory")
	}
}

// Run checks the configuration before it boots anything, so a missing
// file fails at once even with a kernel that could not boot.
func TestRunValidatesFirst(t *testing.T) {
	dir := t.TempDir()
	_, err := Run(context.Background(), Config{
		Kernel: &Kernel{Name: "none", Vmlinuz: filepath.Join(dir, "vmlinuz")},
		Init:   staticELF(t, dir), Args: []string{"/x"},
		Executables: map[string]string{"/x": filepath.Join(dir, "missing")},
	})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Run = %v, want the missing file", err)
	}
}

func TestParseAdd(t *testing.T) {
	for _, tc := range []struct {
		spec, host, guest string
		bad               bool
	}{
		{spec: "/usr/bin/cyclictest", host: "/usr/bin/cyclictest", guest: "/usr/bin/cyclictest"},
		{spec: "./sched.test:/sched.test", host: "./sched.test", guest: "/sched.test"},
		{spec: "a:/b:c", host: "a", guest: "/b:c"},
		{spec: "", bad: true},
		{spec: ":/x", bad: true},
		{spec: "/x:", bad: true},
	} {
		host, guest, err := ParseAdd(tc.spec)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseAdd(%q) = %q, %q; want an error", tc.spec, host, guest)
			}
			continue
		}
		if err != nil || host != tc.host || guest != tc.guest {
			t.Errorf("ParseAdd(%q) = %q, %q, %v; want %q, %q", tc.spec, host, guest, err, tc.host, tc.guest)
		}
	}
}

func TestCheckCommand(t *testing.T) {
	subcommands := []string{"doctor", "bench"}
	added := []string{"/sched.test", "/bin/sleep", "/usr/bin/scx_simple"}
	for _, tc := range []struct {
		cmd  string
		want string // "" for accepted, else part of the error
	}{
		{"doctor", ""},
		{"bench", ""},
		{"doctr", `"doctr" is not a hotlane command`},
		{"vm", "is not a hotlane command"},
		{"/init", ""},
		{"/sched.test", ""},
		{"./sched.test", ""},
		{"/usr/bin/sleep", ""}, // /bin is /usr/bin in the guest
		{"/bin/scx_simple", ""},
		{"/other.test", "/other.test is not in the guest"},
		{"", "no command"},
	} {
		err := CheckCommand([]string{tc.cmd, "-v"}, subcommands, added)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckCommand(%q) = %v, want nil", tc.cmd, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckCommand(%q) = %v, want an error containing %q", tc.cmd, err, tc.want)
		}
	}
	if err := CheckCommand(nil, subcommands, added); err == nil {
		t.Error("CheckCommand(nil) accepted no command")
	}
}

func TestCheckKernelSpec(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "vmlinuz-text")
	os.WriteFile(text, []byte("not a kernel\n"), 0o644)
	bz := make([]byte, 0x300)
	copy(bz[0x202:], "HdrS")
	bzImage := filepath.Join(dir, "vmlinuz")
	os.WriteFile(bzImage, bz, 0o644)
	for _, tc := range []struct {
		spec string
		want error // nil: accepted
		text string
	}{
		{spec: ""},
		{spec: "sid"},
		{spec: DefaultKernel},
		{spec: "6.17"},
		{spec: "7.3"},
		{spec: "7.2"},
		{spec: "6.12"},
		{spec: "trixie/linux-source-6.12"},
		{spec: "6.1", want: ErrUnknownSuite, text: "test matrix (6.12, 6.17, 7.2, 7.3)"},
		{spec: bzImage},
		{spec: "bogus-suite", want: ErrUnknownSuite},
		{spec: "bogus/linux-binary-7.3.4", want: ErrUnknownSuite},
		{spec: "sid/Bad_Name", text: "not a Debian package name"},
		{spec: "sid/", text: "not a Debian package name"},
		{spec: "sid/a/b", text: "not a Debian package name"},
		{spec: "/nonexistent", want: ErrKernelNotFound},
		{spec: dir, want: ErrNotAKernel},
		{spec: text, want: ErrNotAKernel},
	} {
		err := CheckKernelSpec(tc.spec)
		switch {
		case tc.want == nil && tc.text == "":
			if err != nil {
				t.Errorf("CheckKernelSpec(%q) = %v, want nil", tc.spec, err)
			}
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("CheckKernelSpec(%q) = %v, want %v", tc.spec, err, tc.want)
		case tc.text != "" && (err == nil || !strings.Contains(err.Error(), tc.text)):
			t.Errorf("CheckKernelSpec(%q) = %v, want an error containing %q", tc.spec, err, tc.text)
		}
	}
}

func TestCheckScxBuild(t *testing.T) {
	cache := t.TempDir()
	// No build tool is found with an empty PATH.
	t.Setenv("PATH", "")
	if err := CheckScxBuild(cache, "", []string{"scx_bogus"}); err == nil || !strings.Contains(err.Error(), "scx_bogus") {
		t.Errorf("unknown example: %v", err)
	}
	if err := CheckScxBuild(cache, "", nil); err != nil {
		t.Errorf("nothing to build: %v", err)
	}
	err := CheckScxBuild(cache, "", []string{"scx_simple"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install") {
		t.Fatalf("nothing cached, no tools: %v, want the missing tool", err)
	}

	// Cached for the default kernel: no tools needed, for it or its suite.
	out := scxOutDir(cache, &Kernel{Name: "linux-binary-7.3.4+deb13-cloud-amd64", Suite: "trixie-backports"})
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(out, "scx_simple"), []byte("x"), 0o755)
	for _, spec := range []string{"", DefaultKernel, "trixie-backports"} {
		if err := CheckScxBuild(cache, spec, []string{"scx_simple", "scx_simple"}); err != nil {
			t.Errorf("CheckScxBuild(%q) with scx_simple cached: %v", spec, err)
		}
	}
	// Not cached: another example, or another kernel.
	if err := CheckScxBuild(cache, "", []string{"scx_simple", "scx_qmap"}); err == nil {
		t.Error("scx_qmap not cached, no tools: accepted")
	}
	if err := CheckScxBuild(cache, "sid/linux-binary-7.2.13+deb14-cloud-amd64", []string{"scx_simple"}); err == nil {
		t.Error("other kernel, no tools: accepted")
	}
}

// Files to add never replace what the runner puts in every guest: its
// /init above all, which runs the command and reports back.
func TestCheckGuestPath(t *testing.T) {
	for _, tc := range []struct {
		guest string
		scx   []string
		want  string // in the error; "" for accepted
	}{
		{guest: "/init", want: "it is hotlane itself"},
		{guest: "//init", want: "it is hotlane itself"},
		{guest: "/tmp/../init", want: "it is hotlane itself"},
		{guest: "init", want: "it is hotlane itself"},
		{guest: "/hotlane/guest.json", want: "the runner's configuration"},
		{guest: "/hotlane", want: "the runner's configuration"},
		{guest: "/", want: "the root directory"},
		{guest: "/bin", want: "every guest has it"},
		{guest: "/usr/bin", want: "every guest has it"},
		{guest: "/dev/console", want: "every guest has it"},
		{guest: "/results", want: "every guest has it"},
		{guest: "/bin/scx_simple", scx: []string{"scx_qmap", "scx_simple"}, want: "--scx scx_simple builds it"},
		{guest: "/usr/bin/scx_simple"},
		{guest: "/usr/bin/scx_qmap", scx: []string{"scx_simple"}},
		{guest: "/sched.test"},
		{guest: "/initrd"},
		{guest: "/bin/init"},
		{guest: "/results/input.json"},
	} {
		err := CheckGuestPath("/host/file", tc.guest, tc.scx)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckGuestPath(%q, %v) = %v, want nil", tc.guest, tc.scx, err)
		case tc.want != "" && (!errors.Is(err, ErrRunnerOwnedPath) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckGuestPath(%q, %v) = %v, want %v saying %q", tc.guest, tc.scx, err, ErrRunnerOwnedPath, tc.want)
		}
	}
	// Config.Validate refuses them too, for callers of Run.
	dir := t.TempDir()
	initBin := staticELF(t, dir)
	cfg := Config{Init: initBin, Args: []string{"doctor"}, Files: map[string]string{"/init": initBin}}
	if err := cfg.Validate(); !errors.Is(err, ErrRunnerOwnedPath) {
		t.Errorf("Validate with a file at /init = %v, want %v", err, ErrRunnerOwnedPath)
	}
}
