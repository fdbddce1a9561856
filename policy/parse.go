package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/hotlane/hotlane/internal/infile"
	"github.com/hotlane/hotlane/internal/jsonpos"
)

// maxFileSize bounds Load: a policy is a few hundred bytes, so anything much
// bigger is the wrong file (or /dev/zero) and should not be read to the end.
const maxFileSize = 1 << 20

// Load reads and parses the policy file at path; see Parse. Only a regular
// file of at most 1 MiB is read: a FIFO or a device is refused at once.
// ctx interrupts the parsing (Ctrl-C).
func Load(ctx context.Context, path string) (*Policy, error) {
	data, err := infile.Read("policy", path, maxFileSize)
	if errors.Is(err, infile.ErrNotRegular) || errors.Is(err, infile.ErrTooLarge) {
		return nil, &Error{Msg: err.Error(), err: err}
	}
	if err != nil {
		return nil, err
	}
	return ParseContext(ctx, path, data)
}

// Parse parses and validates a JSON policy; name (usually the file name)
// prefixes error messages and becomes the policy's Source. Omitted knobs get
// their defaults. Errors are *Error and match ErrInvalidPolicy.
func Parse(name string, data []byte) (*Policy, error) {
	return ParseContext(context.Background(), name, data)
}

// ParseContext is Parse, which stops with ctx's error when ctx is done.
// Its time is linear in the text's size, and a policy with more classes
// or matchers than hotlane supports is refused at the first one too many.
func ParseContext(ctx context.Context, name string, data []byte) (*Policy, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{Source: name, Msg: `empty policy; write a JSON object such as {"classes": [{"name": "normal"}]}`}
	}
	if off, msg, ok := jsonpos.CheckSyntax(data); !ok {
		return nil, posError(name, data, off, msg)
	}
	spans, err := checkKeys(ctx, name, data)
	if err != nil {
		return nil, err
	}

	var raw rawPolicy
	dec := json.NewDecoder(bytes.NewReader(data))
	// checkKeys has already rejected unknown fields with their position;
	// this is a backstop should the two ever disagree.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			off := valueStart(data, int(te.Offset))
			e := posError(name, data, off, typeMessage(te))
			e.Class, e.Matcher = locate(spans, off)
			return nil, e
		}
		return nil, &Error{Source: name, Msg: strings.TrimPrefix(err.Error(), "json: "), err: err}
	}

	p, err := raw.policy(name)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// The raw types mirror the JSON with pointers, so that an explicit bad value
// ("weight": 0, "pid": -1) is told apart from an omitted one.
type rawPolicy struct {
	Classes []rawClass `json:"classes"`
}

type rawClass struct {
	Name         *string      `json:"name"`
	HighPriority *bool        `json:"high_priority"`
	Preempt      *bool        `json:"preempt"`
	Slice        *string      `json:"slice"`
	Weight       *int64       `json:"weight"`
	Match        []rawMatcher `json:"match"`
}

type rawMatcher struct {
	CommPrefix        *string `json:"comm_prefix"`
	Comm              *string `json:"comm"`
	ProcessCommPrefix *string `json:"process_comm_prefix"`
	ProcessComm       *string `json:"process_comm"`
	PID               *int64  `json:"pid"`
	TGID              *int64  `json:"tgid"`
	Cgroup            *string `json:"cgroup"`
	SchedExt          *bool   `json:"sched_ext"`
	Device            *string `json:"device"`
	DeviceProcess     *string `json:"device_process"`
	Idle              *string `json:"idle"`
}

