package workloads

import (
	"os"
	"strings"
	"testing"
)

// testdata/stress-ng-metrics.yaml is what stress-ng 0.15.06 (bookworm)
// wrote with --cpu 2 --metrics-brief --yaml, stopped by SIGINT.
func TestParseStressNgOps(t *testing.T) {
	f, err := os.Open("testdata/stress-ng-metrics.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := ParseStressNgOps(f, "cpu"); err != nil || n != 3866 {
		t.Errorf("ParseStressNgOps = %d, %v; want 3866", n, err)
	}
	for text, want := range map[string]string{
		"metrics:\n    - stressor: vm\n      bogo-ops: 5\n": "no cpu stressor",
		"metrics:\n    - stressor: cpu\n":                   "no bogo-ops",
		"metrics:\n    - stressor: cpu\n      bogo-ops: x":  "not a count",
	} {
		if _, err := ParseStressNgOps(strings.NewReader(text), "cpu"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
	if got := strings.Join(StressNg{CPU: 4}.Args("/m.yaml"), " "); got != "--cpu 4 --cpu-method int64 --timeout 0 --metrics-brief --yaml /m.yaml" {
		t.Errorf("args %q", got)
	}
}
