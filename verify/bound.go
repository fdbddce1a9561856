package verify

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hotlane/hotlane/report"
)

// ErrBadBound is wrapped by every error ParseBounds returns.
var ErrBadBound = errors.New("bad latency bound")

// boundSyntax is quoted in errors about the overall shape of a spec.
const boundSyntax = "write [CLASS[/VIEW]:]STAT<=DURATION[,...][;...], e.g. inference:p99<=200us,max<=5ms"

// A Bound is the latency limits one task class must meet, in one view of
// its waits; or, with Selected, the limits the tasks the tracer's filters
// select must meet, whatever their class.
type Bound struct {
	Class   string   `json:"class"` // "" when Selected
	View    View     `json:"view"`
	Clauses []Clause `json:"clauses"`
	// Selected bounds the tasks TracerConfig's filters select (--pid,
	// --tid, --comm) rather than a class.
	Selected bool `json:"selected,omitempty"`
}

// A Target is what the parts of a bound spec without "CLASS:" cover: a
// class, or the selected tasks.
type Target struct {
	Class    string
	Selected bool
}

// ClasslessTarget is the rule for a bound part without "CLASS:". Someone
// who picked tasks (cfg's filters select some, see TracerConfig.Selection)
// and wrote a bound without a class means the bound on what they picked,
// whatever class the policy puts it in; without a selection the part
// covers class lane, the policy's first (the high-priority lane in the
// built-in policy).
func ClasslessTarget(cfg TracerConfig, lane string) Target {
	if cfg.Selection() != "" {
		return Target{Selected: true}
	}
	return Target{Class: lane}
}

// A Clause limits one statistic of a class's latency histogram.
type Clause struct {
	// Stat names the statistic as written in a spec, in canonical form:
	// "max", "mean", or a percentile such as "p50", "p99.9".
	Stat string `json:"stat"`
	// Quantile is the quantile of a percentile clause (0.999 for p99.9),
	// and 0 for max and mean.
	Quantile float64 `json:"quantile,omitempty"`
	// Limit is the largest latency allowed (with Strict, the bound).
	Limit time.Duration `json:"limit_ns"`
	// Strict is set for "<": the statistic must stay below Limit.
	Strict bool `json:"strict,omitempty"`
}

// A Verdict is the outcome of checking one clause against a histogram.
type Verdict struct {
	Clause Clause `json:"clause"`
	Pass   bool   `json:"pass"`
	// Measured is the value compared with the limit: for a percentile the
	// largest value it can have (Histogram.QuantileUpper), for max the
	// exact maximum, for mean the mean. Zero when there were no samples.
	Measured time.Duration `json:"measured_ns"`
	// Reason says why the clause failed or how it passed, for people.
	Reason string `json:"reason"`
}

// ParseBounds parses a latency bound spec:
//
//	inference:p99<=200us,max<=5ms;normal/wait:p50<=10ms
//
// Classes are separated by ";", clauses within a class by ",". A part
// without "CLASS:" applies to defaultClass. "CLASS/VIEW:" names the view
// the bound checks (ViewFelt, the default, or ViewWait). A clause is a statistic (pNN or
// pNN.N for a percentile in (0, 100], max, or mean), "<=" (or "<" for a
// strict bound) and a duration in Go's syntax (ns, us or µs, ms, s, m, h).
// Spaces around the pieces are ignored and statistics are case-insensitive.
// Each class may appear once. Errors wrap ErrBadBound and say, in one line,
// what was wrong and what would be right.
func ParseBounds(spec, defaultClass string) ([]Bound, error) {
	return ParseBoundsFor(spec, Target{Class: defaultClass})
}

// ParseBoundsFor is ParseBounds with the parts without "CLASS:" covering
// classless, which may be the selected tasks (see ClasslessTarget). Such a
// part may still name its view: "/wait:p99<=1ms".
func ParseBoundsFor(spec string, classless Target) ([]Bound, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, boundErrorf(spec, "empty bound; %s", boundSyntax)
	}
	var bounds []Bound
	seen := make(map[string]bool)
	for part := range strings.SplitSeq(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, boundErrorf(spec, "empty class bound between ';'; %s", boundSyntax)
		}
		b, err := parseBound(part, classless)
		if err != nil {
			return nil, err
		}
		key := b.Class // class names have no spaces
		if b.Selected {
			key = "selected tasks"
		}
		switch {
		case seen[key] && b.Selected:
			return nil, boundErrorf(spec, "the selected tasks have more than one bound; list all their clauses once, e.g. p99<=200us,max<=5ms")
		case seen[key]:
			return nil, boundErrorf(spec, "class %q has more than one bound; list all its clauses once, e.g. %s:p99<=200us,max<=5ms", b.Class, b.Class)
		}
		seen[key] = true
		bounds = append(bounds, b)
	}
	return bounds, nil
}

