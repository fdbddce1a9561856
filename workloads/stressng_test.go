package workloads

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/stress-ng-metrics.yaml is what stress-ng 0.15.06 (bookworm)
// wrote with --cpu 2 --metrics-brief --yaml, stopped by SIGINT;
// stress-ng-wakers.yaml the same with --cpu 1 --switch 1 --futex 1 --pipe
// 1, where stress-ng left the switch and pipe stressors' wall-clock time
// at 0 (so the bench takes the run's own).
func TestParseStressNgOps(t *testing.T) {
	for file, want := range map[string]map[string]uint64{
		"testdata/stress-ng-metrics.yaml": {"cpu": 3866},
		"testdata/stress-ng-wakers.yaml":  {"cpu": 787, "switch": 167131, "futex": 105931, "pipe": 700489},
	} {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseStressNgOps(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: bogo ops (-want +got):\n%s", file, diff)
		}
	}
	if _, err := ParseStressNgOps(strings.NewReader("metrics:\n    - stressor: cpu\n      bogo-ops: x")); err == nil || !strings.Contains(err.Error(), "not a count") {
		t.Errorf("a bogo-ops that is not a number: %v", err)
	}
	// A stressor whose workers never ran is left out of the metrics.
	ops, _ := ParseStressNgOps(strings.NewReader("metrics:\n    - stressor: vm\n      bogo-ops: 5\n"))
	if _, err := stressorOps(ops, "cpu"); !errors.Is(err, ErrNoWork) || !strings.Contains(err.Error(), "no cpu stressor") {
		t.Errorf("missing stressor: %v", err)
	}
}

func TestStressNgArgs(t *testing.T) {
	for _, tc := range []struct {
		s    StressNg
		want string
	}{
		{StressNg{CPU: 4}, "--cpu 4 --cpu-method int64 --timeout 0 --metrics-brief --yaml /m.yaml"},
		{StressNg{CPU: 1, Method: "fft", Futex: 2}, "--cpu 1 --cpu-method fft --futex 2 --timeout 0 --metrics-brief --yaml /m.yaml"},
		{StressNg{Switch: 1, Pipe: 3}, "--switch 1 --pipe 3 --timeout 0 --metrics-brief --yaml /m.yaml"},
	} {
		if got := strings.Join(tc.s.Args("/m.yaml"), " "); got != tc.want {
			t.Errorf("%+v: args %q, want %q", tc.s, got, tc.want)
		}
	}
	if err := (StressNg{}).validate(); err == nil {
		t.Error("stress-ng without workers validated")
	}
}
