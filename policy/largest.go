package policy

import (
	"fmt"
	"time"
)

// Largest returns the policy that costs the BPF classifier most to
// verify: MaxClasses classes, MaxRules matchers using every match kind,
// and distinct device sets. The verifier walks the classifier's loops
// once per rule the loader writes, so a program's verified instructions
// are at their highest with this policy; tests that guard that cost load
// with it.
func Largest() *Policy {
	p := &Policy{Source: "largest policy"}
	rule := 0
	for c := range MaxClasses - 1 {
		cl := Class{Name: fmt.Sprintf("c%d", c), HighPriority: c%2 == 0, Preempt: c%2 == 0,
			Slice: DefaultSlice, Weight: DefaultWeight}
		for ; rule < MaxRules*(c+1)/(MaxClasses-1); rule++ {
			cl.Match = append(cl.Match, largestMatcher(rule))
		}
		p.Classes = append(p.Classes, cl)
	}
	// The last class is the catch-all.
	p.Classes = append(p.Classes, Class{Name: "rest", Slice: DefaultSlice, Weight: DefaultWeight})
	return p
}

// largestMatcher is matcher i of Largest: the match kinds in turn, two
// or three to a matcher where they combine.
func largestMatcher(i int) Matcher {
	switch i % 6 {
	case 1:
		return Matcher{Comm: fmt.Sprintf("rule%d", i), ProcessCommPrefix: "p"}
	case 2:
		return Matcher{ProcessComm: "p", PID: uint32(100 + i), TGID: uint32(200 + i)}
	case 3:
		return Matcher{Cgroup: "/", SchedExt: true}
	case 4:
		// A distinct minor and idle time: a device set of its own.
		return Matcher{Device: fmt.Sprintf("1:%d", i), Idle: time.Duration(i+1) * time.Second}
	case 5:
		return Matcher{DeviceProcess: "10:1-200", CommPrefix: "x"}
	}
	return Matcher{CommPrefix: fmt.Sprintf("r%d", i)}
}