// HasClasslessPart reports whether spec has a part without "CLASS:" (or
// with "/VIEW:" alone), which ParseBounds gives to its default class.
func HasClasslessPart(spec string) bool {
	for _, part := range strings.Split(spec, ";") {
		subject, _, hasColon := strings.Cut(part, ":")
		class, _, hasView := strings.Cut(subject, "/")
		if strings.TrimSpace(part) != "" && (!hasColon || hasView && strings.TrimSpace(class) == "") {
			return true
		}
	}
	return false
}

// parseBound parses one class's part of a spec.
func parseBound(part string, classless Target) (Bound, error) {
	b := Bound{Class: classless.Class, Selected: classless.Selected, View: ViewFelt}
	list := part
	if class, rest, ok := strings.Cut(part, ":"); ok {
		class = strings.TrimSpace(class)
		c, view, hasView := strings.Cut(class, "/")
		if hasView {
			class, view = strings.TrimSpace(c), strings.TrimSpace(view)
			if !slices.Contains(Views, View(view)) {
				return Bound{}, boundErrorf(part, "unknown view %q after %q; use %s (from the wake-up's cause, the default) or %s (from the wake-up, as runqlat)",
					view, class+"/", ViewFelt, ViewWait)
			}
			b.View = View(view)
		}
		list = rest
		if !hasView || class != "" { // "/VIEW:" alone keeps the classless target
			if msg := checkClassName(class); msg != "" {
				return Bound{}, boundErrorf(part, "%s", msg)
			}
			b.Class, b.Selected = class, false
		}
	}
	if b.Class == "" && !b.Selected {
		return Bound{}, boundErrorf(part, "no class given; write CLASS:..., e.g. inference:%s", strings.TrimSpace(list))
	}
	for text := range strings.SplitSeq(list, ",") {
		text = strings.TrimSpace(text)
		if text == "" {
			return Bound{}, boundErrorf(part, "empty clause; %s", boundSyntax)
		}
		c, msg := parseClause(text)
		if msg != "" {
			return Bound{}, boundErrorf(part, "%s", msg)
		}
		b.Clauses = append(b.Clauses, c)
	}
	return b, nil
}

// parseClause parses "STAT<=DURATION", returning what is wrong with it, if
// anything, as an error message.
func parseClause(text string) (Clause, string) {
	stat, limit, ok := strings.Cut(text, "<")
	if !ok {
		if strings.ContainsAny(text, ">=") {
			return Clause{}, fmt.Sprintf("%q: only upper limits are supported; use <= or <, e.g. p99<=200us", text)
		}
		return Clause{}, fmt.Sprintf("%q is not a limit; write STAT<=DURATION, e.g. p99<=200us or max<=5ms", text)
	}
	var c Clause
	if rest, ok := strings.CutPrefix(limit, "="); ok {
		limit = rest
	} else {
		c.Strict = true
	}
	stat, limit = strings.TrimSpace(stat), strings.TrimSpace(limit)

	var msg string
	if c.Stat, c.Quantile, msg = parseStat(stat); msg != "" {
		return Clause{}, msg
	}

	if limit == "" {
		return Clause{}, fmt.Sprintf("%q has no limit after the operator; e.g. %s<=200us", text, c.Stat)
	}
	d, err := time.ParseDuration(limit)
	switch {
	case err != nil && strings.Trim(limit, "0123456789.") == "":
		return Clause{}, fmt.Sprintf("%q has no unit (use e.g. 200us, 5ms)", limit)
	case err != nil:
		return Clause{}, fmt.Sprintf("%q is not a duration (use e.g. 200us, 5ms)", limit)
	case d < 0:
		return Clause{}, fmt.Sprintf("%q is negative; a latency limit must be 0 or more", limit)
	}
	c.Limit = d
	return c, ""
}

