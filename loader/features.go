package loader

import (
	"fmt"
	"io"
	"strings"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/topology"
)

// Names of the features Probe reports, in the order it reports them. These
// are also the names `hotlane doctor --require` accepts.
const (
	FeatureCaps       = "caps"       // CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_NET_ADMIN effective
	FeatureBTF        = "btf"        // kernel BTF at /sys/kernel/btf/vmlinux
	FeatureSchedExt   = "sched_ext"  // CONFIG_SCHED_CLASS_EXT: sched_ext_ops in BTF and /sys/kernel/sched_ext
	FeatureScxKfuncs  = "scx_kfuncs" // a known scx kfunc generation with usable names
	FeatureTpBTF      = "tp_btf"     // BTF-enabled raw tracepoints load and attach
	FeatureRawTP      = "raw_tp"     // raw tracepoints load and attach
	FeatureTracepoint = "tracepoint" // classic tracepoints (tracefs) load and attach
	FeatureFentry     = "fentry"     // fentry programs load and attach
	FeatureKprobe     = "kprobe"     // kprobes load and attach
	FeatureXDP        = "xdp"        // XDP programs load and run
)

// FeatureNames returns every feature name Probe reports, in report order.
func FeatureNames() []string {
	return []string{
		FeatureCaps, FeatureBTF, FeatureSchedExt, FeatureScxKfuncs,
		FeatureTpBTF, FeatureRawTP, FeatureTracepoint, FeatureFentry,
		FeatureKprobe, FeatureXDP,
	}
}

// featureAliases maps other accepted spellings to feature names.
func featureAliases() map[string]string {
	return map[string]string{
		"root":         FeatureCaps,
		"root/caps":    FeatureCaps,
		"capabilities": FeatureCaps,
		"scx":          FeatureSchedExt,
		"kfuncs":       FeatureScxKfuncs,
		"tp":           FeatureTracepoint,
		"tracefs":      FeatureTracepoint,
	}
}

// ParseFeatureNames turns values such as {"sched_ext", "btf,tp_btf"} into
// a list of feature names: each value may be a comma-separated list, names
// are case-insensitive, "root" means "caps", and duplicates are dropped. An
// unknown name yields an error wrapping ErrUnknownFeature that lists the
// valid names.
func ParseFeatureNames(values []string) ([]string, error) {
	valid := make(map[string]bool)
	for _, n := range FeatureNames() {
		valid[n] = true
	}
	aliases := featureAliases()
	var names []string
	seen := make(map[string]bool)
	for _, v := range values {
		for _, raw := range strings.Split(v, ",") {
			name := strings.ToLower(strings.TrimSpace(raw))
			if name == "" {
				continue
			}
			if a, ok := aliases[name]; ok {
				name = a
			}
			if !valid[name] {
				return nil, fmt.Errorf("%w %q; valid names: %s (root = caps)", ErrUnknownFeature, strings.TrimSpace(raw), strings.Join(FeatureNames(), ", "))
			}
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// Feature is one finding of Probe.
type Feature struct {
	// Name is one of FeatureNames.
	Name string `json:"name"`
	// Available says whether hotlane can use the feature here.
	Available bool `json:"available"`
	// Detail says what was found, or what is missing.
	Detail string `json:"detail,omitempty"`
	// Advice says what to do about a missing feature.
	Advice string `json:"advice,omitempty"`
	// Error is the underlying error text, for missing features.
	Error string `json:"error,omitempty"`
}

// SchedExtInfo is what Probe found about sched_ext.
type SchedExtInfo struct {
	// InBTF: kernel BTF describes struct sched_ext_ops.
	InBTF bool `json:"in_btf"`
	// Sysfs: /sys/kernel/sched_ext exists.
	Sysfs bool `json:"sysfs"`
	// State is /sys/kernel/sched_ext/state (enabled, disabled, ...).
	State string `json:"state,omitempty"`
	// Ops is /sys/kernel/sched_ext/root/ops: the running BPF scheduler.
	Ops string `json:"ops,omitempty"`
	// SwitchAll: the running scheduler handles all tasks, not only
	// SCHED_EXT ones.
	SwitchAll bool `json:"switch_all,omitempty"`
	// Kconfig is CONFIG_SCHED_CLASS_EXT from the kernel config, if known.
	Kconfig string `json:"kconfig,omitempty"`
	// Kfuncs is the kfunc generation and the names to call; nil when
	// there is no sched_ext or the generation is unknown.
	Kfuncs *Kfuncs `json:"kfuncs,omitempty"`
}

// Features is the result of Probe: the kernel, the process's privileges
// and one Feature per name in FeatureNames.
type Features struct {
	report.Header
	Machine  string       `json:"machine"`
	Euid     int          `json:"euid"`
	Kconfig  string       `json:"kconfig,omitempty"` // where the kernel config was read from
	Caps     CapInfo      `json:"capabilities"`
	SchedExt SchedExtInfo `json:"sched_ext"`
	Checks   []Feature    `json:"checks"`
	// Topology is the machine's CPUs as sysfs describes them, nil where
	// it does not.
	Topology *topology.Topology `json:"topology,omitempty"`
	// Notes are things Probe did or noticed, such as mounting tracefs.
	Notes []string `json:"notes,omitempty"`
}

// Get returns the feature called name.
func (f *Features) Get(name string) (Feature, bool) {
	for _, c := range f.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Feature{}, false
}

// Missing returns the features among names that are not available. A name
// that was not probed counts as missing.
func (f *Features) Missing(names []string) []Feature {
	var missing []Feature
	for _, n := range names {
		c, ok := f.Get(n)
		if !ok {
			missing = append(missing, Feature{Name: n, Detail: "not probed"})
			continue
		}
		if !c.Available {
			missing = append(missing, c)
		}
	}
	return missing
}

// WriteText writes the report for people: a header with the kernel, one
// line per feature ("ok" or "MISSING", name, detail), an indented "->"
// advice line under each missing one, then notes and a summary.
func (f *Features) WriteText(w io.Writer) error {
	ew := report.NewWriter(w)
	ew.Printf("kernel %s (%s), euid %d", f.Kernel, f.Machine, f.Euid)
	if f.Kconfig != "" {
		ew.Printf(", config from %s", f.Kconfig)
	}
	ew.Printf("\n")
	if f.Topology != nil {
		ew.Printf("cpus: %s\n", f.Topology)
	}
	var missing []string
	for _, c := range f.Checks {
		status := "ok"
		if !c.Available {
			status = "MISSING"
			missing = append(missing, c.Name)
		}
		ew.Printf("%-7s  %-10s  %s\n", status, c.Name, c.Detail)
		if !c.Available && c.Advice != "" {
			ew.Printf("%-7s  %-10s  -> %s\n", "", "", c.Advice)
		}
	}
	for _, n := range f.Notes {
		ew.Printf("note: %s\n", n)
	}
	if len(missing) == 0 {
		ew.Printf("all %d features available\n", len(f.Checks))
	} else {
		ew.Printf("%d of %d features available; missing: %s\n", len(f.Checks)-len(missing), len(f.Checks), strings.Join(missing, ", "))
	}
	return ew.Err()
}

// WriteJSON writes f as indented JSON.
func (f *Features) WriteJSON(w io.Writer) error {
	if err := report.WriteJSON(w, f); err != nil {
		return fmt.Errorf("encode features: %w", err)
	}
	return nil
}
