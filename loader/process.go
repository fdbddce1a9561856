package loader

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// ProcessPrograms opens every BPF program that process pid holds a file
// descriptor for, keyed by the kernel's name for it (at most 15
// characters; a name held twice gets "#ID" appended). It is how another
// tool's programs (runqlat, scx_simple) are found for their run-time
// statistics: /proc/PID/fdinfo names the program id behind each fd. The
// caller closes the programs.
func ProcessPrograms(pid int) (map[string]*ebpf.Program, error) {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list the file descriptors of process %d: %w", pid, err)
	}
	out := map[string]*ebpf.Program{}
	seen := map[ebpf.ProgramID]bool{}
	for _, e := range ents {
		id, ok := fdinfoProgramID(filepath.Join(dir, e.Name()))
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded meanwhile
		}
		info, err := p.Info()
		if err != nil {
			p.Close()
			continue
		}
		name := info.Name
		if _, dup := out[name]; dup || name == "" {
			name = fmt.Sprintf("%s#%d", info.Name, id)
		}
		out[name] = p
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("process %d: %w", pid, ErrNoPrograms)
	}
	return out, nil
}

// ErrNoPrograms means a process holds no BPF program.
var ErrNoPrograms = errors.New("holds no BPF program")

// fdinfoProgramID reads the "prog_id:" line a BPF program's fdinfo has.
func fdinfoProgramID(path string) (ebpf.ProgramID, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "prog_id:"); ok {
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			return ebpf.ProgramID(id), err == nil
		}
	}
	return 0, false
}
