package vm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sourceDeb builds a linux-source-like .deb holding ./usr/src/TOP.tar.xz
// with the files given (path under TOP: content), in dir.
func sourceDeb(t *testing.T, dir, top string, files map[string]string) string {
	t.Helper()
	for _, tool := range []string{"dpkg-deb", "tar", "xz"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s, which unpacking a linux-source package runs", tool)
		}
	}
	tree := filepath.Join(t.TempDir(), "tree")
	for name, content := range files {
		p := filepath.Join(tree, top, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkg := filepath.Join(t.TempDir(), "pkg")
	for _, d := range []string{"DEBIAN", "usr/src"} {
		if err := os.MkdirAll(filepath.Join(pkg, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	control := "Package: " + top + "\nVersion: 1\nArchitecture: all\nMaintainer: hotlane <hotlane@example.org>\nDescription: test\n"
	if err := os.WriteFile(filepath.Join(pkg, "DEBIAN/control"), []byte(control), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("tar", "-cJf", filepath.Join(pkg, "usr/src", top+".tar.xz"), "-C", tree, top)
	deb := filepath.Join(dir, top+".deb")
	run("dpkg-deb", "--root-owner-group", "-Zxz", "--build", pkg, deb)
	return deb
}

// Paths reach dpkg-deb and tar as arguments, never as shell code: a cache
// directory named with a command substitution, quotes and a semicolon is
// just a name, and the command in it never runs.
func TestUnpackSourceRunsNoShell(t *testing.T) {
	work := t.TempDir()
	// A command that runs leaves X in the working directory.
	t.Chdir(work)
	cache := filepath.Join(work, "c$(touch X)`touch X`\"; touch X; '")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	deb := sourceDeb(t, cache, "linux-source-9.9", map[string]string{
		"tools/sched_ext/Makefile": "all:\n",
		"drivers/big.c":            "not wanted\n",
	})
	dest := filepath.Join(cache, "src")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	err := unpackSource(context.Background(), deb, "linux-source-9.9", dest, "linux-source-9.9/tools")
	if _, err := os.Stat(filepath.Join(work, "X")); err == nil {
		t.Error("a command in the cache path ran")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dest, "linux-source-9.9/tools/sched_ext/Makefile")); err != nil || string(got) != "all:\n" {
		t.Errorf("the member asked for: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dest, "linux-source-9.9/drivers")); err == nil {
		t.Error("unpacked a member not asked for")
	}

	// A failure names the program that failed and what it said.
	err = unpackSource(context.Background(), deb, "linux-source-9.9", dest, "linux-source-9.9/absent")
	if err == nil || !strings.Contains(err.Error(), "tar -xJf") || !strings.Contains(err.Error(), "absent") {
		t.Errorf("unpacking an absent member: %v, want tar's complaint", err)
	}
}