// policy applies defaults and converts, rejecting explicit values that the
// Go types cannot hold or that would silently mean "unset".
func (r *rawPolicy) policy(source string) (*Policy, error) {
	p := &Policy{Source: source, Classes: make([]Class, len(r.Classes))}
	for i := range r.Classes {
		rc := &r.Classes[i]
		c := &p.Classes[i]
		c.Name = deref(rc.Name)
		c.HighPriority = deref(rc.HighPriority)
		// Left out, preempt follows high_priority: a lane task that
		// waits for a fair task's next tick at every wake-up is slower
		// than no lane at all (#42).
		c.Preempt = c.HighPriority
		if rc.Preempt != nil {
			c.Preempt = *rc.Preempt
		}
		c.Slice = DefaultSlice
		if c.HighPriority {
			c.Slice = DefaultHighPrioritySlice
		}
		if rc.Slice != nil {
			d, err := time.ParseDuration(*rc.Slice)
			if err != nil {
				return nil, p.errorf(i, -1, nil, `slice %q is not a duration; write e.g. "2ms" or "500us"`, *rc.Slice)
			}
			c.Slice = d
		}
		c.Weight = DefaultWeight
		if rc.Weight != nil {
			if w := *rc.Weight; w < MinWeight || w > MaxWeight {
				return nil, p.errorf(i, -1, nil, "weight %d is out of range; use %d to %d", w, MinWeight, MaxWeight)
			}
			c.Weight = uint32(*rc.Weight)
		}
		if len(rc.Match) > 0 {
			c.Match = make([]Matcher, len(rc.Match))
		}
		for j, rm := range rc.Match {
			m, msg := rm.matcher()
			if msg != "" {
				return nil, p.errorf(i, j, nil, "%s", msg)
			}
			c.Match[j] = m
		}
	}
	return p, nil
}

func (r rawMatcher) matcher() (Matcher, string) {
	m := Matcher{
		CommPrefix:        deref(r.CommPrefix),
		Comm:              deref(r.Comm),
		ProcessCommPrefix: deref(r.ProcessCommPrefix),
		ProcessComm:       deref(r.ProcessComm),
		Cgroup:            deref(r.Cgroup),
		SchedExt:          deref(r.SchedExt),
		Device:            deref(r.Device),
		DeviceProcess:     deref(r.DeviceProcess),
	}
	for _, s := range []struct {
		name string
		v    *string
	}{{"comm_prefix", r.CommPrefix}, {"comm", r.Comm}, {"process_comm_prefix", r.ProcessCommPrefix}, {"process_comm", r.ProcessComm}, {"cgroup", r.Cgroup},
		{"device", r.Device}, {"device_process", r.DeviceProcess}, {"idle", r.Idle}} {
		if s.v != nil && *s.v == "" {
			return m, fmt.Sprintf("%s is empty; give a name or leave the field out", s.name)
		}
	}
	for _, id := range []struct {
		name string
		v    *int64
		dst  *uint32
	}{{"pid", r.PID, &m.PID}, {"tgid", r.TGID, &m.TGID}} {
		if id.v == nil {
			continue
		}
		if *id.v <= 0 || *id.v > MaxPID {
			return m, fmt.Sprintf("%s %d is out of range; use 1 to %d", id.name, *id.v, MaxPID)
		}
		*id.dst = uint32(*id.v)
	}
	if r.SchedExt != nil && !*r.SchedExt {
		return m, `"sched_ext": false cannot be matched; leave the field out to match tasks of any scheduling policy`
	}
	if r.Idle != nil {
		d, err := time.ParseDuration(*r.Idle)
		if err != nil {
			return m, fmt.Sprintf(`idle %q is not a duration; write e.g. "30s" or "5m"`, *r.Idle)
		}
		if d <= 0 {
			return m, fmt.Sprintf(`idle %q must be positive; leave it out to match for the task's life`, *r.Idle)
		}
		m.Idle = d
	}
	return m, ""
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// MarshalJSON writes the class in the policy file format, slice as a
// duration string, so that a Policy (such as Default's) can be saved and
// parsed back. preempt is written for high-priority classes, where
// leaving it out would mean true.
func (c Class) MarshalJSON() ([]byte, error) {
	var preempt *bool
	if c.HighPriority || c.Preempt {
		preempt = &c.Preempt
	}
	return json.Marshal(struct {
		Name         string    `json:"name"`
		HighPriority bool      `json:"high_priority,omitempty"`
		Preempt      *bool     `json:"preempt,omitempty"`
		Slice        string    `json:"slice"`
		Weight       uint32    `json:"weight"`
		Match        []Matcher `json:"match,omitempty"`
	}{c.Name, c.HighPriority, preempt, c.Slice.String(), c.Weight, c.Match})
}

// UnmarshalJSON parses and validates a policy embedded in other JSON, as
// Parse does; error positions are relative to the policy's own text.
func (p *Policy) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil // the encoding/json convention
	}
	q, err := Parse(p.Source, data)
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

