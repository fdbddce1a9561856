package policy

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Limits shared with bpf/include/classify.bpf.h and the scheduler's BPF code.
const (
	MaxClasses = 8  // HL_MAX_CLASSES
	MaxRules   = 32 // HL_MAX_RULES: one rule per matcher
	CommLen    = 16 // HL_COMM_LEN, the kernel's TASK_COMM_LEN
	MaxCommLen = CommLen - 1
	MaxNameLen = 15

	// MaxPID is the kernel's PID_MAX_LIMIT on 64-bit: no pid or tgid is larger.
	MaxPID = 4 * 1024 * 1024
)

// Knob ranges and defaults.
const (
	MinSlice = 100 * time.Microsecond
	MaxSlice = 100 * time.Millisecond
	// DefaultSlice is the slice of a class that does not set one. It is well
	// below sched_ext's 20ms default so that a waiting task gets a CPU within
	// a few milliseconds even without preemption.
	DefaultSlice = 5 * time.Millisecond
	// DefaultHighPrioritySlice is the default for high-priority classes: short,
	// so that tasks of the same lane take turns quickly.
	DefaultHighPrioritySlice = 2 * time.Millisecond

	MinWeight     = 1
	MaxWeight     = 10000
	DefaultWeight = 100 // as cgroup v2 cpu.weight

	// DefaultInferenceComm is the comm prefix Default uses when given none.
	DefaultInferenceComm = "infer"
	// DefaultCgroupRoot is where cgroup v2 is normally mounted.
	DefaultCgroupRoot = "/sys/fs/cgroup"
)

// Policy is an ordered list of task classes. A task belongs to the first
// class with a matching matcher; the last class has no matchers and takes
// every other task.
type Policy struct {
	Classes []Class `json:"classes"`
	// Source names where the policy came from (a file name) and prefixes
	// error messages. It is not part of the JSON.
	Source string `json:"-"`
}

// Class is one task class: which tasks belong to it and how they are scheduled.
type Class struct {
	Name string
	// HighPriority puts the class's tasks in the high-priority lane, which
	// is consumed before the fair lane.
	HighPriority bool
	// Preempt lets a waking task of the class that finds no idle CPU
	// preempt a CPU running a lower class. It requires HighPriority.
	// Parse sets it for high-priority classes whose JSON leaves it out;
	// a Class built in Go gets what it says.
	Preempt bool
	Slice   time.Duration // MinSlice..MaxSlice
	Weight  uint32        // MinWeight..MaxWeight, relative share in the fair lane
	// Match lists the matchers; a task matches the class if any matches.
	// Only the last class, the catch-all, has none.
	Match []Matcher
}

// Matcher matches a task when all of its set fields hold. Zero values are
// unset. Strings are compared as bytes against the kernel's task comm.
type Matcher struct {
	CommPrefix        string `json:"comm_prefix,omitempty"`         // the thread's comm starts with this
	Comm              string `json:"comm,omitempty"`                // the thread's comm is exactly this
	ProcessCommPrefix string `json:"process_comm_prefix,omitempty"` // the group leader's comm starts with this
	ProcessComm       string `json:"process_comm,omitempty"`        // the group leader's comm is exactly this
	PID               uint32 `json:"pid,omitempty"`                 // thread id
	TGID              uint32 `json:"tgid,omitempty"`                // process id
	// Cgroup is a cgroup v2 path relative to the cgroup2 mount, such as
	// "/inference.slice"; tasks in it or in any cgroup below it match.
	Cgroup string `json:"cgroup,omitempty"`
	// SchedExt matches tasks that chose SCHED_EXT with sched_setscheduler.
	SchedExt bool `json:"sched_ext,omitempty"`
	// Device matches a thread once it has opened a device, or issued an
	// ioctl on one: a path glob such as "/dev/nvidia*" (the device nodes
	// it matches when the policy is compiled) or character-device numbers,
	// "MAJOR:MINOR", "MAJOR:FIRST-LAST" or "MAJOR:*".
	Device string `json:"device,omitempty"`
	// DeviceProcess is Device for a whole process: every thread of a
	// process one of whose threads used the device.
	DeviceProcess string `json:"device_process,omitempty"`
	// Idle, with Device or DeviceProcess, ends the match this long after
	// the last use; 0 keeps it for the task's life.
	Idle time.Duration `json:"-"`
}

