package main

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxPID is PID_MAX_LIMIT on 64-bit Linux: no pid is larger.
const maxPID = 4 << 20

// boundedInt is an int flag that parsing rejects outside [lo, hi], so an
// out-of-range value fails like a malformed one: one line, exit 2.
type boundedInt struct {
	p      *int
	lo, hi int
}

func (b boundedInt) String() string {
	if b.p == nil {
		return "0"
	}
	return strconv.Itoa(*b.p)
}

func (b boundedInt) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	if v < b.lo || v > b.hi {
		return fmt.Errorf("%d is out of range %d..%d", v, b.lo, b.hi)
	}
	*b.p = v
	return nil
}

// intFlag defines an int flag that accepts only lo..hi.
func intFlag(fs *flag.FlagSet, name string, value, lo, hi int, usage string) *int {
	p := new(int)
	*p = value
	fs.Var(boundedInt{p, lo, hi}, name, fmt.Sprintf("%s (`N`: %d..%d)", usage, lo, hi))
	return p
}

// boundedDuration is a duration flag that parsing rejects below lo or,
// when hi > 0, above hi; with zeroOff, 0 is accepted too, meaning "none".
type boundedDuration struct {
	p       *time.Duration
	lo, hi  time.Duration
	zeroOff bool
}

func (b boundedDuration) String() string {
	if b.p == nil {
		return "0s"
	}
	return b.p.String()
}

func (b boundedDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration; write e.g. 2s or 500ms", s)
	}
	if d < b.lo && !(b.zeroOff && d == 0) {
		if b.zeroOff {
			return fmt.Errorf("%s is below the minimum %s (0: none)", d, b.lo)
		}
		return fmt.Errorf("%s is below the minimum %s", d, b.lo)
	}
	if b.hi > 0 && d > b.hi {
		return fmt.Errorf("%s is above the maximum %s", d, b.hi)
	}
	*b.p = d
	return nil
}

// durationFlag defines a duration flag that accepts only lo..hi (hi 0: no
// maximum).
func durationFlag(fs *flag.FlagSet, name string, value, lo, hi time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	*p = value
	limits := fmt.Sprintf("at least %s", lo)
	if hi > 0 {
		limits = fmt.Sprintf("%s..%s", lo, hi)
	}
	fs.Var(boundedDuration{p: p, lo: lo, hi: hi}, name, fmt.Sprintf("%s (`duration`: %s)", usage, limits))
	return p
}

// optionalDurationFlag defines a duration flag that is off at 0 and
// otherwise at least lo: an interval too short to be useful would only
// spin a CPU.
func optionalDurationFlag(fs *flag.FlagSet, name string, lo time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	fs.Var(boundedDuration{p: p, lo: lo, zeroOff: true}, name, fmt.Sprintf("%s (`duration`: 0, or at least %s)", usage, lo))
	return p
}

// flagGiven reports whether the command line set the flag, as opposed to
// leaving its default, in either spelling: -d 2s sets --duration as much
// as --duration 2s does.
func flagGiven(fs *flag.FlagSet, name string) bool {
	names := []string{name}
	for _, s := range shortFlags() {
		if s[1] == name {
			names = append(names, s[0])
		}
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || slices.Contains(names, f.Name) })
	return given
}

// tidList is a repeatable flag of thread ids.
type tidList []uint32

func (l *tidList) String() string { return fmt.Sprint([]uint32(*l)) }

func (l *tidList) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a thread id", s)
	}
	if v < 1 || v > maxPID {
		return fmt.Errorf("%d is out of range 1..%d", v, maxPID)
	}
	*l = append(*l, uint32(v))
	return nil
}

// printFlags lists a command's flags as GNU tools do: --name for long
// names, -x for one letter (Go's flag package accepts either dash count),
// each with its usage and, when it has one, its default.
func printFlags(fs *flag.FlagSet) {
	w := fs.Output()
	shortOf := map[string]string{} // long name: its one-letter spelling
	isShort := map[string]bool{}
	for _, s := range shortFlags() {
		if short, long := fs.Lookup(s[0]), fs.Lookup(s[1]); short != nil && long != nil && short.Value == long.Value {
			shortOf[s[1]], isShort[s[0]] = s[0], true
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if isShort[f.Name] {
			return // listed with its long spelling
		}
		name, usage := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		line := "  " + dash + f.Name
		if s, ok := shortOf[f.Name]; ok {
			line = "  -" + s + ", --" + f.Name
		}
		if name != "" {
			line += " " + name
		}
		fmt.Fprintln(w, line)
		usage = strings.ReplaceAll(usage, "\n", "\n    \t")
		// A usage that states its default ("2x the CPUs") keeps its
		// words rather than this machine's number.
		if !zeroDefault(f.DefValue) && !strings.Contains(usage, "(default") {
			usage += fmt.Sprintf(" (default %s)", quoteDefault(f))
		}
		fmt.Fprintf(w, "    \t%s\n", usage)
	})
}

func zeroDefault(v string) bool {
	switch v {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// quoteDefault quotes a default that is text rather than a number, a
// duration or a truth value, as flag.PrintDefaults does for strings.
func quoteDefault(f *flag.Flag) string {
	v := f.DefValue
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return v
	}
	if _, err := time.ParseDuration(v); err == nil {
		return v
	}
	if _, err := strconv.ParseBool(v); err == nil {
		return v
	}
	return strconv.Quote(v)
}

// shortFlags are the one-letter spellings hotlane accepts, as {short,
// long}: each stands for the same long flag, with the same meaning, on
// every command that has that flag (bcc's tools spell them so too).
func shortFlags() [][2]string {
	return [][2]string{{"p", "pid"}, {"d", "duration"}}
}

// addShortFlags gives fs the one-letter spelling of each of its long flags
// that has one.
func addShortFlags(fs *flag.FlagSet) {
	for _, s := range shortFlags() {
		if long := fs.Lookup(s[1]); long != nil && fs.Lookup(s[0]) == nil {
			fs.Var(long.Value, s[0], "short for --"+s[1])
		}
	}
}
