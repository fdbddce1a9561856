package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// workDirPrefix names the directories under os.TempDir() that hold a
// boot's initramfs and result port (hundreds of MiB with the judges).
const workDirPrefix = "hotlane-vm-"

// staleAfter is how old an unlocked work directory must be before it is
// taken for one whose run was killed: a new run creates its directory a
// moment before it locks it.
const staleAfter = time.Minute

// workDir is a boot's private directory, locked while its run lives.
type workDir struct {
	path string
	lock *os.File
}

// newWorkDir makes a boot's work directory and locks it for as long as
// this process lives or until Remove, after removing those of earlier
// runs that died without cleaning up: a SIGKILL runs no deferred removal,
// and each left an initramfs behind. The lock is an flock on the
// directory itself, which the kernel drops with the process however it
// ends, so a directory nobody holds is one nobody uses.
func newWorkDir() (*workDir, error) {
	removeStaleWorkDirs(os.TempDir(), time.Now())
	path, err := os.MkdirTemp("", workDirPrefix)
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(path)
	if err != nil {
		os.RemoveAll(path)
		return nil, fmt.Errorf("lock the VM's work directory %s: %w", path, err)
	}
	return &workDir{path: path, lock: lock}, nil
}

// Remove deletes the directory and then drops its lock.
func (w *workDir) Remove() {
	os.RemoveAll(w.path)
	w.lock.Close()
}

// lockDir opens dir and takes an exclusive flock on it without waiting.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// removeStaleWorkDirs removes the work directories under tmp that no run
// holds and that are older than staleAfter. It does its best: a directory
// it cannot lock or remove is left as it is.
func removeStaleWorkDirs(tmp string, now time.Time) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, workDirPrefix+"*"))
	for _, dir := range dirs {
		// Lstat: a symlink planted under that name is not followed; and
		// another user's directories are theirs to clean.
		st, err := os.Lstat(dir)
		if err != nil || !st.IsDir() || now.Sub(st.ModTime()) < staleAfter {
			continue
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Getuid() {
			continue
		}
		lock, err := lockDir(dir)
		if err != nil {
			continue // a live run's
		}
		os.RemoveAll(dir)
		lock.Close()
	}
}