// jsonContext is the kind of JSON object or array being walked by checkKeys.
type jsonContext int

const (
	ctxOther jsonContext = iota // values whose type the decoder checks
	ctxPolicy
	ctxClasses
	ctxClass
	ctxMatches
	ctxMatcher
)

// keys returns the valid keys of an object in context c and what to call
// the object, or nil for objects whose keys are not checked.
func (c jsonContext) keys() ([]string, string) {
	switch c {
	case ctxPolicy:
		return []string{"classes"}, "policy"
	case ctxClass:
		return []string{"name", "high_priority", "preempt", "slice", "weight", "match"}, "class"
	case ctxMatcher:
		return matcherFields(), "matcher"
	}
	return nil, ""
}

// span is where a class or matcher object lies in the text, so that an
// error found by the decoder can name the class and matcher it is in.
type span struct {
	start, end     int
	class, matcher int // 1-based; matcher 0 for a class
}

// locate returns the innermost class/matcher span around off.
func locate(spans []span, off int) (class, matcher int) {
	for _, s := range spans { // outer objects come first
		if s.start <= off && off < s.end {
			class, matcher = s.class, s.matcher
		}
	}
	return class, matcher
}

// checkKeys walks the (syntactically valid) JSON text and rejects unknown
// and duplicate keys with their line and column. encoding/json would match
// keys case-insensitively and let a duplicate silently win; a policy is
// better off strict.
// It also returns the spans of the class and matcher objects.
func checkKeys(ctx context.Context, name string, data []byte) ([]span, error) {
	type frame struct {
		ctx            jsonContext
		object         bool
		key            string // object: the key whose value is next, if haveKey
		haveKey        bool
		next           int // array: index of the next element
		seen           map[string]int
		class, matcher int // 1-based indices in force, 0 if none
		span           int // index in spans, or -1
	}
	var stack []*frame
	var spans []span
	classes, matchers := 0, 0
	dec := json.NewDecoder(bytes.NewReader(data))
	for tokens := 0; ; tokens++ {
		if tokens%4096 == 0 && ctx.Err() != nil {
			return nil, &Error{Source: name, Msg: "parsing stopped: " + context.Cause(ctx).Error(), err: context.Cause(ctx)}
		}
		start := jsonpos.TokenStart(data, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err == io.EOF {
			return spans, nil
		}
		if err != nil { // Parse has checked the syntax already
			return nil, posError(name, data, start, "invalid JSON: "+err.Error())
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			if top.span >= 0 {
				spans[top.span].end = int(dec.InputOffset())
			}
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				parent := stack[len(stack)-1]
				parent.haveKey = false
				parent.next++
			}
			continue
		}
		if top != nil && top.object && !top.haveKey {
			key := tok.(string)
			if valid, what := top.ctx.keys(); valid != nil {
				// Positions are counted only for an error: counting
				// them for every key made parsing quadratic.
				if !contains(valid, key) {
					return nil, keyError(name, data, start, top.class, top.matcher,
						fmt.Sprintf("unknown field %q%s; valid %s fields: %s", key, jsonpos.Suggest(key, valid), what, strings.Join(valid, ", ")))
				}
				if prev, dup := top.seen[key]; dup {
					line, col := jsonpos.LineCol(data, prev)
					return nil, keyError(name, data, start, top.class, top.matcher,
						fmt.Sprintf("duplicate field %q (first at %d:%d); keep one", key, line, col))
				}
				top.seen[key] = start
			}
			top.key, top.haveKey = key, true
			continue
		}
		// tok is a value: work out what it is from where it sits.
		jc, class, matcher := ctxOther, 0, 0
		if top == nil {
			jc = ctxPolicy
		} else {
			class, matcher = top.class, top.matcher
			switch {
			case top.ctx == ctxPolicy && top.key == "classes":
				jc = ctxClasses
			case top.ctx == ctxClasses:
				jc, class = ctxClass, top.next+1
			case top.ctx == ctxClass && top.key == "match":
				jc = ctxMatches
			case top.ctx == ctxMatches:
				jc, matcher = ctxMatcher, top.next+1
			}
		}
		d, ok := tok.(json.Delim)
		if !ok { // a scalar
			if top == nil {
				return nil, nil // the decoder will say it is not an object
			}
			top.haveKey = false
			top.next++
			continue
		}
		object := d == '{'
		if object != (jc == ctxPolicy || jc == ctxClass || jc == ctxMatcher) {
			jc = ctxOther // wrong type; the decoder reports it
		}
		// Refused at the first one too many, before the rest of a
		// huge file is walked.
		switch {
		case jc == ctxClass && object:
			if classes++; classes > MaxClasses {
				return nil, keyError(name, data, start, class, 0, fmt.Sprintf("more than %d classes; at most %d are supported, merge some", MaxClasses, MaxClasses))
			}
		case jc == ctxMatcher && object:
			if matchers++; matchers > MaxRules {
				return nil, keyError(name, data, start, class, matcher, fmt.Sprintf("more than %d matchers in all; at most %d are supported, merge some (e.g. with a shorter comm_prefix)", MaxRules, MaxRules))
			}
		}
		f := &frame{ctx: jc, object: object, seen: map[string]int{}, class: class, matcher: matcher, span: -1}
		if jc == ctxClass || jc == ctxMatcher {
			f.span = len(spans)
			spans = append(spans, span{start: start, end: len(data), class: class, matcher: matcher})
		}
		stack = append(stack, f)
	}
}

