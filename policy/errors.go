package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors for errors.Is. Every error from Parse, Load's parsing step,
// Validate and Compile matches ErrInvalidPolicy; some also match a more
// specific sentinel.
var (
	// ErrInvalidPolicy: the policy cannot be used as written.
	ErrInvalidPolicy = errors.New("invalid policy")
	// ErrNoCatchAll: the last class has matchers, so some tasks would have
	// no class.
	ErrNoCatchAll = errors.New("last class is not a catch-all")
	// ErrCgroupNotFound: a cgroup matcher names a cgroup that does not
	// exist under the cgroup root given to Compile.
	ErrCgroupNotFound = errors.New("cgroup not found")
	// ErrDeviceNotFound: a device matcher's glob matches no device node.
	ErrDeviceNotFound = errors.New("device not found")
)

// Error says what is wrong with a policy and where. Its message is one line:
//
//	policy.json:7:10: class 1 matcher 1: unknown field "comm_prefx"; ...
//	policy.json: class "inference" matcher 2: cgroup "/nope" does not exist under /sys/fs/cgroup
type Error struct {
	Source string // the name given to Parse or the path given to Load; "" if none
	// Line and Column (1-based, columns count characters) locate the
	// culprit in the JSON text; 0 when the error concerns a value rather
	// than a place in the text (validation, cgroup resolution).
	Line, Column int
	Class        int    // 1-based index of the class concerned; 0 if none
	ClassName    string // its name, when it has one
	Matcher      int    // 1-based index in the class's "match" list; 0 if none
	Msg          string // what is wrong and what to do

	kind error // a specific sentinel such as ErrNoCatchAll, or nil
	err  error // the underlying cause, e.g. from os.Stat, or nil
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Line > 0 && e.Source != "":
		fmt.Fprintf(&b, "%s:%d:%d: ", e.Source, e.Line, e.Column)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d:%d: ", e.Line, e.Column)
	case e.Source != "":
		b.WriteString(e.Source + ": ")
	}
	switch {
	case e.ClassName != "":
		fmt.Fprintf(&b, "class %q", e.ClassName)
	case e.Class > 0:
		fmt.Fprintf(&b, "class %d", e.Class)
	}
	if e.Class > 0 || e.ClassName != "" {
		if e.Matcher > 0 {
			fmt.Fprintf(&b, " matcher %d", e.Matcher)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap lets errors.Is and errors.As see ErrInvalidPolicy, the specific
// sentinel and the underlying cause.
func (e *Error) Unwrap() []error {
	errs := []error{ErrInvalidPolicy}
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.err != nil {
		errs = append(errs, e.err)
	}
	return errs
}

// errorf builds an Error about class ci (0-based, -1 for none) and matcher mi
// (0-based, -1 for none) of p.
func (p *Policy) errorf(ci, mi int, kind error, format string, args ...any) *Error {
	e := &Error{Source: p.Source, kind: kind, Msg: fmt.Sprintf(format, args...)}
	if ci >= 0 {
		e.Class = ci + 1
		if ci < len(p.Classes) {
			e.ClassName = p.Classes[ci].Name
		}
		if mi >= 0 {
			e.Matcher = mi + 1
		}
	}
	return e
}
