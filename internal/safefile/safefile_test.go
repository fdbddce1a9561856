package safefile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// victim writes the 0600 file an attack would have overwritten.
func victim(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "victim")
	if err := os.WriteFile(p, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantUntouched fails unless path holds want and dir no temporary file.
func wantUntouched(t *testing.T, path, want, after string) {
	t.Helper()
	if got := readFile(t, path); got != want {
		t.Errorf("after %s %s holds %q, want %q", after, filepath.Base(path), got, want)
	}
	if tmp := leftovers(t, filepath.Dir(path)); len(tmp) > 0 {
		t.Errorf("%s left %v", after, tmp)
	}
}

// leftovers lists the temporary files in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tmp []string
	for _, e := range entries {
		if strings.Contains(e.Name(), tmpMarker) {
			tmp = append(tmp, e.Name())
		}
	}
	return tmp
}

func TestWriteReplacesWhenComplete(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	if err := os.WriteFile(path, []byte("PRECIOUS"), 0o644); err != nil {
		t.Fatal(err)
	}
	failure := errors.New("the run failed")
	err := Write(path, Readable, func(w io.Writer) error {
		io.WriteString(w, "half")
		return failure
	})
	if !errors.Is(err, failure) {
		t.Fatalf("Write with a failing fn = %v, want its error", err)
	}
	wantUntouched(t, path, "PRECIOUS", "a failed write")
	if err := WriteFile(path, []byte("new"), Readable); err != nil {
		t.Fatal(err)
	}
	wantUntouched(t, path, "new", "a write")
}

// A run killed before it committed (here: one that never calls Commit or
// Abort) leaves the old file and a recognisable temporary file, never an
// empty or partial target.
func TestUncommittedLeavesTargetAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stats.jsonl")
	if err := os.WriteFile(path, []byte("PRECIOUS"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, Readable)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(f, "partial line"); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "PRECIOUS" {
		t.Errorf("during the write the target holds %q, want it untouched", got)
	}
	tmp := leftovers(t, dir)
	if len(tmp) != 1 || !strings.HasPrefix(tmp[0], ".stats.jsonl"+tmpMarker) {
		t.Errorf("temporary files %v, want one named .stats.jsonl%s*", tmp, tmpMarker)
	}
	f.Abort()
	wantUntouched(t, path, "PRECIOUS", "Abort")
}

func TestModeIgnoresUmask(t *testing.T) {
	dir := t.TempDir()
	for _, umask := range []int{0, 0o077, 0o022} {
		old := syscall.Umask(umask)
		for _, perm := range []fs.FileMode{Readable, OwnerOnly, Executable} {
			path := filepath.Join(dir, "f")
			err := WriteFile(path, []byte("x"), perm)
			if err != nil {
				syscall.Umask(old)
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				syscall.Umask(old)
				t.Fatal(err)
			}
			if fi.Mode().Perm() != perm {
				t.Errorf("umask %03o: mode %v, want %v", umask, fi.Mode().Perm(), perm)
			}
		}
		syscall.Umask(old)
	}
}

func TestRefusesLinksAndSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	victim := victim(t, dir)
	link := filepath.Join(dir, "out.json")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling.json")
	if err := os.Symlink(filepath.Join(dir, "absent"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error
	}{
		{link, ErrSymlink},
		{dangling, ErrSymlink},
		{dir, syscall.EISDIR},
		{"/dev/null", ErrNotRegular},
		{filepath.Join(dir, "no", "such"), fs.ErrNotExist},
		{filepath.Join(victim, "sub"), syscall.ENOTDIR},
	} {
		if err := Check(tc.path); !errors.Is(err, tc.want) {
			t.Errorf("Check(%s) = %v, want %v", tc.path, err, tc.want)
		}
		if err := WriteFile(tc.path, []byte("ATTACK"), Readable); !errors.Is(err, tc.want) {
			t.Errorf("WriteFile(%s) = %v, want %v", tc.path, err, tc.want)
		}
	}
	wantUntouched(t, victim, "SECRET", "refused writes")
	if _, err := os.Lstat(filepath.Join(dir, "absent")); err == nil {
		t.Error("a write through the dangling link created its target")
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
}

// A link made at the target while the run went on is not replaced, and
// not written through.
func TestCommitRefusesLinkMadeDuringRun(t *testing.T) {
	dir := t.TempDir()
	victim := victim(t, dir)
	path := filepath.Join(dir, "out.json")
	f, err := Create(path, Readable)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "report")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); !errors.Is(err, ErrSymlink) {
		t.Errorf("Commit over a new link = %v, want %v", err, ErrSymlink)
	}
	wantUntouched(t, victim, "SECRET", "a refused commit")
}

// Links planted at the names a predictable writer would use (NAME.tmp,
// the old temporary name of the vmlinux extraction) are not followed.
func TestPlantedTemporaryNamesAreIgnored(t *testing.T) {
	dir := t.TempDir()
	victim := victim(t, dir)
	path := filepath.Join(dir, "vmlinux")
	for _, name := range []string{path + ".tmp", filepath.Join(dir, ".vmlinux.tmp")} {
		if err := os.Symlink(victim, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFile(path, []byte("ELF"), Readable); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, victim); got != "SECRET" {
		t.Errorf("the victim holds %q, want it untouched", got)
	}
	wantUntouched(t, path, "ELF", "a write beside planted links")
}

func TestCheckCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := Check(filepath.Join(dir, "out.json")); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("Check created %v", entries)
	}
}

// A stream replaces its target when published, not before, and goes on
// growing there: a reader following the path sees every line written
// after, and Commit leaves it in place.
func TestPublishedStreamGrowsInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stats.jsonl")
	if err := os.WriteFile(path, []byte("PRECIOUS"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, Readable)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "1\n")
	if got := readFile(t, path); got != "PRECIOUS" {
		t.Errorf("before Publish the target holds %q, want it untouched", got)
	}
	if err := f.Publish(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "1\n" {
		t.Errorf("after Publish the target holds %q", got)
	}
	io.WriteString(f, "2\n")
	if got := readFile(t, path); got != "1\n2\n" {
		t.Errorf("a line written after Publish: the target holds %q", got)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	wantUntouched(t, path, "1\n2\n", "Commit and Abort after Publish")
	if tmp := leftovers(t, dir); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// CheckDir accepts a directory or a path that can become one, creates
// nothing, and names the path by what gave it.
func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, want string // want in the error; "" for none
	}{
		{dir, ""},
		{filepath.Join(dir, "new", "deeper"), ""},
		{file, "--out " + file + " is a file, not a directory"},
		{filepath.Join(file, "sub"), "--out " + filepath.Join(file, "sub") + " cannot be created: " + file + " is a file, not a directory"},
	} {
		err := CheckDir("--out", tt.path)
		if (err == nil) != (tt.want == "") || (err != nil && err.Error() != tt.want) {
			t.Errorf("CheckDir(%s) = %v, want %q", tt.path, err, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CheckDir created a directory: %v", err)
	}
}
