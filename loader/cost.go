package loader

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/report"
)

// EnableRunTimeStats makes the kernel count every BPF program's runs and
// run time (BPF_ENABLE_STATS) until the returned Closer is closed. It
// costs two clock reads per program run, so tools ask for it.
func EnableRunTimeStats() (io.Closer, error) {
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enable BPF run-time statistics: %w", err)
	}
	return st, nil
}

// RecursionMisses is how many runs of progs the kernel skipped because
// the same program was already running on that CPU (an event in an
// interrupt over its own hook, or a preemptible fentry/fexit program
// preempted while the next task took the same hook). The kernel counts
// them whether or not run-time statistics are enabled; a program whose
// statistics cannot be read adds nothing.
func RecursionMisses(progs ...*ebpf.Program) uint64 {
	var n uint64
	for _, p := range progs {
		if st, err := p.Stats(); err == nil {
			n += st.RecursionMisses
		}
	}
	return n
}

// Costs reads the run-time statistics of programs (all of them when names
// is empty), sorted by name. Statistics count only while enabled.
func Costs(programs map[string]*ebpf.Program, names ...string) ([]report.ProgramCost, error) {
	if len(names) == 0 {
		for name := range programs {
			names = append(names, name)
		}
	}
	var out []report.ProgramCost
	for _, name := range names {
		p := programs[name]
		if p == nil {
			continue
		}
		st, err := p.Stats()
		if err != nil {
			return nil, fmt.Errorf("run-time statistics of %s: %w", name, err)
		}
		out = append(out, report.ProgramCost{Program: name, Runs: st.RunCount, Total: st.Runtime})
	}
	slices.SortFunc(out, func(a, b report.ProgramCost) int { return strings.Compare(a.Program, b.Program) })
	return out, nil
}
