package vm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// ErrJudgeMissing is wrapped when an outside judge is not on the host.
var ErrJudgeMissing = errors.New("judge not installed")

// judge is an outside program the bench's judges run in the guest.
type judge struct {
	name, guest, pkg string
}

// judges are the programs of the bench's "judges" workload, from Debian's
// packages: the guest finds each in $PATH as the bench expects.
func judges() []judge {
	return []judge{
		{"perf", "/usr/bin/perf", "linux-perf"},
		{"sysbench", "/usr/bin/sysbench", "sysbench"},
		{"rt-app", "/usr/bin/rt-app", "rt-app"},
		{"stress-ng", "/usr/bin/stress-ng", "stress-ng"},
	}
}

// JudgePrograms finds the outside judges on the host with lookPath (as
// exec.LookPath) and returns them by guest path, for Config.Executables.
//
// Debian's /usr/bin/perf is, depending on the release, perf itself or a
// script (from linux-base) that runs perf_<version of the running kernel>
// and refuses a kernel it has no perf for. The guest's kernel is not the
// host's, so where it is the script the guest gets the newest real
// perf_<version> beside it, at /usr/bin/perf.
func JudgePrograms(lookPath func(string) (string, error)) (map[string]string, error) {
	out := map[string]string{}
	for _, j := range judges() {
		p, err := lookPath(j.name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s not found in $PATH: install %s (scripts/deps.sh does)", ErrJudgeMissing, j.name, j.pkg)
		}
		if j.name == "perf" {
			if p, err = realPerf(p); err != nil {
				return nil, err
			}
		}
		out[j.guest] = p
	}
	return out, nil
}

// realPerf returns path if it is a program, else the newest perf_<version>
// program beside it.
func realPerf(path string) (string, error) {
	if isELF(path) {
		return path, nil
	}
	versions, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "perf_*"))
	versions = slices.DeleteFunc(versions, func(p string) bool { return !isELF(p) })
	if len(versions) == 0 {
		return "", fmt.Errorf("%w: %s is Debian's wrapper script and no perf_<version> program is beside it: install linux-perf", ErrJudgeMissing, path)
	}
	slices.SortFunc(versions, func(a, b string) int {
		if versionLess(a, b) {
			return -1
		}
		return 1
	})
	return versions[len(versions)-1], nil
}

// isELF reports whether path is an ELF file.
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && bytes.Equal(magic, []byte("\x7fELF"))
}
