//go:build linux && amd64

package bpf_test

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/policy"
)

// The verifier-complexity guard. The verifier's work on a program
// (bpf_prog_info.verified_insns) decides whether it loads at all (the
// limit is a million instructions) and how long loading takes: a change
// of shape in one tracer program once took attach from 1.9 s to 25 s.
// TestVerifierComplexity loads every program of every object on the
// running kernel, with the settings that make the verifier work hardest,
// and compares each with its row in complexityTable for this kernel
// release (the counts depend on the kernel's verifier): a program that
// grew by more than complexityGrowth fails the test until the table is
// rewritten, in the same commit, with
//
//	sudo HOTLANE_UPDATE_COMPLEXITY=1 go test ./bpf -run TestVerifierComplexity
//
// so that the growth is seen in review. CI runs on the same kind of host
// (kernel 6.18) as development, so its rows are the ones compared there.
// The scheduler's objects are struct_ops programs that load only on a
// kernel with sched_ext; sched.TestGuestVerifierComplexity covers them in
// the VM, against a budget of a tenth of the verifier's limit.
const (
	complexityTable     = "testdata/verifier-complexity.txt"
	updateComplexityEnv = "HOTLANE_UPDATE_COMPLEXITY"
)

// complexityGrowth is how much a program may grow before the table must
// be updated: by more than both 20 % of its recorded count and 2,000
// instructions. Small programs may double without mattering; a large one
// may drift a little with the compiler, but not by a step.
func complexityGrowth(recorded uint32) uint32 {
	return max(recorded/5, 2000)
}

// complexityObject is one of hotlane's BPF objects, as the guard loads it.
type complexityObject struct {
	name string
	load func() (*ebpf.CollectionSpec, error)
	// configure writes the load-time settings that make the verifier
	// walk every optional path; nil keeps the object's defaults.
	configure func(*ebpf.CollectionSpec) error
	// elsewhere are programs that cannot be loaded on their own here,
	// and why.
	elsewhere map[string]string
}

var complexityObjects = []complexityObject{
	{name: "runqlat", load: bpf.LoadRunqlat, configure: runqlatWorstCase, elsewhere: map[string]string{
		bpf.RunqlatProgRqExtCbEnter: "attaches to a sched_ext scheduler's callback, chosen at run time",
		bpf.RunqlatProgRqExtCbExit:  "attaches to a sched_ext scheduler's callback, chosen at run time",
	}},
	{name: "ioctl", load: bpf.LoadIoctl, configure: ioctlWorstCase},
	{name: "dma", load: bpf.LoadDma, configure: dmaWorstCase},
	{name: "xdp", load: bpf.LoadXdp, configure: xdpWorstCase},
	{name: "hookcheck", load: bpf.LoadHookcheck},
	{name: "histcheck", load: bpf.LoadHistcheck},
	{name: "hookbench", load: bpf.LoadHookbench},
	{name: "progprof", load: bpf.LoadProgprof, elsewhere: map[string]string{
		bpf.ProgprofProgProfEnter: "attaches to the BPF program it profiles, chosen at run time",
		bpf.ProgprofProgProfExit:  "attaches to the BPF program it profiles, chosen at run time",
	}},
}

// runqlatWorstCase turns on everything the tracer can be asked for: the
// explanation, per-task histograms, thresholds for every class, every
// filter, and the largest policy for its classifier.
func runqlatWorstCase(spec *ebpf.CollectionSpec) error {
	var v bpf.RunqlatVariableSpecs
	if err := spec.Assign(&v); err != nil {
		return err
	}
	var thresholds [policy.MaxClasses]uint64
	for i := range thresholds {
		thresholds[i] = 1
	}
	return errors.Join(
		v.Explain.Set(true), v.PerTask.Set(true), v.KernelHasExt.Set(true),
		v.ThresholdNs.Set(thresholds),
		v.FilterTgid.Set(uint32(1)), v.FilterNrTids.Set(uint32(16)), v.FilterCommLen.Set(uint32(policy.MaxCommLen)),
		setLargestPolicy(spec))
}

// setLargestPolicy writes policy.Largest into the classifier's settings
// (classify.bpf.h), which the tracer shares with the scheduler.
func setLargestPolicy(spec *ebpf.CollectionSpec) error {
	table, err := policy.Largest().Compile("")
	if err != nil {
		return err
	}
	var errs []error
	for name, v := range table.BPFVariables() {
		errs = append(errs, spec.Variables[name].Set(v))
	}
	return errors.Join(errs...)
}

