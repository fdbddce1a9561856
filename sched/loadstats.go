package sched

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// VerifierLimit is the most instructions the kernel's verifier processes
// for one program before it gives up ("BPF program is too large").
const VerifierLimit = 1_000_000

// LoadStats is where the time to start the scheduler went, and what each
// program cost the verifier.
type LoadStats struct {
	// KernelBTF is the start to the running kernel's BTF parsed (the
	// topology and the newest object are read meanwhile); Prepare
	// choosing and configuring the object; Verify the kernel loading
	// (verifying) every program, side by side; Enable attaching it,
	// which switches every task to it.
	KernelBTF, Prepare, Verify, Enable time.Duration
	// Programs are the loaded programs, by name.
	Programs []ProgramLoad
}

// ProgramLoad is one program's verifier cost.
type ProgramLoad struct {
	Name string
	// Instructions the verifier processed: it walks every path, and a
	// loop once per iteration it cannot prove equivalent to an earlier
	// one, so this grows with a program's branches and loops, not its
	// size. Unknown (0, Known false) on kernels older than 5.16.
	VerifiedInstructions uint32
	Known                bool
}

// Total is the time from Load's start to the scheduler enabled.
func (s LoadStats) Total() time.Duration { return s.KernelBTF + s.Prepare + s.Verify + s.Enable }

// VerifiedInstructions is the sum over all programs.
func (s LoadStats) VerifiedInstructions() uint64 {
	var n uint64
	for _, p := range s.Programs {
		n += uint64(p.VerifiedInstructions)
	}
	return n
}

// Largest is the program that cost the verifier most.
func (s LoadStats) Largest() ProgramLoad {
	var top ProgramLoad
	for _, p := range s.Programs {
		if p.VerifiedInstructions > top.VerifiedInstructions {
			top = p
		}
	}
	return top
}

// String is one line for the start of a run.
func (s LoadStats) String() string {
	top := s.Largest()
	return fmt.Sprintf("started in %s (kernel BTF %s, prepare %s, verifier %s, enable %s); verifier: %d instructions over %d programs, the most %d in %s",
		round(s.Total()), round(s.KernelBTF), round(s.Prepare), round(s.Verify), round(s.Enable),
		s.VerifiedInstructions(), len(s.Programs), top.VerifiedInstructions, top.Name)
}

// Table is every program's verified instructions, largest first, with its
// share of the verifier's limit.
func (s LoadStats) Table() string {
	progs := slices.Clone(s.Programs)
	slices.SortFunc(progs, func(a, b ProgramLoad) int {
		if a.VerifiedInstructions != b.VerifiedInstructions {
			return int(b.VerifiedInstructions) - int(a.VerifiedInstructions)
		}
		return strings.Compare(a.Name, b.Name)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %12s %9s\n", "program", "verified", "of limit")
	for _, p := range progs {
		fmt.Fprintf(&b, "%-24s %12d %8.2f%%\n", p.Name, p.VerifiedInstructions, 100*float64(p.VerifiedInstructions)/VerifierLimit)
	}
	return b.String()
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// verifiedInstructions reads each program's verifier cost from the kernel.
func verifiedInstructions(progs map[string]*ebpf.Program) []ProgramLoad {
	var out []ProgramLoad
	for name, p := range progs {
		pl := ProgramLoad{Name: name}
		if info, err := p.Info(); err == nil {
			pl.VerifiedInstructions, pl.Known = info.VerifiedInstructions()
		}
		out = append(out, pl)
	}
	slices.SortFunc(out, func(a, b ProgramLoad) int { return strings.Compare(a.Name, b.Name) })
	return out
}
