package hookbench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hotlane/hotlane/report"
)

// signed formats an added time with its sign: a hook can measure cheaper
// than none, within the noise.
func signed(d time.Duration) string {
	if d < 0 {
		return "-" + report.Duration(-d)
	}
	return "+" + report.Duration(d)
}

// perRun is a cost's time per run, or "-" when nothing ran or it was not
// measured.
func perRun(c report.ProgramCost, refused string) string {
	switch {
	case refused != "":
		return "refused"
	case c.Runs == 0:
		return "-"
	}
	return report.Duration(c.PerRun())
}

// barWidth is the longest bar of the chart, in characters.
const barWidth = 40

// WriteText writes the table, a bar chart of the time each hook added per
// call, the refusals with their reasons, and hotlane's own programs.
func (r *Report) WriteText(w io.Writer) error {
	ew := report.NewWriter(w)
	ew.Printf("BPF hook cost on %s: one getpid(2) per call, %d calls x %d rounds per hook, medians\n\n", r.Kernel, r.Calls, r.Rounds)
	t := report.Table{Header: []string{"hook", "event", "without/call", "with/call", "added/call", "noise", "stats/run", "outside/run", "counted/driven"}}
	var refused []HookCost
	var longest time.Duration
	for _, h := range r.Hooks {
		if h.Refused != "" {
			refused = append(refused, h)
			t.Add(string(h.Kind), h.Event, "-", "-", "refused", "-", "-", "-", "-")
			continue
		}
		longest = max(longest, h.Added())
		t.Add(string(h.Kind), h.Event, report.Duration(h.Without), report.Duration(h.With), signed(h.Added()),
			"±"+report.Duration(h.Noise), perRun(h.Stats, ""), perRun(h.Outside, h.OutsideRefused),
			fmt.Sprintf("%d/%d", h.Counted, h.Driven))
	}
	ew.Do(t.WriteText)

	if longest > 0 {
		ew.Printf("\nadded per call (with minus without):\n")
		for _, h := range r.Hooks {
			if h.Refused != "" {
				continue
			}
			n := 0
			if h.Added() > 0 {
				n = int((h.Added()*barWidth + longest/2) / longest)
			}
			ew.Printf("  %-13s %-*s %s\n", h.Kind, barWidth, strings.Repeat("#", n), signed(h.Added()))
		}
	}
	if len(refused) > 0 {
		ew.Printf("\nrefused by this kernel:\n")
		for _, h := range refused {
			ew.Printf("  %-13s %s\n", h.Kind, h.Refused)
		}
	}
	var refusedOutside refusals
	for _, h := range r.Hooks {
		refusedOutside.add(string(h.Kind), h.OutsideRefused)
	}
	if len(refusedOutside) > 0 {
		ew.Printf("\noutside (fentry/fexit on the program) refused:\n")
		refusedOutside.write(ew)
	}
	ew.Printf("\nadded: the loop's time per call with the program attached minus without it;\n" +
		"stats: the program's run time per run from BPF_ENABLE_STATS;\n" +
		"outside: the same from fentry/fexit on the program (as bpftool prog profile).\n")

	if len(r.Programs) > 0 {
		ew.Printf("\nhotlane's own programs under %s:\n", r.ProgramsLoad)
		pt := report.Table{Header: []string{"program", "runs", "stats/run", "outside runs", "outside/run"}}
		var why refusals
		for _, p := range r.Programs {
			outRuns := fmt.Sprint(p.Outside.Runs)
			if p.OutsideRefused != "" {
				outRuns = "-"
			}
			why.add(p.Program, p.OutsideRefused)
			pt.Add(p.Program, fmt.Sprint(p.Stats.Runs), perRun(p.Stats, ""), outRuns, perRun(p.Outside, p.OutsideRefused))
		}
		ew.Do(pt.WriteText)
		if len(why) > 0 {
			ew.Printf("outside refused:\n")
			why.write(ew)
		}
	}
	return ew.Err()
}

// refusals groups the things one reason refused, in order: a kernel that
// refuses fentry on programs refuses it on all of them, in one line.
type refusals []struct {
	reason string
	who    []string
}

func (rs *refusals) add(who, reason string) {
	if reason == "" {
		return
	}
	for i := range *rs {
		if (*rs)[i].reason == reason {
			(*rs)[i].who = append((*rs)[i].who, who)
			return
		}
	}
	*rs = append(*rs, struct {
		reason string
		who    []string
	}{reason, []string{who}})
}

func (rs refusals) write(ew *report.Writer) {
	for _, r := range rs {
		ew.Printf("  %s: %s\n", strings.Join(r.who, ", "), r.reason)
	}
}
