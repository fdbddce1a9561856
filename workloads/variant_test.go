package workloads

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseVariants(t *testing.T) {
	ext, err := ParseScheduler("rusty=/usr/bin/scx_rusty --slice-us 5000")
	if err != nil {
		t.Fatal(err)
	}
	opts := VariantOptions{ScxSimplePath: "/s", ScxQmapPath: "/q", FIFOPriority: 70, External: []Variant{ext}}
	vs, err := ParseVariants(strings.Join(BuiltinVariants, ",")+", scx_simple -f ,rusty", opts)
	if err == nil {
		t.Fatalf("a variant listed twice was accepted: %v", vs)
	}
	vs, err = ParseVariants("eevdf+fifo, eevdf+deadline,eevdf+nice-20,scx_simple -f,scx_qmap,hotlane", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []Variant{
		{Name: EEVDFFIFO, Lane: LanePolicy{Kind: LaneFIFO, Priority: 70}},
		{Name: EEVDFDeadline, Lane: LanePolicy{Kind: LaneDeadline}},
		{Name: EEVDFNice, Lane: LanePolicy{Kind: LaneNice, Nice: -20}},
		{Name: ScxSimpleF, Command: []string{"/s", "-f"}, Ops: "simple"},
		{Name: ScxQmap, Command: []string{"/q"}, Ops: "qmap"},
		{Name: HotlaneName, Hotlane: true},
		// --scheduler variants not in the list run after it.
		{Name: "rusty", Command: []string{"/usr/bin/scx_rusty", "--slice-us", "5000"}},
	}
	if diff := cmp.Diff(want, vs); diff != "" {
		t.Errorf("variants (-want +got):\n%s", diff)
	}
	// Named in the list, an external scheduler keeps its place.
	vs, _ = ParseVariants("rusty,eevdf", opts)
	if len(vs) != 2 || vs[0].Name != "rusty" {
		t.Errorf("order %v", vs)
	}
	if vs, err := ParseVariants("", opts); err != nil || len(vs) != 1 {
		t.Errorf("only --scheduler: %v, %v", vs, err)
	}
	if _, err := ParseVariants("eevdf,cfs", opts); !errors.Is(err, ErrUnknownScheduler) || !strings.Contains(err.Error(), "eevdf+deadline") {
		t.Errorf("unknown variant: %v", err)
	}
	if vs, _ := ParseVariants("eevdf+fifo", VariantOptions{}); vs[0].Lane.Priority != DefaultFIFOPriority {
		t.Errorf("default FIFO priority %d", vs[0].Lane.Priority)
	}
}

func TestParseSchedulerErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"rusty":            "write NAME=COMMAND",
		"rusty=":           "write NAME=COMMAND",
		"=/bin/x":          "the name must be",
		"a b=/bin/x":       "the name must be",
		"hotlane=/bin/x":   "built-in variant",
		"eevdf+fifo=/bin/": "built-in variant",
	} {
		_, err := ParseScheduler(spec)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseScheduler(%q) = %v, want one line containing %q", spec, err, want)
		}
	}
}

func TestPreflight(t *testing.T) {
	vs, err := ParseVariants("eevdf,eevdf+fifo,eevdf+deadline,eevdf+nice-20,scx_simple,scx_qmap,hotlane,ext",
		VariantOptions{ScxSimplePath: "scx_simple", ScxQmapPath: "/missing/scx_qmap", External: []Variant{{Name: "ext", Command: []string{"ext", "-x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	look := func(p string) (string, error) {
		if strings.Contains(p, "missing") {
			return "", exec.ErrNotFound
		}
		return "/usr/bin/" + p, nil
	}
	names := func(vs []Variant) (out []string) {
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return out
	}

	// A host without sched_ext and without CAP_SYS_NICE: only EEVDF runs.
	run, skipped := Preflight(vs, Host{LookPath: look})
	if diff := cmp.Diff([]string{EEVDF}, names(run)); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	reasons := map[string]string{}
	for _, s := range skipped {
		reasons[s.Name] = s.Reason
		if strings.Contains(s.Reason, "\n") {
			t.Errorf("%s: reason is not one line: %q", s.Name, s.Reason)
		}
	}
	if !strings.Contains(reasons[EEVDFFIFO], "CAP_SYS_NICE") || !strings.Contains(reasons[HotlaneName], "no sched_ext") || !strings.Contains(reasons["ext"], "no sched_ext") {
		t.Errorf("reasons %v", reasons)
	}

	// The VM as root: everything but the missing program, and the found
	// programs get their paths.
	run, skipped = Preflight(vs, Host{SchedExt: true, SysNice: true, LookPath: look})
	if len(run) != len(vs)-1 || len(skipped) != 1 || skipped[0].Name != ScxQmap || !strings.Contains(skipped[0].Reason, "/missing/scx_qmap not found") {
		t.Errorf("run %v, skipped %v", names(run), skipped)
	}
	for _, v := range run {
		if v.Name == "ext" && (v.Command[0] != "/usr/bin/ext" || v.Command[1] != "-x") {
			t.Errorf("external command %v", v.Command)
		}
	}
}