// parseStat returns the canonical name and the quantile of a statistic, or
// what is wrong with it.
func parseStat(stat string) (name string, q float64, msg string) {
	const valid = "use p50, p99, p99.9, ..., max or mean"
	lower := strings.ToLower(stat)
	switch lower {
	case "max", "mean":
		return lower, 0, ""
	case "":
		return "", 0, fmt.Sprintf("missing statistic before the operator (%s)", valid)
	}
	num, ok := strings.CutPrefix(lower, "p")
	if !ok {
		return "", 0, fmt.Sprintf("%q is not a statistic (%s)", stat, valid)
	}
	intPart, frac, hasDot := strings.Cut(num, ".")
	if intPart == "" || (hasDot && frac == "") || !allDigits(intPart) || !allDigits(frac) {
		return "", 0, fmt.Sprintf("%q is not a percentile (%s)", stat, valid)
	}
	intPart = strings.TrimLeft(intPart, "0")
	frac = strings.TrimRight(frac, "0")
	switch {
	case intPart == "" && frac == "":
		return "", 0, fmt.Sprintf("%q: a percentile must be above 0 (%s)", stat, valid)
	case len(intPart) > 3 || (len(intPart) == 3 && intPart > "100") || (intPart == "100" && frac != ""):
		return "", 0, fmt.Sprintf("%q: a percentile is at most 100 (%s)", stat, valid)
	}

	// The quantile is the percentile's digits with the decimal point moved
	// two places left, parsed once, so p99.9 gives exactly the float64
	// nearest to 0.999 rather than 99.9/100, which can be one bit off.
	digits, point := intPart+frac, len(intPart)-2
	var qText string
	if point <= 0 {
		qText = "0." + strings.Repeat("0", -point) + digits
	} else {
		qText = digits[:point] + "." + digits[point:]
	}
	q, err := strconv.ParseFloat(qText, 64)
	if err != nil { // unreachable: qText is digits around a point
		return "", 0, fmt.Sprintf("%q is not a percentile (%s)", stat, valid)
	}
	if intPart == "" {
		intPart = "0"
	}
	name = "p" + intPart
	if frac != "" {
		name += "." + frac
	}
	return name, q, ""
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// checkClassName applies the policy's rule for class names (1 to 15
// characters of a-z, 0-9, _ and -), so that a bound names a class the way a
// policy file does.
func checkClassName(name string) string {
	const rule = "class names are 1 to 15 characters of a-z, 0-9, _ and -"
	if name == "" {
		return "empty class name before ':'; " + rule
	}
	if len(name) > 15 {
		return fmt.Sprintf("class name %q is too long; %s", name, rule)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Sprintf("class name %q has %q; %s", name, r, rule)
		}
	}
	return ""
}

// boundError is a spec error: which part of the spec, and what is wrong.
type boundError struct {
	part, msg string
}

func boundErrorf(part, format string, args ...any) error {
	return &boundError{part: part, msg: fmt.Sprintf(format, args...)}
}

func (e *boundError) Error() string {
	return fmt.Sprintf("bound %q: %s", e.part, e.msg)
}

func (e *boundError) Unwrap() error {
	return ErrBadBound
}

// String renders the bound so that ParseBounds reads it back unchanged:
// inference:p99<=200µs,max<=5ms, or inference/wait:... for a bound on the
// wait view. A bound on the selected tasks renders without a class
// (p99<=200µs, /wait:p99<=200µs), as ParseBoundsFor reads it with a
// selection.
func (b Bound) String() string {
	parts := make([]string, len(b.Clauses))
	for i, c := range b.Clauses {
		parts[i] = c.String()
	}
	clauses := strings.Join(parts, ",")
	switch {
	case !b.Selected:
		return b.Subject() + ":" + clauses
	case b.View != "" && b.View != ViewFelt:
		return "/" + string(b.View) + ":" + clauses
	}
	return clauses
}

// Subject is what the bound checks: its class, or "selected tasks", and
// its view unless that is the default (inference, inference/wait).
func (b Bound) Subject() string {
	subject := b.Class
	if b.Selected {
		subject = "selected tasks"
	}
	if b.View != "" && b.View != ViewFelt {
		return subject + "/" + string(b.View)
	}
	return subject
}

