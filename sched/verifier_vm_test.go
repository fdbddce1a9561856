package sched_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// verifierBudget is the share of the verifier's limit one program may
// use: a program near the limit is one kernel change or one policy away
// from "BPF program is too large".
const verifierBudget = sched.VerifierLimit / 10

// largestPolicy fills every table the classifier reads to its size limit:
// policy.MaxClasses classes, policy.MaxRules rules using every match kind,
// and the most device sets and ranges. The verifier's cost may not grow
// with what the loader writes into these tables.
func largestPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p := &policy.Policy{Source: "largest"}
	rules := 0
	for c := 0; c < policy.MaxClasses-1; c++ {
		cl := policy.Class{Name: fmt.Sprintf("c%d", c), HighPriority: c%2 == 0, Preempt: c%2 == 0,
			Slice: policy.DefaultSlice, Weight: policy.DefaultWeight}
		for ; rules < policy.MaxRules*(c+1)/(policy.MaxClasses-1); rules++ {
			m := policy.Matcher{CommPrefix: fmt.Sprintf("r%d", rules)}
			switch rules % 6 {
			case 1:
				m = policy.Matcher{Comm: fmt.Sprintf("rule%d", rules), ProcessCommPrefix: "p"}
			case 2:
				m = policy.Matcher{ProcessComm: "p", PID: uint32(100 + rules), TGID: uint32(200 + rules)}
			case 3:
				m = policy.Matcher{Cgroup: "/", SchedExt: true}
			case 4:
				// Distinct minors and idle times: one device set each
				// (five of policy.MaxDeviceSets).
				m = policy.Matcher{Device: fmt.Sprintf("1:%d", rules), Idle: time.Duration(rules+1) * time.Second}
			case 5:
				m = policy.Matcher{DeviceProcess: "10:1-200", CommPrefix: "x"}
			}
			cl.Match = append(cl.Match, m)
		}
		p.Classes = append(p.Classes, cl)
	}
	p.Classes = append(p.Classes, policy.Class{Name: "rest", Slice: policy.DefaultSlice, Weight: policy.DefaultWeight})
	return p
}

// TestGuestVerifierComplexity loads every program of the scheduler object
// for this kernel through the verifier, for this guest's CPUs and for the
// most CPUs hotlane handles, with the default policy and with the largest
// one: each program must stay within a tenth of the verifier's limit
// whatever the machine's size, since the verifier's work grows with
// whatever it cannot prove equivalent from one loop pass to the next.
// The table of each is logged; `go test ./sched -run '^TestVM$' -v`
// prints it (HOTLANE_GUEST_RUN='^TestGuestVerifierComplexity$' for this
// test alone).
func TestGuestVerifierComplexity(t *testing.T) {
	vmtest.RequireGuest(t)
	largest := largestPolicy(t)
	for _, tc := range []struct {
		name string
		p    *policy.Policy
		cpus int
	}{
		{"default policy, this guest's CPUs", policy.Default("infer"), 0},
		{fmt.Sprintf("default policy, %d CPUs", sched.MaxCPUs), policy.Default("infer"), sched.MaxCPUs},
		{fmt.Sprintf("largest policy, %d CPUs", sched.MaxCPUs), largest, sched.MaxCPUs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := tc.p.Compile("")
			if err != nil {
				t.Fatal(err)
			}
			st, err := sched.Verify(sched.Config{Table: table, CPUs: tc.cpus})
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			t.Logf("%s\n%s", st, st.Table())
			if len(st.Programs) == 0 {
				t.Fatal("no programs loaded")
			}
			for _, p := range st.Programs {
				if !p.Known {
					t.Errorf("%s: the kernel did not report its verified instructions", p.Name)
				} else if p.VerifiedInstructions > verifierBudget {
					t.Errorf("%s: %d verified instructions, over the budget of %d (a tenth of the verifier's limit)",
						p.Name, p.VerifiedInstructions, verifierBudget)
				}
			}
		})
	}
}
