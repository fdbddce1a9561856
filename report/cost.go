package report

import (
	"io"
	"time"
)

// ProgramCost is one BPF program's own run time, from the kernel's
// run-time statistics (loader.EnableRunTimeStats, loader.Costs).
type ProgramCost struct {
	Program string        `json:"program"`
	Runs    uint64        `json:"runs"`
	Total   time.Duration `json:"total_ns"`
}

// PerRun is the average run time.
func (c ProgramCost) PerRun() time.Duration {
	if c.Runs == 0 {
		return 0
	}
	return c.Total / time.Duration(c.Runs)
}

// WriteCosts writes one line per program that ran: runs, time per run,
// and its share of one CPU over elapsed, then the total.
func WriteCosts(w io.Writer, title string, costs []ProgramCost, elapsed time.Duration) error {
	ew := NewWriter(w)
	ew.Printf("%s (over %s):\n", title, Duration(elapsed))
	for _, c := range costs {
		if c.Runs > 0 {
			ew.Printf("  %-24s %10d runs %9s/run %7.3f%% of one CPU\n", c.Program, c.Runs, Duration(c.PerRun()), share(c.Total, elapsed))
		}
	}
	all := TotalCost(costs)
	ew.Printf("  %-24s %10d runs %9s/run %7.3f%% of one CPU\n", "all", all.Runs, Duration(all.PerRun()), share(all.Total, elapsed))
	return ew.Err()
}

// TotalCost adds the programs' runs and run time up, as program "all".
func TotalCost(costs []ProgramCost) ProgramCost {
	all := ProgramCost{Program: "all"}
	for _, c := range costs {
		all.Runs += c.Runs
		all.Total += c.Total
	}
	return all
}

func share(d, of time.Duration) float64 {
	if of <= 0 {
		return 0
	}
	return 100 * d.Seconds() / of.Seconds()
}