func ioctlWorstCase(spec *ebpf.CollectionSpec) error {
	var v bpf.IoctlVariableSpecs
	if err := spec.Assign(&v); err != nil {
		return err
	}
	return errors.Join(
		v.FilterTgid.Set(uint32(1)), v.FilterCommLen.Set(uint32(policy.MaxCommLen)),
		v.FilterDevOn.Set(true), v.FilterDev.Set(uint32(1<<20|3)),
		v.WakeupsOn.Set(true), v.SlowOn.Set(true), v.SlowNs.Set(uint64(1)), v.MaxCmdsPerDev.Set(uint32(64)))
}

func dmaWorstCase(spec *ebpf.CollectionSpec) error {
	var v bpf.DmaVariableSpecs
	if err := spec.Assign(&v); err != nil {
		return err
	}
	return errors.Join(v.FexitCounts.Set(true), v.LatencyOn.Set(true))
}

func xdpWorstCase(spec *ebpf.CollectionSpec) error {
	var v bpf.XdpVariableSpecs
	if err := spec.Assign(&v); err != nil {
		return err
	}
	return errors.Join(v.DropClasses.Set(^uint32(0)), v.UdpAllowOn.Set(uint32(1)), v.EthertypeDropOn.Set(uint32(1)))
}

// complexityRow is one program's cost on one kernel.
type complexityRow struct {
	kernel, object, program string
	verified                uint32
	load                    time.Duration // wall time of its load, for people: never compared
}

func (r complexityRow) key() string { return r.kernel + " " + r.object + " " + r.program }

func TestVerifierComplexity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loads every BPF program into the running kernel: needs root")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	kernel := kernelRelease(t)
	var measured []complexityRow
	for _, o := range complexityObjects {
		rows, skipped := measureObject(t, kernel, o)
		measured = append(measured, rows...)
		for _, prog := range slices.Sorted(maps.Keys(skipped)) {
			t.Logf("%s/%s: not measured here: %s", o.name, prog, skipped[prog])
		}
	}
	if len(measured) == 0 {
		t.Fatal("no program loaded")
	}

	f, err := os.Open(complexityTable)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var table []complexityRow
	if f != nil {
		table, err = parseComplexity(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", complexityTable, err)
		}
	}
	recorded := forKernel(table, kernel)
	t.Logf("verifier complexity on %s (recorded in %s):\n%s", kernel, complexityTable, complexityReport(recorded, measured))

	if os.Getenv(updateComplexityEnv) != "" {
		var out strings.Builder
		writeComplexity(&out, mergeComplexity(table, kernel, measured))
		if err := os.MkdirAll(filepath.Dir(complexityTable), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(complexityTable, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the rows of %s in %s", kernel, complexityTable)
		return
	}
	if len(recorded) == 0 {
		t.Logf("%s has no rows for kernel %s: nothing to compare with; %s=1 adds them", complexityTable, kernel, updateComplexityEnv)
		return
	}
	for _, p := range compareComplexity(recorded, measured) {
		t.Error(p)
	}
	if t.Failed() {
		t.Logf("if the change is meant, rewrite the table in the same commit: sudo %s=1 go test ./bpf -run TestVerifierComplexity", updateComplexityEnv)
	}
}

func kernelRelease(t *testing.T) string {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// measureObject loads each program of o on its own, on maps created once
// with o's worst-case settings, and returns what each cost the verifier;
// skipped are the programs this kernel cannot load, and why.
func measureObject(t *testing.T, kernel string, o complexityObject) (rows []complexityRow, skipped map[string]string) {
	t.Helper()
	spec, err := o.load()
	if err != nil {
		t.Fatalf("%s: %v", o.name, err)
	}
	if o.configure != nil {
		if err := o.configure(spec); err != nil {
			t.Fatalf("%s: configure: %v", o.name, err)
		}
	}
	shared := spec.Copy()
	shared.Programs = nil
	mapColl, err := ebpf.NewCollection(shared)
	if err != nil {
		t.Fatalf("%s: create maps: %v", o.name, err)
	}
	defer mapColl.Close()

	// One type cache for every load, so that a load's time is the
	// verifier's, not that of resolving kernel types again.
	cache := btf.NewCache()
	skipped = map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(spec.Programs)) {
		prog := spec.Programs[name]
		if why, ok := o.elsewhere[name]; ok {
			skipped[name] = why
			continue
		}
		if why := missingTracepoint(t, prog); why != "" {
			skipped[name] = why
			continue
		}
		one := &ebpf.CollectionSpec{
			Maps: spec.Maps, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder,
			Programs: map[string]*ebpf.ProgramSpec{name: prog},
		}
		start := time.Now()
		coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: mapColl.Maps, Cache: cache})
		took := time.Since(start)
		if err != nil {
			if prog.Type == ebpf.Tracing && errors.Is(err, unix.EPERM) {
				// DESIGN.md §2: this host refuses fentry and fexit.
				skipped[name] = "this kernel refuses fentry/fexit (EPERM)"
				continue
			}
			t.Errorf("%s/%s: load: %v", o.name, name, err)
			continue
		}
		info, err := coll.Programs[name].Info()
		coll.Close()
		if err != nil {
			t.Errorf("%s/%s: program info: %v", o.name, name, err)
			continue
		}
		n, ok := info.VerifiedInstructions()
		if !ok {
			t.Fatalf("%s/%s: the kernel does not report verified instructions (5.16 and later do)", o.name, name)
		}
		rows = append(rows, complexityRow{kernel: kernel, object: o.name, program: name, verified: n, load: took})
	}
	return rows, skipped
}

