// Package safefile is how hotlane writes every file it leaves behind:
// reports, plots, stats, results copied out of the VM and everything in
// its cache. A file is written to a temporary file created exclusively
// beside its target (never through a link, never an existing file) and
// renamed over the target only once it is complete and synced. So a run
// that fails, or is killed, leaves an existing file as it was (at most a
// stray .NAME.hotlane-tmp-* beside it), nobody ever reads a half-written
// or empty file, and a link planted at the target or at a temporary name
// cannot redirect the write. A target that is a symbolic link is refused
// rather than replaced. Modes are exact, whatever the umask.
package safefile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Modes of the files hotlane writes: each use states which it needs.
const (
	// Readable is for files of figures anyone on the machine may read.
	Readable fs.FileMode = 0o644
	// OwnerOnly is for files that name the machine's tasks (comms,
	// pids): what runs on a machine is not every user's business.
	OwnerOnly fs.FileMode = 0o600
	// Executable is for programs kept in a cache.
	Executable fs.FileMode = 0o755
)

// Errors Check, Create and Write return for a target they will not
// replace; test them with errors.Is.
var (
	// ErrSymlink: the target is a symbolic link. Writing through it
	// would change a file the user did not name (the classic attack on
	// predictable paths), and replacing it would surprise whoever made it.
	ErrSymlink = errors.New("is a symbolic link; name the file itself")
	// ErrNotRegular: the target is a device, pipe or socket, which a
	// rename would replace (as root, even /dev/null).
	ErrNotRegular = errors.New("is not a regular file")
)

// tmpMarker is in every temporary file's name, so that one a killed run
// left behind is recognisable: .NAME.hotlane-tmp-RANDOM.
const tmpMarker = ".hotlane-tmp-"

// maxTmpBase keeps temporary names within NAME_MAX (255) for long targets.
const maxTmpBase = 200

// Check says, without creating anything, whether path can be written:
// its directory exists and this user may create files in it, and path is
// absent or a regular file. Commands call it for each output before they
// start, so that a bad path fails before anything runs.
func Check(path string) error {
	if err := checkTarget(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return &fs.PathError{Op: "write", Path: path, Err: underlying(err)}
	case !fi.IsDir():
		return &fs.PathError{Op: "write", Path: path, Err: syscall.ENOTDIR}
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// CheckDir checks, without creating anything, that path is a directory
// or can become one: a command checks all its paths before it starts, and
// one that then fails on another flag leaves no directory behind. Its
// errors start with what, which names the path for the user (the flag
// that gave it).
func CheckDir(what, path string) error {
	target := filepath.Clean(path)
	for p := target; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			if (!errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR)) || p == filepath.Dir(p) {
				return fmt.Errorf("%s %w", what, err)
			}
			// Missing, or under a file: the nearest existing ancestor
			// decides.
			continue
		}
		named := what + " " + path
		if p != target {
			named += " cannot be created: " + p
		}
		switch {
		case !fi.IsDir():
			return fmt.Errorf("%s is a file, not a directory", named)
		case unix.Access(p, unix.W_OK) != nil:
			return fmt.Errorf("%s is not writable by this user", named)
		}
		return nil
	}
}

// checkTarget refuses a target that exists and is not a regular file.
func checkTarget(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &fs.PathError{Op: "write", Path: path, Err: underlying(err)}
	case fi.Mode()&fs.ModeSymlink != 0:
		return &fs.PathError{Op: "write", Path: path, Err: ErrSymlink}
	case fi.IsDir():
		return &fs.PathError{Op: "write", Path: path, Err: syscall.EISDIR}
	case !fi.Mode().IsRegular():
		return &fs.PathError{Op: "write", Path: path, Err: ErrNotRegular}
	}
	return nil
}

// underlying strips a PathError so that the one returned names the
// target, not whichever path the check happened to look at.
func underlying(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

// File is a file being written. Nothing is visible at its path until
// Commit (or Publish, for a stream); Abort (or a crash) before then
// leaves the path as it was.
type File struct {
	tmp       *os.File
	path      string
	published bool
}

// Create starts writing path with mode perm (exactly, whatever the
// umask). It checks path as Check does, then creates the temporary file.
func Create(path string, perm fs.FileMode) (*File, error) {
	if err := Check(path); err != nil {
		return nil, err
	}
	dir, base := filepath.Split(path)
	if len(base) > maxTmpBase {
		base = base[:maxTmpBase]
	}
	for range 100 {
		name := filepath.Join(dir, "."+base+tmpMarker+rand.Text())
		// O_EXCL fails on anything already there, a link included;
		// O_NOFOLLOW says so twice. The random name is not guessable,
		// so a collision means someone is trying: pick another.
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		// The umask narrowed perm at creation (or, at 000, would have
		// left a file meant to be private as it was asked): set it
		// exactly, on the descriptor, not the name.
		if err := f.Chmod(perm); err != nil {
			f.Close()
			os.Remove(name)
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		return &File{tmp: f, path: path}, nil
	}
	return nil, fmt.Errorf("write %s: no unused temporary name in %s", path, dir)
}

// Write writes p to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.tmp.Write(p) }

// Commit syncs the file and renames it over its target (unless Publish
// did already). Afterwards, or on an error, the temporary file is gone.
func (f *File) Commit() error {
	if f.tmp == nil {
		return fmt.Errorf("write %s: already committed or aborted", f.path)
	}
	tmp := f.tmp
	f.tmp = nil
	err := tmp.Sync()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && !f.published {
		err = f.rename(tmp)
	}
	if err != nil {
		if !f.published {
			os.Remove(tmp.Name())
		}
		return fmt.Errorf("write %s: %w", f.path, underlying(err))
	}
	return nil
}

// Publish renames the file over its target now, for a stream that a
// reader follows as it grows (JSON lines each interval): what was at the
// path is replaced once the stream has begun, not before, and writes go
// on to the same file. Commit then only syncs and closes it.
func (f *File) Publish() error {
	if f == nil || f.tmp == nil || f.published {
		return nil
	}
	if err := f.rename(f.tmp); err != nil {
		return fmt.Errorf("write %s: %w", f.path, underlying(err))
	}
	f.published = true
	return nil
}

func (f *File) rename(tmp *os.File) error {
	// Made a link or a directory while the run went on? A rename would
	// replace it; refuse instead, as Create would have.
	if err := checkTarget(f.path); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return err
	}
	syncDir(filepath.Dir(f.path))
	return nil
}

// syncDir makes a rename in dir durable. It is best effort: the file is
// in place already, and some file systems cannot sync a directory.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}

// Abort removes the temporary file and leaves the target as it was. It
// does nothing after Commit, so it can be deferred.
func (f *File) Abort() {
	if f == nil || f.tmp == nil {
		return
	}
	f.tmp.Close()
	if !f.published {
		os.Remove(f.tmp.Name())
	}
	f.tmp = nil
}

// Write writes path with mode perm from fn, all or nothing: an error from
// fn, or from writing, leaves path as it was.
func Write(path string, perm fs.FileMode, fn func(io.Writer) error) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := fn(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// WriteFile is Write with the content at hand.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
