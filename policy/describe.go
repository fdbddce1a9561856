package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Describe says in one line what the scheduler does with the class's tasks
// and which tasks they are, for people checking a policy before they load
// it and for the scheduler's start-up lines:
//
//	inference: high priority, preempts lower classes, 2 ms slice, matched by: comm prefix "infer" or device 195:* (thread)
//	normal: fair queue, weight 100, 5 ms slice, matched by: every task no other class takes
//
// It says what the knobs come to after defaults, so that a knob left out
// reads the same as one written. A task matches the class when any of
// its matchers does ("or") and a matcher when all of its fields hold
// ("and").
func (c Class) Describe() string {
	var parts []string
	switch {
	case c.HighPriority && c.Preempt:
		parts = append(parts, "high priority", "preempts lower classes")
	case c.HighPriority:
		parts = append(parts, "high priority", "preempts only fair tasks that have run their minimum slice (else waits for a free CPU or a fair task's next tick)")
	default:
		parts = append(parts, "fair queue", fmt.Sprintf("weight %d", c.Weight))
	}
	parts = append(parts, sliceText(c.Slice)+" slice")
	matched := "every task no other class takes"
	if len(c.Match) > 0 {
		ms := make([]string, len(c.Match))
		for i, m := range c.Match {
			ms[i] = m.describe()
		}
		matched = strings.Join(ms, " or ")
	}
	return c.Name + ": " + strings.Join(parts, ", ") + ", matched by: " + matched
}

// describe renders a matcher as its fields, all of which must hold.
func (m Matcher) describe() string {
	var fields []string
	for _, f := range []struct{ name, v string }{
		{"comm prefix", m.CommPrefix}, {"comm", m.Comm},
		{"process comm prefix", m.ProcessCommPrefix}, {"process comm", m.ProcessComm},
	} {
		if f.v != "" {
			fields = append(fields, fmt.Sprintf("%s %q", f.name, f.v))
		}
	}
	if m.PID != 0 {
		fields = append(fields, fmt.Sprintf("pid %d (thread)", m.PID))
	}
	if m.TGID != 0 {
		fields = append(fields, fmt.Sprintf("tgid %d (process)", m.TGID))
	}
	if m.Cgroup != "" {
		fields = append(fields, fmt.Sprintf("cgroup %s (subtree)", m.Cgroup))
	}
	if m.SchedExt {
		fields = append(fields, "chose SCHED_EXT")
	}
	if dev, field, _ := m.device(); dev != "" {
		scope := "thread"
		if field == "device_process" {
			scope = "process"
		}
		if m.Idle > 0 {
			scope += ", until idle " + m.Idle.String()
		}
		fields = append(fields, fmt.Sprintf("device %s (%s)", dev, scope))
	}
	return strings.Join(fields, " and ")
}

// sliceText writes a slice in the unit people think of it in: "2 ms",
// "500 µs".
func sliceText(d time.Duration) string {
	unit, name := time.Millisecond, "ms"
	if d < time.Millisecond {
		unit, name = time.Microsecond, "µs"
	}
	return strconv.FormatFloat(float64(d)/float64(unit), 'f', -1, 64) + " " + name
}