// missingTracepoint says why a tp_btf program cannot load on this kernel
// (its tracepoint does not exist here, e.g. sched_ext_event without
// sched_ext), or "".
func missingTracepoint(t *testing.T, prog *ebpf.ProgramSpec) string {
	if prog.Type != ebpf.Tracing || prog.AttachType != ebpf.AttachTraceRawTp {
		return ""
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatalf("read the kernel's BTF: %v", err)
	}
	var td *btf.Typedef
	if err := kernel.TypeByName("btf_trace_"+prog.AttachTo, &td); err != nil {
		return fmt.Sprintf("this kernel has no %s tracepoint", prog.AttachTo)
	}
	return ""
}

// parseComplexity reads the table: one row a line, "kernel object program
// verified load", blank lines and #-comments between them.
func parseComplexity(r io.Reader) ([]complexityRow, error) {
	var rows []complexityRow
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f) != 5 {
			return nil, fmt.Errorf("line %d: %d fields, want 5: kernel object program verified load", line, len(f))
		}
		n, err := strconv.ParseUint(f[3], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: verified instructions %q: %v", line, f[3], err)
		}
		d, err := time.ParseDuration(f[4])
		if err != nil {
			return nil, fmt.Errorf("line %d: load time %q: %v", line, f[4], err)
		}
		row := complexityRow{kernel: f[0], object: f[1], program: f[2], verified: uint32(n), load: d}
		if seen[row.key()] {
			return nil, fmt.Errorf("line %d: %s %s listed twice for %s", line, row.object, row.program, row.kernel)
		}
		seen[row.key()] = true
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// writeComplexity writes the table in the form parseComplexity reads,
// sorted, with a header saying what it is and how it is kept.
func writeComplexity(w io.Writer, rows []complexityRow) {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b complexityRow) int {
		return cmp.Or(strings.Compare(a.kernel, b.kernel), strings.Compare(a.object, b.object), strings.Compare(a.program, b.program))
	})
	fmt.Fprintf(w, `# Verifier complexity of hotlane's BPF programs: the instructions the kernel's
# verifier processed for each (bpf_prog_info.verified_insns) and how long its
# load took, by kernel release, loaded with the settings that make it work
# hardest. bpf.TestVerifierComplexity compares the running kernel's rows with
# a fresh load and fails when a program grows by more than 20%% and 2,000
# instructions. Load times (as measured when a row last changed) are for
# reading only; they are never compared.
# Rewrite the running kernel's rows, in the commit that changes the count:
#   sudo %s=1 go test ./bpf -run TestVerifierComplexity
#
`, updateComplexityEnv)
	fmt.Fprintf(w, "%-24s %-10s %-24s %9s %9s\n", "# kernel", "object", "program", "verified", "load")
	for _, r := range rows {
		fmt.Fprintf(w, "%-24s %-10s %-24s %9d %9s\n", r.kernel, r.object, r.program, r.verified, r.load.Round(10*time.Microsecond))
	}
}

func forKernel(rows []complexityRow, kernel string) []complexityRow {
	var out []complexityRow
	for _, r := range rows {
		if r.kernel == kernel {
			out = append(out, r)
		}
	}
	return out
}

// mergeComplexity replaces the rows of kernel with measured, keeping
// every other kernel's. A program whose count has not changed keeps its
// row, load time included, so that a rewrite shows only what changed.
func mergeComplexity(table []complexityRow, kernel string, measured []complexityRow) []complexityRow {
	old := map[string]complexityRow{}
	for _, r := range table {
		old[r.key()] = r
	}
	out := slices.DeleteFunc(slices.Clone(table), func(r complexityRow) bool { return r.kernel == kernel })
	for _, m := range measured {
		if r, ok := old[m.key()]; ok && r.verified == m.verified {
			m = r
		}
		out = append(out, m)
	}
	return out
}

