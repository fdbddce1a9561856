package loader

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVerifierExcerptEndsWithTheReason(t *testing.T) {
	log := []string{
		"0: R1=ctx() R10=fp0",
		"; for (cpu = 0; cpu < nr_cpus; cpu++) @ sched.bpf.c:312",
		"BPF program is too large. Processed 1000001 insn",
		"verification time 2345678 usec",
		"stack depth 64+0",
		"processed 1000001 insns (limit 1000000) max_states_per_insn 4 total_states 12345 peak_states 999 mark_read 12",
		"",
	}
	for _, tc := range []struct {
		n    int
		want []string
	}{
		{1, []string{"BPF program is too large. Processed 1000001 insn"}},
		{2, log[1:3]},
		{10, log[:3]},
	} {
		if diff := cmp.Diff(tc.want, VerifierExcerpt(log, tc.n)); diff != "" {
			t.Errorf("VerifierExcerpt(log, %d) (-want +got):\n%s", tc.n, diff)
		}
	}
	if got := LastVerifierLine(log); got != log[2] {
		t.Errorf("LastVerifierLine = %q, want %q", got, log[2])
	}
	if got := LastVerifierLine([]string{"processed 3 insns", ""}); got != "(no verifier log)" {
		t.Errorf("LastVerifierLine of statistics only = %q", got)
	}
}