// Covers says which tasks the bound covers, for the reports; selection
// describes the tasks the tracer's filters select (TracerConfig.Selection),
// "" for every task.
func (b Bound) Covers(selection string) string {
	switch {
	case b.Selected:
		return fmt.Sprintf("the selected tasks (%s), whatever their class", selection)
	case selection != "":
		return fmt.Sprintf("the selected tasks (%s) of class %s", selection, b.Class)
	}
	return "the tasks of class " + b.Class
}

// Check checks every clause of b against h, the histogram of b's class.
func (b Bound) Check(h *Histogram) []Verdict {
	verdicts := make([]Verdict, len(b.Clauses))
	for i, c := range b.Clauses {
		verdicts[i] = c.Check(h)
	}
	return verdicts
}

// noSamples is the reason of a clause checked against an empty histogram.
const noSamples = "no samples"

// String renders the clause as a spec writes it: p99<=200µs.
func (c Clause) String() string {
	op := "<="
	if c.Strict {
		op = "<"
	}
	return c.Stat + op + c.Limit.String()
}

// Check decides whether h meets the clause, conservatively: a clause passes
// only if no distribution of values consistent with h could break it.
//
// A percentile is known only to lie somewhere in its bucket, so it is
// taken to be the bucket's largest value (clamped to the exact maximum,
// which it cannot exceed): a p99 that is really below the limit still fails
// when its bucket reaches above it. max uses the exact maximum and mean the
// histogram's mean. A histogram with no samples fails, with the reason "no
// samples": a bound nothing was measured against has not been met.
func (c Clause) Check(h *Histogram) Verdict {
	v := Verdict{Clause: c}
	if h == nil || h.Count() == 0 {
		v.Reason = noSamples
		return v
	}

	var ns uint64
	var how string
	switch {
	case c.Stat == "max":
		ns = h.Max()
		how = "max is " + formatNanos(ns)
	case c.Stat == "mean":
		ns = uint64(math.Round(h.Mean()))
		how = "mean is " + formatNanos(ns)
	case strings.HasPrefix(c.Stat, "p") && c.Quantile > 0 && c.Quantile <= 1:
		ns = h.QuantileUpper(c.Quantile)
		lo, hi := h.Quantile(c.Quantile)
		how = fmt.Sprintf("%s is at most %s (its bucket is %s to %s, max %s)",
			c.Stat, formatNanos(ns), formatNanos(lo), formatNanos(hi), formatNanos(h.Max()))
	default:
		v.Reason = fmt.Sprintf("unknown statistic %q (quantile %v)", c.Stat, c.Quantile)
		return v
	}

	v.Measured = time.Duration(min(ns, math.MaxInt64))
	limit := uint64(max(c.Limit, 0))
	if c.Strict {
		v.Pass = ns < limit
	} else {
		v.Pass = ns <= limit
	}
	switch {
	case v.Pass:
		v.Reason = fmt.Sprintf("%s, within %s", how, c.Limit)
	case c.Strict:
		v.Reason = fmt.Sprintf("%s, not below %s", how, c.Limit)
	default:
		v.Reason = fmt.Sprintf("%s, over %s", how, c.Limit)
	}
	return v
}

// String is one line for people: "PASS p99<=200µs: p99 is at most …".
func (v Verdict) String() string {
	verdict := "FAIL"
	if v.Pass {
		verdict = "PASS"
	}
	return fmt.Sprintf("%s %s: %s", verdict, v.Clause, v.Reason)
}

// Cases turns bound verdicts into one CI case per clause (a JUnit test
// case, a GitHub annotation), in suite: a clause that failed is a failure
// with its reason, a clause of a class nothing was measured for ("no
// samples") an error, since it was checked against nothing.
func Cases(suite string, bounds []ClassVerdicts, took time.Duration) []report.Case {
	var cases []report.Case
	for _, cv := range bounds {
		subject := cv.bound().Subject()
		for _, v := range cv.Verdicts {
			c := report.Case{Suite: suite, Class: subject, Name: v.Clause.String(), Time: took, Output: v.Reason}
			switch {
			case v.Pass:
			case v.Reason == noSamples:
				c.Error = fmt.Sprintf("%s %s: no samples: the bound was checked against nothing (check the policy and the filters)", subject, v.Clause)
			default:
				c.Failure = fmt.Sprintf("%s %s failed: %s", subject, v.Clause, v.Reason)
			}
			cases = append(cases, c)
		}
	}
	return cases
}