// matcherFields lists the JSON names of Matcher's fields, for error messages.
func matcherFields() []string {
	return []string{"comm_prefix", "comm", "process_comm_prefix", "process_comm", "pid", "tgid", "cgroup", "sched_ext", "device", "device_process", "idle"}
}

// MarshalJSON writes the matcher in the policy file format, idle as a
// duration string.
func (m Matcher) MarshalJSON() ([]byte, error) {
	type plain Matcher // without this method
	v := struct {
		plain
		Idle string `json:"idle,omitempty"`
	}{plain: plain(m)}
	if m.Idle > 0 {
		v.Idle = m.Idle.String()
	}
	return json.Marshal(v)
}

func (m Matcher) empty() bool { return m == Matcher{} }

// Default returns the built-in policy: a high-priority, preempting class
// "inference" for tasks whose comm starts with one of inferenceComms
// (DefaultInferenceComm if none are given), then the catch-all "normal".
// Invalid prefixes (empty, too long, too many) are reported by Validate and
// Compile.
func Default(inferenceComms ...string) *Policy {
	if len(inferenceComms) == 0 {
		inferenceComms = []string{DefaultInferenceComm}
	}
	var match []Matcher
	for _, c := range inferenceComms {
		m := Matcher{CommPrefix: c}
		if !slices.Contains(match, m) {
			match = append(match, m)
		}
	}
	return &Policy{
		Source: "default policy",
		Classes: []Class{
			{Name: "inference", HighPriority: true, Preempt: true, Slice: DefaultHighPrioritySlice, Weight: DefaultWeight, Match: match},
			{Name: "normal", Slice: DefaultSlice, Weight: DefaultWeight},
		},
	}
}

// ClassNames returns the class names in order; a class id indexes it.
func (p *Policy) ClassNames() []string {
	names := make([]string, len(p.Classes))
	for i, c := range p.Classes {
		names[i] = c.Name
	}
	return names
}

// Class returns the id (index) of the class called name.
func (p *Policy) Class(name string) (int, bool) {
	for i, c := range p.Classes {
		if c.Name == name {
			return i, true
		}
	}
	return 0, false
}

// Validate checks everything that can be checked without the filesystem and
// returns the first problem found as an *Error.
func (p *Policy) Validate() error {
	n := len(p.Classes)
	switch {
	case n == 0:
		return p.errorf(-1, -1, nil, `no classes; a policy needs at least one class, and the last one, without "match", takes every task the others do not`)
	case n > MaxClasses:
		return p.errorf(-1, -1, nil, "%d classes; at most %d are supported, merge some", n, MaxClasses)
	}
	rules := 0
	for i := range p.Classes {
		if err := p.validateClass(i); err != nil {
			return err
		}
		rules += len(p.Classes[i].Match)
	}
	if rules > MaxRules {
		return p.errorf(-1, -1, nil, "%d matchers in all; at most %d are supported, merge some (e.g. with a shorter comm_prefix)", rules, MaxRules)
	}
	return nil
}

func (p *Policy) validateClass(ci int) error {
	c := &p.Classes[ci]
	if err := checkName(c.Name); err != "" {
		return p.errorf(ci, -1, nil, "%s", err)
	}
	for j := range ci {
		if p.Classes[j].Name == c.Name {
			return p.errorf(ci, -1, nil, "duplicate class name; class %d already has it, rename one", j+1)
		}
	}
	if c.Slice < MinSlice || c.Slice > MaxSlice {
		return p.errorf(ci, -1, nil, "slice %v is out of range; use %v to %v", c.Slice, MinSlice, MaxSlice)
	}
	if c.Weight < MinWeight || c.Weight > MaxWeight {
		return p.errorf(ci, -1, nil, "weight %d is out of range; use %d to %d", c.Weight, MinWeight, MaxWeight)
	}
	if c.Preempt && !c.HighPriority {
		return p.errorf(ci, -1, nil, `preempt needs "high_priority": true; only high-priority tasks preempt`)
	}
	last := ci == len(p.Classes)-1
	switch {
	case last && len(c.Match) > 0:
		return p.errorf(ci, -1, ErrNoCatchAll, `the last class is the catch-all and must have no "match"; add a class without "match" at the end`)
	case last && c.HighPriority:
		return p.errorf(ci, -1, nil, "the catch-all class cannot be high_priority, or every task would be; give high_priority to a class with matchers")
	case !last && len(c.Match) == 0:
		return p.errorf(ci, -1, nil, `no "match", but only the last class may be the catch-all; add matchers or move the class to the end`)
	}
	for mi, m := range c.Match {
		if err := checkMatcher(m); err != "" {
			return p.errorf(ci, mi, nil, "%s", err)
		}
	}
	return nil
}