// keyError is an error about what is at off, in class and matcher.
func keyError(name string, data []byte, off, class, matcher int, msg string) *Error {
	e := posError(name, data, off, msg)
	e.Class, e.Matcher = class, matcher
	return e
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// typeMessage explains a JSON value of the wrong type.
func typeMessage(te *json.UnmarshalTypeError) string {
	field := te.Field
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		field = field[i+1:]
	}
	if field == "" {
		return `a policy is a JSON object such as {"classes": [...]}, not ` + article(te.Value)
	}
	var want string
	switch {
	case field == "slice":
		want = `a duration string such as "2ms"`
	case field == "idle":
		want = `a duration string such as "30s"`
	case field == "device" || field == "device_process":
		want = `a string such as "/dev/nvidia*" or "195:*"`
	case field == "pid" || field == "tgid" || field == "weight":
		want = "a whole number"
	default:
		switch te.Type.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Bool:
			want = "true or false"
		case reflect.Slice:
			want = "a list [...]"
		default:
			want = "an object {...}"
		}
	}
	return fmt.Sprintf("%q must be %s, not %s", field, want, article(te.Value))
}

// article turns encoding/json's description of a value ("string",
// "number 1.5", "object") into a phrase.
func article(v string) string {
	switch {
	case strings.HasPrefix(v, "number "):
		return v
	case v == "object" || v == "array":
		return "an " + v
	default:
		return "a " + v
	}
}

// valueStart finds where the value ends at off (where
// json.UnmarshalTypeError.Offset points: past a literal, or past the opening
// bracket of an object or array) begins, so errors point at its first byte.
func valueStart(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	if off == 0 {
		return 0
	}
	switch c := data[off-1]; {
	case c == '{' || c == '[':
		return off - 1
	case c == '"':
		for i := off - 2; i >= 0; i-- {
			if data[i] != '"' {
				continue
			}
			bs := 0
			for j := i - 1; j >= 0 && data[j] == '\\'; j-- {
				bs++
			}
			if bs%2 == 0 {
				return i
			}
		}
		return off - 1
	default: // number, true, false
		i := off
		for i > 0 && strings.IndexByte("+-.0123456789eEtruefalsn", data[i-1]) >= 0 {
			i--
		}
		return i
	}
}

func posError(name string, data []byte, off int, msg string) *Error {
	line, col := jsonpos.LineCol(data, off)
	return &Error{Source: name, Line: line, Column: col, Msg: msg}
}
