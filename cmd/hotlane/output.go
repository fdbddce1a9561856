package main

import (
	"fmt"
	"io"
	"os"
)

// output is a file a command writes when its run ends. It is created
// before the run, so that a bad path fails before anything is attached,
// and removed again if the run fails: no half-written report is left.
type output struct {
	path string
	f    *os.File
}

// createOutput creates path for writing; "" means no output (nil).
func createOutput(path string) (*output, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &output{path: path, f: f}, nil
}

// write fills the file with fn and closes it; on error the file is
// removed. A nil output writes nothing.
func (o *output) write(fn func(io.Writer) error) error {
	if o == nil {
		return nil
	}
	err := fn(o.f)
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	o.f = nil
	if err != nil {
		os.Remove(o.path)
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	return nil
}

// discard removes the file unless it was written; for defer.
func (o *output) discard() {
	if o == nil || o.f == nil {
		return
	}
	o.f.Close()
	os.Remove(o.path)
}

// requireDir checks that path is a directory or can become one, before a
// long run that ends by writing into it.
func requireDir(flag, path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%s %s is a file, not a directory", flag, path)
	case err == nil:
		return nil
	case os.IsNotExist(err):
		return os.MkdirAll(path, 0o755)
	default:
		return err
	}
}