// checkName returns what is wrong with a class name, or "".
func checkName(name string) string {
	if name == "" {
		return `"name" is missing; give the class a name such as "inference"`
	}
	if len(name) > MaxNameLen {
		return fmt.Sprintf("name %q is %d characters; use at most %d", name, len(name), MaxNameLen)
	}
	for _, r := range name {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '_' || r == '-') {
			return fmt.Sprintf("name %q has %q; use only a-z, 0-9, _ and -", name, r)
		}
	}
	return ""
}

// checkMatcher returns what is wrong with a matcher, or "".
func checkMatcher(m Matcher) string {
	if m.empty() {
		// idle is not a test of its own.
		return "the matcher has no fields; give at least one of " + strings.Join(slices.DeleteFunc(matcherFields(), func(f string) bool { return f == "idle" }), ", ")
	}
	// struct hl_rule has one buffer for the thread comm and one for the
	// leader comm, so a matcher can hold an exact or a prefix test, not both.
	if m.Comm != "" && m.CommPrefix != "" {
		return `both comm and comm_prefix are set; keep one (comm is the exact name)`
	}
	if m.ProcessComm != "" && m.ProcessCommPrefix != "" {
		return `both process_comm and process_comm_prefix are set; keep one (process_comm is the exact name)`
	}
	for _, f := range []struct{ name, v string }{
		{"comm_prefix", m.CommPrefix}, {"comm", m.Comm},
		{"process_comm_prefix", m.ProcessCommPrefix}, {"process_comm", m.ProcessComm},
	} {
		if err := checkComm(f.name, f.v); err != "" {
			return err
		}
	}
	if m.PID > MaxPID {
		return fmt.Sprintf("pid %d is above the kernel's limit of %d", m.PID, MaxPID)
	}
	if m.TGID > MaxPID {
		return fmt.Sprintf("tgid %d is above the kernel's limit of %d", m.TGID, MaxPID)
	}
	if m.Cgroup != "" {
		if err := checkCgroupPath(m.Cgroup); err != "" {
			return err
		}
	}
	var msg string
	switch {
	case m.Device != "" && m.DeviceProcess != "":
		msg = `both device and device_process are set; keep one (device_process matches the whole process)`
	case m.Device != "":
		msg = checkDevice("device", m.Device)
	case m.DeviceProcess != "":
		msg = checkDevice("device_process", m.DeviceProcess)
	case m.Idle != 0:
		msg = `idle is set without device or device_process; it says when a device matcher stops matching`
	}
	if msg != "" {
		return msg
	}
	if m.Idle < 0 || (m.Idle > 0 && (m.Idle < MinIdle || m.Idle > MaxIdle)) {
		return fmt.Sprintf("idle %v is out of range; use %v to %v, or leave it out to match for the task's life", m.Idle, MinIdle, MaxIdle)
	}
	return ""
}

func checkComm(field, v string) string {
	switch {
	case v == "":
		return ""
	case len(v) > MaxCommLen:
		return fmt.Sprintf("%s %q is %d bytes; the kernel keeps only %d bytes of a task name, shorten it", field, v, len(v), MaxCommLen)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Sprintf("%s %q contains a NUL byte, which no task name has", field, v)
	}
	return ""
}

func checkCgroupPath(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf("cgroup %q must start with \"/\"; it is a path relative to the cgroup2 mount, e.g. \"/inference.slice\"", p)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Sprintf("cgroup %q contains a NUL byte", p)
	case path.Clean(p) != p:
		return fmt.Sprintf("cgroup %q is not a clean path; write it as %q", p, path.Clean(p))
	}
	return ""
}
