package workloads

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"github.com/hotlane/hotlane/loader"
	"golang.org/x/sys/unix"
)

// Variant names the bench knows. The eevdf+ variants change only the
// lane's threads; the others replace the scheduler of every task.
const (
	EEVDF         = "eevdf"          // the kernel's default: no sched_ext scheduler
	EEVDFNice     = "eevdf+nice-20"  // EEVDF, lane at nice -20
	EEVDFFIFO     = "eevdf+fifo"     // EEVDF, lane at SCHED_FIFO (see VariantOptions.FIFOPriority)
	EEVDFDeadline = "eevdf+deadline" // EEVDF, lane at SCHED_DEADLINE sized from the task
	ScxSimple     = "scx_simple"     // the kernel's scx_simple, weighted vtime
	ScxSimpleF    = "scx_simple-f"   // scx_simple -f, global FIFO
	ScxQmap       = "scx_qmap"       // the kernel's scx_qmap
	HotlaneName   = "hotlane"
)

// BuiltinVariants lists the built-in variant names in their usual order.
var BuiltinVariants = []string{EEVDF, EEVDFNice, EEVDFFIFO, EEVDFDeadline, ScxSimple, ScxSimpleF, ScxQmap, HotlaneName}

// ErrUnknownScheduler is returned for a variant name the bench lacks.
var ErrUnknownScheduler = errors.New("unknown scheduler")

// Variant is one way of scheduling the machine that the bench measures.
type Variant struct {
	Name string `json:"name"`
	// Lane is applied to the lane threads (eevdf+ variants).
	Lane LanePolicy `json:"lane"`
	// Command is a sched_ext scheduler program the bench starts and stops
	// (scx_simple, scx_qmap, --scheduler).
	Command []string `json:"command,omitempty"`
	// Ops is the scheduler name the kernel must report in
	// /sys/kernel/sched_ext/root/ops; empty accepts any (--scheduler).
	Ops string `json:"ops,omitempty"`
	// Hotlane loads hotlane's own scheduler with the bench's policy.
	Hotlane bool `json:"hotlane,omitempty"`
}

// SchedExt reports whether the variant needs a sched_ext kernel.
func (v Variant) SchedExt() bool { return v.Hotlane || len(v.Command) > 0 }

// Describe says in a few words what the variant runs.
func (v Variant) Describe() string {
	switch {
	case v.Hotlane:
		return "hotlane's scheduler with the bench's policy"
	case len(v.Command) > 0:
		return "sched_ext scheduler: " + strings.Join(v.Command, " ")
	case v.Lane.Kind != LaneAsIs:
		return "EEVDF, lane at " + v.Lane.String()
	}
	return "EEVDF, the kernel's default"
}

// VariantOptions are what the built-in variants are made of.
type VariantOptions struct {
	ScxSimplePath string // the scx_simple binary
	ScxQmapPath   string // the scx_qmap binary
	FIFOPriority  int    // eevdf+fifo's SCHED_FIFO priority
	// External are sched_ext schedulers given with --scheduler NAME=COMMAND.
	External []Variant
}

// DefaultFIFOPriority is eevdf+fifo's priority unless told otherwise: the
// middle of the range, above the kernel's own threaded IRQ handlers (50)
// as chrt users usually choose.
const DefaultFIFOPriority = 50

var variantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,31}$`)

// ParseScheduler reads a --scheduler NAME=COMMAND: a sched_ext scheduler
// program (with arguments, split at spaces) the bench will start.
func ParseScheduler(spec string) (Variant, error) {
	name, command, ok := strings.Cut(spec, "=")
	name, args := strings.TrimSpace(name), strings.Fields(command)
	switch {
	case !ok || len(args) == 0:
		return Variant{}, fmt.Errorf("--scheduler %q: write NAME=COMMAND, e.g. rusty=/usr/bin/scx_rusty --slice-us 5000", spec)
	case !variantName.MatchString(name):
		return Variant{}, fmt.Errorf("--scheduler %q: the name must be 1-32 letters, digits or _.+- ", spec)
	case slices.Contains(BuiltinVariants, name):
		return Variant{}, fmt.Errorf("--scheduler %q: %s is a built-in variant; choose another name", spec, name)
	}
	return Variant{Name: name, Command: args}, nil
}

// ParseVariants reads a comma-separated list of variant names. Schedulers
// given with --scheduler (opts.External) may be named in the list; those
// not named run after the list.
func ParseVariants(list string, opts VariantOptions) ([]Variant, error) {
	prio := opts.FIFOPriority
	if prio == 0 {
		prio = DefaultFIFOPriority
	}
	var out []Variant
	seen := map[string]bool{}
	add := func(v Variant) error {
		if seen[v.Name] {
			return fmt.Errorf("%s is listed twice", v.Name)
		}
		seen[v.Name] = true
		out = append(out, v)
		return nil
	}
	var names []string
	if strings.TrimSpace(list) != "" {
		names = strings.Split(list, ",")
	}
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == "scx_simple -f" {
			name = ScxSimpleF
		}
		var v Variant
		switch name {
		case EEVDF:
			v = Variant{Name: name}
		case EEVDFNice:
			v = Variant{Name: name, Lane: LanePolicy{Kind: LaneNice, Nice: -20}}
		case EEVDFFIFO:
			v = Variant{Name: name, Lane: LanePolicy{Kind: LaneFIFO, Priority: prio}}
		case EEVDFDeadline:
			v = Variant{Name: name, Lane: LanePolicy{Kind: LaneDeadline}}
		case ScxSimple:
			v = Variant{Name: name, Command: []string{opts.ScxSimplePath}, Ops: "simple"}
		case ScxSimpleF:
			v = Variant{Name: name, Command: []string{opts.ScxSimplePath, "-f"}, Ops: "simple"}
		case ScxQmap:
			v = Variant{Name: name, Command: []string{opts.ScxQmapPath}, Ops: "qmap"}
		case HotlaneName:
			v = Variant{Name: name, Hotlane: true}
		default:
			i := slices.IndexFunc(opts.External, func(e Variant) bool { return e.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("%w %q: use a comma-separated list of %s, or a name given with --scheduler NAME=COMMAND",
					ErrUnknownScheduler, name, strings.Join(BuiltinVariants, ", "))
			}
			v = opts.External[i]
		}
		if err := add(v); err != nil {
			return nil, err
		}
	}
	for _, e := range opts.External {
		if !seen[e.Name] {
			if err := add(e); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no schedulers to compare")
	}
	return out, nil
}

// Host is what Preflight checks variants against.
type Host struct {
	// SchedExt: the kernel has sched_ext (/sys/kernel/sched_ext).
	SchedExt bool
	// SysNice: the process holds CAP_SYS_NICE (FIFO, DEADLINE, nice -20).
	SysNice bool
	// LookPath finds a program, as exec.LookPath.
	LookPath func(string) (string, error)
}

// DetectHost looks at the running kernel and process.
func DetectHost() Host {
	st, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
	return Host{
		SchedExt: st.Present,
		SysNice:  hasCapability(unix.CAP_SYS_NICE),
		LookPath: exec.LookPath,
	}
}

// hasCapability reports whether the process holds capability bit.
func hasCapability(bit int) bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	eff, err := loader.ParseCapEff(f)
	return err == nil && eff&(1<<bit) != 0
}

// Skipped is a variant the bench did not run, and why.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Preflight splits variants into those this host can run and those it
// cannot, each with a one-line reason, before anything starts. A variant
// whose program is found gets its resolved path.
func Preflight(variants []Variant, h Host) (run []Variant, skipped []Skipped) {
	for _, v := range variants {
		reason := ""
		switch {
		case v.SchedExt() && !h.SchedExt:
			reason = "this kernel has no sched_ext (no " + loader.SchedExtSysfs + "); run the bench in 'hotlane vm'"
		case len(v.Command) > 0:
			path, err := h.LookPath(v.Command[0])
			if err != nil {
				reason = fmt.Sprintf("%s not found; in the VM add it with 'hotlane vm --add HOST:GUEST' (or --scx NAME for the kernel's examples)", v.Command[0])
				break
			}
			v.Command = append([]string{path}, v.Command[1:]...)
		case v.Lane.Kind != LaneAsIs && !h.SysNice:
			reason = fmt.Sprintf("giving the lane %s needs CAP_SYS_NICE; run as root", v.Lane)
		}
		if reason != "" {
			skipped = append(skipped, Skipped{Name: v.Name, Reason: reason})
			continue
		}
		run = append(run, v)
	}
	return run, skipped
}
