package vm

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A work directory that no run holds and that is older than a minute is
// removed; one a live run holds, or one just made, is left alone.
func TestRemoveStaleWorkDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	now := time.Now()
	old := now.Add(-2 * staleAfter)
	dir := func(name string, mtime time.Time) string {
		path := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(path, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "initrd.cpio.gz"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return path
	}
	killed := dir(workDirPrefix+"killed", old)
	fresh := dir(workDirPrefix+"fresh", now)
	other := dir("someone-else", old)
	live, err := newWorkDir() // removes killed, and is itself fresh
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	if err := os.Chtimes(live.path, old, old); err != nil {
		t.Fatal(err)
	}
	removeStaleWorkDirs(tmp, now)

	for path, want := range map[string]bool{killed: false, fresh: true, other: true, live.path: true} {
		_, err := os.Stat(path)
		if got := err == nil; got != want {
			t.Errorf("%s: present %v after the sweep, want %v (%v)", filepath.Base(path), got, want, err)
		}
	}
	if filepath.Dir(live.path) != tmp {
		t.Errorf("work directory %s is not under $TMPDIR %s", live.path, tmp)
	}
	live.Remove()
	if _, err := os.Stat(live.path); !os.IsNotExist(err) {
		t.Errorf("Remove left %s: %v", live.path, err)
	}
}
