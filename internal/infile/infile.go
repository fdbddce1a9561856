// Package infile reads the files hotlane is given by name (policies,
// workloads, web configs): regular files only, and never more than a
// stated size. A FIFO or a device is refused at once, where reading it
// would block or never end, and an oversized file is refused before it
// fills memory, each with an error that says which and why.
package infile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotRegular is wrapped when the path is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is wrapped when the file is over the size cap.
	ErrTooLarge = errors.New("file too large")
)

// Read returns the contents of the regular file at path, refusing
// anything else and any file of more than limit bytes. what names the
// file's role in errors ("policy", "workload").
func Read(what, path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading otherwise waits for a
	// writer, which may never come. It changes nothing for a regular
	// file.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if err := check(what, path, fi, limit); err != nil {
		return nil, err
	}
	// The size may have grown since the stat: read one byte past the cap
	// to know.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(what, path, limit)
	}
	return data, nil
}

// Check tells, without reading, whether Read would refuse path (for a
// file another library reads later).
func Check(what, path string, limit int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return check(what, path, fi, limit)
}

func check(what, path string, fi fs.FileInfo, limit int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s %s is %s, %w: give the file itself", what, path, kind(fi.Mode()), ErrNotRegular)
	}
	if fi.Size() > limit {
		return tooLarge(what, path, limit)
	}
	return nil
}

func tooLarge(what, path string, limit int64) error {
	return fmt.Errorf("%s %s is larger than the %s cap on %s files (%w): is it the right file?", what, path, Size(limit), what, ErrTooLarge)
}

// kind names a file type other than a regular file.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a file (" + m.Type().String() + ")"
}

// Size writes a byte count as people read a cap: 1 MiB, 64 KiB, 100 bytes.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
