package verify

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseBounds(t *testing.T) {
	p := func(stat string, q float64, limit time.Duration) Clause {
		return Clause{Stat: stat, Quantile: q, Limit: limit}
	}
	tests := []struct {
		spec string
		want []Bound
	}{
		{"inference:p99<=200us,max<=5ms", []Bound{{Class: "inference", View: ViewFelt, Clauses: []Clause{
			p("p99", 0.99, 200*time.Microsecond), p("max", 0, 5*time.Millisecond)}}}},
		{"p99<=200us,max<=5ms", []Bound{{Class: "normal", View: ViewFelt, Clauses: []Clause{
			p("p99", 0.99, 200*time.Microsecond), p("max", 0, 5*time.Millisecond)}}}},
		{"inference:p99<=200us,max<=5ms;normal:p50<=10ms", []Bound{
			{Class: "inference", View: ViewFelt, Clauses: []Clause{p("p99", 0.99, 200*time.Microsecond), p("max", 0, 5*time.Millisecond)}},
			{Class: "normal", View: ViewFelt, Clauses: []Clause{p("p50", 0.5, 10*time.Millisecond)}}}},
		{"p99.9<=1ms;inference:p50<=100µs", []Bound{
			{Class: "normal", View: ViewFelt, Clauses: []Clause{p("p99.9", 0.999, time.Millisecond)}},
			{Class: "inference", View: ViewFelt, Clauses: []Clause{p("p50", 0.5, 100*time.Microsecond)}}}},
		{"p99.99<=1ms,p90<=1.5ms,mean<=300μs", []Bound{{Class: "normal", View: ViewFelt, Clauses: []Clause{ // Greek mu
			p("p99.99", 0.9999, time.Millisecond), p("p90", 0.9, 1500*time.Microsecond), p("mean", 0, 300*time.Microsecond)}}}},
		{"p99<200us", []Bound{{Class: "normal", View: ViewFelt, Clauses: []Clause{{Stat: "p99", Quantile: 0.99, Limit: 200 * time.Microsecond, Strict: true}}}}},
		{"  inference : P99 <= 200us ,  MAX<=1s ", []Bound{{Class: "inference", View: ViewFelt, Clauses: []Clause{
			p("p99", 0.99, 200*time.Microsecond), p("max", 0, time.Second)}}}},
		{"p099.900<=1ms,p100<=2ms,p0.5<=1us,p1<=0s", []Bound{{Class: "normal", View: ViewFelt, Clauses: []Clause{
			p("p99.9", 0.999, time.Millisecond), p("p100", 1, 2*time.Millisecond),
			p("p0.5", 0.005, time.Microsecond), p("p1", 0.01, 0)}}}},
		{"max<=1h2m3.5s", []Bound{{Class: "normal", View: ViewFelt, Clauses: []Clause{p("max", 0, time.Hour+2*time.Minute+3500*time.Millisecond)}}}},
		{"a-b_9:max<=1ms", []Bound{{Class: "a-b_9", View: ViewFelt, Clauses: []Clause{p("max", 0, time.Millisecond)}}}},
		{"p99<=1ms,p99<=2ms", []Bound{{Class: "normal", View: ViewFelt, Clauses: []Clause{p("p99", 0.99, time.Millisecond), p("p99", 0.99, 2*time.Millisecond)}}}},
		{"inference/wait:p99<=1ms; normal / felt :max<=1s", []Bound{
			{Class: "inference", View: ViewWait, Clauses: []Clause{p("p99", 0.99, time.Millisecond)}},
			{Class: "normal", View: ViewFelt, Clauses: []Clause{p("max", 0, time.Second)}}}},
		{" /wait: max<=1s", []Bound{{Class: "normal", View: ViewWait, Clauses: []Clause{p("max", 0, time.Second)}}}},
	}
	for _, tt := range tests {
		got, err := ParseBounds(tt.spec, "normal")
		if err != nil {
			t.Errorf("ParseBounds(%q): %v", tt.spec, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseBounds(%q) (-want +got):\n%s", tt.spec, diff)
		}
	}
}

func TestParseBoundsErrors(t *testing.T) {
	tests := []struct {
		spec, defaultClass, want string
	}{
		{"inference:p99<=abc", "normal", `bound "inference:p99<=abc": "abc" is not a duration (use e.g. 200us, 5ms)`},
		{"", "normal", `bound "": empty bound; write [CLASS[/VIEW]:]STAT<=DURATION[,...][;...], e.g. inference:p99<=200us,max<=5ms`},
		{"p99<=200", "normal", `bound "p99<=200": "200" has no unit (use e.g. 200us, 5ms)`},
		{"p99<=-5ms", "normal", `bound "p99<=-5ms": "-5ms" is negative; a latency limit must be 0 or more`},
		{"p99<=", "normal", `bound "p99<=": "p99<=" has no limit after the operator; e.g. p99<=200us`},
		{"p99>=1ms", "normal", `bound "p99>=1ms": "p99>=1ms": only upper limits are supported; use <= or <, e.g. p99<=200us`},
		{"p99=1ms", "normal", `bound "p99=1ms": "p99=1ms": only upper limits are supported; use <= or <, e.g. p99<=200us`},
		{"p99 1ms", "normal", `bound "p99 1ms": "p99 1ms" is not a limit; write STAT<=DURATION, e.g. p99<=200us or max<=5ms`},
		{"median<=1ms", "normal", `bound "median<=1ms": "median" is not a statistic (use p50, p99, p99.9, ..., max or mean)`},
		{"<=1ms", "normal", `bound "<=1ms": missing statistic before the operator (use p50, p99, p99.9, ..., max or mean)`},
		{"p<=1ms", "normal", `bound "p<=1ms": "p" is not a percentile (use p50, p99, p99.9, ..., max or mean)`},
		{"p99.<=1ms", "normal", `bound "p99.<=1ms": "p99." is not a percentile (use p50, p99, p99.9, ..., max or mean)`},
		{"p9x<=1ms", "normal", `bound "p9x<=1ms": "p9x" is not a percentile (use p50, p99, p99.9, ..., max or mean)`},
		{"p-1<=1ms", "normal", `bound "p-1<=1ms": "p-1" is not a percentile (use p50, p99, p99.9, ..., max or mean)`},
		{"p0<=1ms", "normal", `bound "p0<=1ms": "p0": a percentile must be above 0 (use p50, p99, p99.9, ..., max or mean)`},
		{"p100.1<=1ms", "normal", `bound "p100.1<=1ms": "p100.1": a percentile is at most 100 (use p50, p99, p99.9, ..., max or mean)`},
		{"p101<=1ms", "normal", `bound "p101<=1ms": "p101": a percentile is at most 100 (use p50, p99, p99.9, ..., max or mean)`},
		{"p1000<=1ms", "normal", `bound "p1000<=1ms": "p1000": a percentile is at most 100 (use p50, p99, p99.9, ..., max or mean)`},
		{"p99<=1ms,", "normal", `bound "p99<=1ms,": empty clause; write [CLASS[/VIEW]:]STAT<=DURATION[,...][;...], e.g. inference:p99<=200us,max<=5ms`},
		{"p99<=1ms;", "normal", `bound "p99<=1ms;": empty class bound between ';'; write [CLASS[/VIEW]:]STAT<=DURATION[,...][;...], e.g. inference:p99<=200us,max<=5ms`},
		{"inference:", "normal", `bound "inference:": empty clause; write [CLASS[/VIEW]:]STAT<=DURATION[,...][;...], e.g. inference:p99<=200us,max<=5ms`},
		{"inference/run:p99<=1ms", "normal", `bound "inference/run:p99<=1ms": unknown view "run" after "inference/"; use felt (from the wake-up's cause, the default) or wait (from the wake-up, as runqlat)`},
		{"inference/:p99<=1ms", "normal", `bound "inference/:p99<=1ms": unknown view "" after "inference/"; use felt (from the wake-up's cause, the default) or wait (from the wake-up, as runqlat)`},
		{":p99<=1ms", "normal", `bound ":p99<=1ms": empty class name before ':'; class names are 1 to 15 characters of a-z, 0-9, _ and -`},
		{"Inference:p99<=1ms", "normal", `bound "Inference:p99<=1ms": class name "Inference" has 'I'; class names are 1 to 15 characters of a-z, 0-9, _ and -`},
		{"abcdefghijklmnop:p99<=1ms", "normal", `bound "abcdefghijklmnop:p99<=1ms": class name "abcdefghijklmnop" is too long; class names are 1 to 15 characters of a-z, 0-9, _ and -`},
		{"a:max<=1ms;a:p99<=1ms", "normal", `bound "a:max<=1ms;a:p99<=1ms": class "a" has more than one bound; list all its clauses once, e.g. a:p99<=200us,max<=5ms`},
		{"max<=1ms;normal:p99<=1ms", "normal", `bound "max<=1ms;normal:p99<=1ms": class "normal" has more than one bound; list all its clauses once, e.g. normal:p99<=200us,max<=5ms`},
		{"max<=1ms", "", `bound "max<=1ms": no class given; write CLASS:..., e.g. inference:max<=1ms`},
		{"/wait: max<=1ms", "", `bound "/wait: max<=1ms": no class given; write CLASS:..., e.g. inference:max<=1ms`},
		{"p99<=1ms:x", "normal", `bound "p99<=1ms:x": class name "p99<=1ms" has '<'; class names are 1 to 15 characters of a-z, 0-9, _ and -`},
		{"max<=9999999h", "normal", `bound "max<=9999999h": "9999999h" is not a duration (use e.g. 200us, 5ms)`},
	}
	for _, tt := range tests {
		got, err := ParseBounds(tt.spec, tt.defaultClass)
		if err == nil {
			t.Errorf("ParseBounds(%q) = %v, want an error", tt.spec, got)
			continue
		}
		if !errors.Is(err, ErrBadBound) {
			t.Errorf("ParseBounds(%q): %v does not wrap ErrBadBound", tt.spec, err)
		}
		if err.Error() != tt.want {
			t.Errorf("ParseBounds(%q):\n got %s\nwant %s", tt.spec, err, tt.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseBounds(%q): error is not one line: %q", tt.spec, err)
		}
	}
}

func TestBoundString(t *testing.T) {
	bounds, err := ParseBounds("inference:p99<=200us,max<5ms,mean<=1.5ms;p99.9<=1s", "normal")
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, b := range bounds {
		parts = append(parts, b.String())
	}
	want := "inference:p99<=200µs,max<5ms,mean<=1.5ms;normal:p99.9<=1s"
	if got := strings.Join(parts, ";"); got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}
}

// FuzzParseBounds: ParseBounds never panics, every error wraps ErrBadBound
// and is one line, and an accepted spec renders to one that parses to the
// same bounds.
func FuzzParseBounds(f *testing.F) {
	for _, s := range []string{
		"inference:p99<=200us,max<=5ms",
		"inference:p99<=200us,max<=5ms;normal:p50<=10ms",
		"p99.9<1ms,mean<=300µs",
		"p0.001<=1ns",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		bounds, err := ParseBounds(spec, "normal")
		if err != nil {
			if !errors.Is(err, ErrBadBound) {
				t.Fatalf("error %v does not wrap ErrBadBound", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if len(bounds) == 0 {
			t.Fatal("no error and no bounds")
		}
		parts := make([]string, len(bounds))
		for i, b := range bounds {
			if len(b.Clauses) == 0 {
				t.Fatalf("bound for %q has no clauses", b.Class)
			}
			for _, c := range b.Clauses {
				if c.Limit < 0 {
					t.Fatalf("negative limit in %v", c)
				}
				if strings.HasPrefix(c.Stat, "p") && !(c.Quantile > 0 && c.Quantile <= 1) {
					t.Fatalf("%s has quantile %v", c.Stat, c.Quantile)
				}
			}
			parts[i] = b.String()
		}
		rendered := strings.Join(parts, ";")
		again, err := ParseBounds(rendered, "other")
		if err != nil {
			t.Fatalf("%q rendered as %q, which does not parse: %v", spec, rendered, err)
		}
		if diff := cmp.Diff(bounds, again); diff != "" {
			t.Fatalf("%q rendered as %q parses differently (-first +again):\n%s", spec, rendered, diff)
		}
	})
}

func mustClause(t *testing.T, text string) Clause {
	t.Helper()
	b, err := ParseBounds(text, "c")
	if err != nil {
		t.Fatal(err)
	}
	return b[0].Clauses[0]
}

// TestCheckConservative: the true p99 is below the limit, but the bucket
// holding it reaches above it, so the clause fails; with a max below the
// limit, the same bucket passes because the true p99 cannot exceed the max.
func TestCheckConservative(t *testing.T) {
	// 200µs lies in the bucket [196.608µs, 200.704µs).
	lo, hi := BucketBounds(BucketIndex(200000))
	if lo != 196608 || hi != 200704 {
		t.Fatalf("bucket of 200µs is [%d, %d)", lo, hi)
	}
	var h Histogram
	h.RecordN(10000, 990)
	h.RecordN(199000, 10) // the p99 and the max: 199µs, under 200µs
	h.Record(300000)      // one sample above it, beyond the p99
	c := mustClause(t, "p99<=200us")

	v := c.Check(&h)
	if v.Pass {
		t.Errorf("true p99 199µs, bucket up to 200.703µs, limit 200µs: passed, want FAIL: %s", v)
	}
	if v.Measured != 200703*time.Nanosecond {
		t.Errorf("Measured = %v, want the bucket's largest value 200.703µs", v.Measured)
	}
	t.Log(v)

	// Remove the outlier: now the max (199µs) caps the p99 and it passes.
	var h2 Histogram
	h2.RecordN(10000, 980)
	h2.RecordN(199000, 20)
	v = c.Check(&h2)
	if !v.Pass || v.Measured != 199*time.Microsecond {
		t.Errorf("p99 capped by max 199µs: %s (measured %v), want PASS at 199µs", v, v.Measured)
	}
	t.Log(v)

	// A limit at or above the bucket's last value passes.
	if v := mustClause(t, "p99<=200703ns").Check(&h); !v.Pass {
		t.Errorf("limit at the bucket's largest value: %s, want PASS", v)
	}
	if v := mustClause(t, "p99<200703ns").Check(&h); v.Pass {
		t.Errorf("strict limit equal to the bucket's largest value: %s, want FAIL", v)
	}
	if v := mustClause(t, "p99<200704ns").Check(&h); !v.Pass {
		t.Errorf("strict limit just above the bucket: %s, want PASS", v)
	}
}

func TestCheckStats(t *testing.T) {
	var h Histogram
	for _, v := range []uint64{1000, 2000, 3000, 4000, 5000000} {
		h.Record(v)
	}
	tests := []struct {
		clause   string
		pass     bool
		measured time.Duration
	}{
		{"max<=5ms", true, 5 * time.Millisecond},
		{"max<5ms", false, 5 * time.Millisecond},
		{"max<=4.999ms", false, 5 * time.Millisecond},
		{"mean<=1.0020ms", true, 1002 * time.Microsecond},
		{"mean<=1ms", false, 1002 * time.Microsecond},
		// The p80 is 4000ns, in the bucket [3968, 4032).
		{"p80<=4us", false, 4031 * time.Nanosecond},
		{"p80<=4.031us", true, 4031 * time.Nanosecond},
		{"p100<=5ms", true, 5 * time.Millisecond},
		// The p50 is 3000ns, in the bucket [2944, 3008).
		{"p50<=3us", false, 3007 * time.Nanosecond},
	}
	for _, tt := range tests {
		v := mustClause(t, tt.clause).Check(&h)
		if v.Pass != tt.pass || v.Measured != tt.measured {
			t.Errorf("%s: pass %v measured %v, want %v %v (%s)", tt.clause, v.Pass, v.Measured, tt.pass, tt.measured, v)
		}
		if v.Reason == "" || v.Clause.String() == "" {
			t.Errorf("%s: empty reason or clause: %+v", tt.clause, v)
		}
	}
}

func TestCheckNoSamples(t *testing.T) {
	for _, text := range []string{"p99<=1h", "max<=1h", "mean<=1h", "p50<1h"} {
		c := mustClause(t, text)
		for _, h := range []*Histogram{nil, new(Histogram)} {
			v := c.Check(h)
			if v.Pass || v.Reason != "no samples" || v.Measured != 0 {
				t.Errorf("%s on an empty histogram: %+v, want FAIL with reason \"no samples\"", text, v)
			}
		}
	}
	b := Bound{Class: "x", Clauses: []Clause{mustClause(t, "max<=1s"), mustClause(t, "p99<=1s")}}
	for _, v := range b.Check(nil) {
		if v.Pass {
			t.Errorf("Bound.Check(nil): %s", v)
		}
	}
}

func TestCheckUnknownStat(t *testing.T) {
	var h Histogram
	h.Record(1)
	for _, c := range []Clause{{Stat: "median", Limit: time.Hour}, {Stat: "p99", Quantile: 0, Limit: time.Hour}, {Stat: "p99", Quantile: 2, Limit: time.Hour}} {
		if v := c.Check(&h); v.Pass || !strings.Contains(v.Reason, "unknown statistic") {
			t.Errorf("%+v: %s, want FAIL for an unknown statistic", c, v)
		}
	}
}

func TestVerdictString(t *testing.T) {
	var h Histogram
	h.RecordN(150000, 100)
	v := mustClause(t, "p99<=200us").Check(&h)
	want := "PASS p99<=200µs: p99 is at most 150µs (its bucket is 147.5µs to 151.6µs, max 150µs), within 200µs"
	if got := v.String(); got != want {
		t.Errorf("Verdict.String() =\n %q\nwant\n %q", got, want)
	}
}

func TestHasClasslessPart(t *testing.T) {
	for spec, want := range map[string]bool{
		"p99<=1ms":                           true,
		"inference:p99<=1ms":                 false,
		"inference:p99<=1ms;max<=5ms":        true,
		"inference:p99<=1ms;normal:p50<=1s":  false,
		" ; inference:max<=1ms":              false,
		"/wait:p99<=1ms":                     true,
		"inference:p99<=1ms; / felt:max<=1s": true,
		"inference/wait:p99<=1ms":            false,
	} {
		if got := HasClasslessPart(spec); got != want {
			t.Errorf("HasClasslessPart(%q) = %v, want %v", spec, got, want)
		}
	}
}

// Each clause is one CI case: met, failed with its reason, or, for a class
// nothing was measured for, an error.
func TestCases(t *testing.T) {
	h := new(Histogram)
	for range 100 {
		h.Record(uint64(3 * time.Millisecond))
	}
	bounds, err := ParseBounds("inference:p99<=10ms,max<=1ms;normal/wait:p50<=5ms", "inference")
	if err != nil {
		t.Fatal(err)
	}
	cvs := []ClassVerdicts{
		{Class: "inference", View: bounds[0].View, Verdicts: bounds[0].Check(h)},
		{Class: "normal", View: bounds[1].View, Verdicts: bounds[1].Check(nil)},
	}
	cases := Cases("hotlane verify", cvs, time.Second)
	if len(cases) != 3 {
		t.Fatalf("%d cases, want one per clause (3): %+v", len(cases), cases)
	}
	if c := cases[0]; c.Class != "inference" || c.Name != "p99<=10ms" || c.Failure != "" || c.Error != "" {
		t.Errorf("met clause: %+v", c)
	}
	if c := cases[1]; c.Name != "max<=1ms" || !strings.Contains(c.Failure, "inference max<=1ms failed") || c.Error != "" {
		t.Errorf("failed clause: %+v", c)
	}
	if c := cases[2]; c.Class != "normal/wait" || c.Error == "" || c.Failure != "" {
		t.Errorf("unmeasured clause: %+v, want an error", c)
	}
}

// The bound-target rule (#42): someone who selected tasks (--pid, --tid,
// --comm) and wrote a bound without a class means the bound on what they
// selected, whatever its class; without a selection such a bound covers
// the lane class. A part naming its class covers that class either way.
func TestClasslessTarget(t *testing.T) {
	for _, tt := range []struct {
		cfg               TracerConfig
		want              Target
		selection, covers string
	}{
		{TracerConfig{}, Target{Class: "inference"}, "", "the tasks of class inference"},
		{TracerConfig{FilterTGID: 1234}, Target{Selected: true}, "pid 1234", "the selected tasks (pid 1234), whatever their class"},
		{TracerConfig{FilterTIDs: []uint32{7}}, Target{Selected: true}, "tid 7", "the selected tasks (tid 7), whatever their class"},
		{TracerConfig{FilterTIDs: []uint32{7, 8}, FilterComm: "infer"}, Target{Selected: true}, `tids 7, 8 and comm prefix "infer"`,
			`the selected tasks (tids 7, 8 and comm prefix "infer"), whatever their class`},
		{TracerConfig{FilterComm: "sleep"}, Target{Selected: true}, `comm prefix "sleep"`, `the selected tasks (comm prefix "sleep"), whatever their class`},
	} {
		sel := tt.cfg.Selection()
		if sel != tt.selection {
			t.Errorf("%+v: Selection() = %q, want %q", tt.cfg, sel, tt.selection)
		}
		target := ClasslessTarget(tt.cfg, "inference")
		if target != tt.want {
			t.Errorf("%+v: ClasslessTarget = %+v, want %+v", tt.cfg, target, tt.want)
			continue
		}
		bounds, err := ParseBoundsFor("max<=1ms;normal:p99<=5ms", target)
		if err != nil {
			t.Fatal(err)
		}
		first, named := bounds[0], bounds[1]
		if first.Selected != tt.want.Selected || first.Class != tt.want.Class {
			t.Errorf("%q: the part without a class bounds %+v, want %+v", sel, first, tt.want)
		}
		if got := first.Covers(sel); got != tt.covers {
			t.Errorf("%q: the part without a class covers %q, want %q", sel, got, tt.covers)
		}
		if named.Selected || named.Class != "normal" {
			t.Errorf("%q: normal:... bounds %+v, want class normal", sel, named)
		}
		wantNamed := "the tasks of class normal"
		if sel != "" {
			wantNamed = "the selected tasks (" + sel + ") of class normal"
		}
		if got := named.Covers(sel); got != wantNamed {
			t.Errorf("%q: normal:... covers %q, want %q", sel, got, wantNamed)
		}
	}
}

// A bound on the selected tasks renders without a class, names its view
// as /VIEW:, reads back the same, and may be given once.
func TestSelectedBounds(t *testing.T) {
	selected := Target{Selected: true}
	bounds, err := ParseBoundsFor("p99<=1ms,max<=5ms; inference:max<=2ms", selected)
	if err != nil {
		t.Fatal(err)
	}
	want := []Bound{
		{Selected: true, View: ViewFelt, Clauses: []Clause{mustClause(t, "p99<=1ms"), mustClause(t, "max<=5ms")}},
		{Class: "inference", View: ViewFelt, Clauses: []Clause{mustClause(t, "max<=2ms")}},
	}
	if diff := cmp.Diff(want, bounds); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for spec, rendered := range map[string]string{
		"p99<=1ms,max<=5ms": "p99<=1ms,max<=5ms",
		"/wait:p99<=1ms":    "/wait:p99<=1ms",
		"/felt:p99<=1ms":    "p99<=1ms",
	} {
		b, err := ParseBoundsFor(spec, selected)
		if err != nil {
			t.Fatal(err)
		}
		if got := b[0].String(); got != rendered || !b[0].Selected {
			t.Errorf("%q: %+v renders as %q, want a bound on the selected tasks rendered %q", spec, b[0], got, rendered)
		}
		again, err := ParseBoundsFor(b[0].String(), selected)
		if err != nil || !cmp.Equal(b, again) {
			t.Errorf("%q rendered as %q reads back as %+v (%v)", spec, b[0].String(), again, err)
		}
	}
	if got := (Bound{Selected: true, View: ViewWait}).Subject(); got != "selected tasks/wait" {
		t.Errorf("Subject = %q", got)
	}
	_, err = ParseBoundsFor("max<=1ms;/wait:p99<=1ms", selected)
	if !errors.Is(err, ErrBadBound) || !strings.Contains(err.Error(), "the selected tasks have more than one bound") {
		t.Errorf("two bounds on the selected tasks: %v", err)
	}
}

// A bound on the selected tasks streams violations from every class, at
// the tightest limit that applies; a class's own bound picks its view.
func TestThresholdsOfSelectedBound(t *testing.T) {
	bounds, err := ParseBoundsFor("max<=5ms;normal/wait:p99<=1ms;batch:max<=9ms", Target{Selected: true})
	if err != nil {
		t.Fatal(err)
	}
	th, views := Thresholds(bounds, []string{"inference", "batch", "normal"})
	wantTh := map[string]time.Duration{"inference": 5 * time.Millisecond, "batch": 5 * time.Millisecond, "normal": time.Millisecond}
	wantViews := map[string]View{"inference": ViewFelt, "batch": ViewFelt, "normal": ViewWait}
	if diff := cmp.Diff(wantTh, th); diff != "" {
		t.Errorf("thresholds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantViews, views); diff != "" {
		t.Errorf("views (-want +got):\n%s", diff)
	}
}