// compareComplexity lists what is wrong with measured against recorded
// (both of one kernel): a program grown by more than complexityGrowth,
// one the table does not list, and one it lists that was not measured.
func compareComplexity(recorded, measured []complexityRow) []string {
	var problems []string
	byKey := map[string]complexityRow{}
	for _, r := range recorded {
		byKey[r.key()] = r
	}
	for _, m := range measured {
		r, ok := byKey[m.key()]
		delete(byKey, m.key())
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s/%s: %d verified instructions, and no row in %s for %s",
				m.object, m.program, m.verified, complexityTable, m.kernel))
		case m.verified > r.verified && m.verified-r.verified > complexityGrowth(r.verified):
			problems = append(problems, fmt.Sprintf("%s/%s: %d verified instructions, up %d from the %d recorded (%+.0f%%); more than the %d allowed",
				m.object, m.program, m.verified, m.verified-r.verified, r.verified,
				100*(float64(m.verified)/float64(r.verified)-1), complexityGrowth(r.verified)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		r := byKey[k]
		problems = append(problems, fmt.Sprintf("%s/%s: listed in %s for %s but not loaded: removed, renamed, or no longer loadable here",
			r.object, r.program, complexityTable, r.kernel))
	}
	return problems
}

// complexityReport is the measured table beside the recorded counts.
func complexityReport(recorded, measured []complexityRow) string {
	before := map[string]uint32{}
	for _, r := range recorded {
		before[r.key()] = r.verified
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %-24s %9s %9s %8s %9s\n", "object", "program", "verified", "recorded", "change", "load")
	for _, m := range measured {
		rec, change := "-", "new"
		if n, ok := before[m.key()]; ok {
			rec = strconv.FormatUint(uint64(n), 10)
			change = fmt.Sprintf("%+d", int64(m.verified)-int64(n))
		}
		fmt.Fprintf(&b, "%-10s %-24s %9d %9s %8s %9s\n", m.object, m.program, m.verified, rec, change, m.load.Round(10*time.Microsecond))
	}
	return b.String()
}

// The guard's arithmetic, without the kernel: growth within the margin
// passes, beyond it fails, and the table's rows and programs must agree.
func TestCompareComplexity(t *testing.T) {
	row := func(prog string, n uint32) complexityRow {
		return complexityRow{kernel: "6.18.0", object: "runqlat", program: prog, verified: n}
	}
	recorded := []complexityRow{row("small", 100), row("large", 50_000), row("gone", 10)}
	measured := []complexityRow{
		row("small", 2_100),  // +2,000: twentyfold, but within 2,000
		row("large", 60_001), // +10,001: over 20 % (10,000)
		row("new", 5),
	}
	got := compareComplexity(recorded, measured)
	want := []string{"runqlat/large: 60001", "runqlat/new: 5 verified instructions, and no row", "runqlat/gone: listed"}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d: %q, want it to start %q", i, got[i], want[i])
		}
	}
	if p := compareComplexity([]complexityRow{row("large", 50_000)}, []complexityRow{row("large", 60_000)}); len(p) != 0 {
		t.Errorf("+20%% exactly: %v, want it allowed", p)
	}
	if p := compareComplexity([]complexityRow{row("large", 50_000)}, []complexityRow{row("large", 10)}); len(p) != 0 {
		t.Errorf("shrinking: %v, want it allowed", p)
	}
}

// The table survives a round trip, and merging replaces one kernel's rows
// only, and of those only the ones whose count changed.
func TestComplexityTableRoundTrip(t *testing.T) {
	rows := []complexityRow{
		{kernel: "7.3.4", object: "runqlat", program: "rq_switch_btf", verified: 9000, load: 2 * time.Millisecond},
		{kernel: "6.18.0", object: "xdp", program: "hotlane_xdp", verified: 700, load: 150 * time.Microsecond},
		{kernel: "6.18.0", object: "runqlat", program: "rq_switch_btf", verified: 8000, load: 3 * time.Millisecond},
	}
	merged := mergeComplexity(rows, "6.18.0", []complexityRow{
		{kernel: "6.18.0", object: "runqlat", program: "rq_switch_btf", verified: 8100, load: time.Millisecond},
		{kernel: "6.18.0", object: "xdp", program: "hotlane_xdp", verified: 700, load: time.Second},
	})
	var b strings.Builder
	writeComplexity(&b, merged)
	back, err := parseComplexity(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	want := []complexityRow{
		{kernel: "6.18.0", object: "runqlat", program: "rq_switch_btf", verified: 8100, load: time.Millisecond},
		{kernel: "6.18.0", object: "xdp", program: "hotlane_xdp", verified: 700, load: 150 * time.Microsecond}, // unchanged: kept
		{kernel: "7.3.4", object: "runqlat", program: "rq_switch_btf", verified: 9000, load: 2 * time.Millisecond},
	}
	if !slices.Equal(back, want) {
		t.Errorf("read back %v, want %v", back, want)
	}
	if _, err := parseComplexity(strings.NewReader("6.18 runqlat p 1 1ms\n6.18 runqlat p 2 1ms\n")); err == nil {
		t.Error("a program listed twice for one kernel was accepted")
	}
}
