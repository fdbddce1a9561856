package sched

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/errtest"
)

func TestRunRequestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  RunRequest
		want string // in the error; "" for none
	}{
		{"nothing asked", RunRequest{}, ""},
		{"a policy file", RunRequest{PolicyPath: "policy.json"}, ""},
		{"comms for the built-in policy", RunRequest{InferenceComms: []string{"infer"}}, ""},
		{"an argument left over", RunRequest{Args: []string{"now"}}, `unexpected argument "now"`},
		{"comms beside a policy file", RunRequest{PolicyPath: "policy.json", InferenceComms: []string{"infer"}},
			"--inference-comm applies to the built-in policy; put the comms in the policy file instead"},
		{"checking a policy uses neither", RunRequest{CheckPolicy: "other.json", PolicyPath: "policy.json", InferenceComms: []string{"infer"}}, ""},
		{"checking a policy takes no argument either", RunRequest{CheckPolicy: "other.json", Args: []string{"now"}}, `unexpected argument "now"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.req.Validate(); !errtest.Says(err, tt.want) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

// tiersPolicy is an example policy of four classes.
const tiersPolicy = "../policy/testdata/tiers.json"

func TestRunRequestPolicy(t *testing.T) {
	ctx := context.Background()
	p, table, err := RunRequest{InferenceComms: []string{"llm"}}.Policy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(table.Names, []string{"inference", "normal"}) || !strings.Contains(p.Classes[0].Describe(), "llm") {
		t.Errorf("classes %v, first %q; want the built-in policy with comm llm", table.Names, p.Classes[0].Describe())
	}
	if _, table, err := (RunRequest{PolicyPath: tiersPolicy}).Policy(ctx); err != nil || !slices.Equal(table.Names, []string{"realtime", "inference", "batch", "normal"}) {
		t.Errorf("Policy() of %s = %v, %v; want the file's classes", tiersPolicy, table, err)
	}
	missing := filepath.Join(t.TempDir(), "missing.json")
	if _, _, err := (RunRequest{PolicyPath: missing}).Policy(ctx); !errtest.Says(err, missing) {
		t.Errorf("Policy() of a missing file = %v, want an error naming it", err)
	}
}

func TestRunRequestCheckedPolicy(t *testing.T) {
	ctx := context.Background()
	if p, err := (RunRequest{CheckPolicy: tiersPolicy}).CheckedPolicy(ctx); err != nil || len(p.Classes) != 4 {
		t.Errorf("CheckedPolicy() = %v, %v; want the file's four classes", p, err)
	}
	// It loads, but would not run: what the check is for.
	noCatchAll := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(noCatchAll, []byte(`{"classes": [{"name": "lane", "match": [{"comm_prefix": "a"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (RunRequest{CheckPolicy: noCatchAll}).CheckedPolicy(ctx); !errtest.Says(err, "catch-all") {
		t.Errorf("CheckedPolicy() without a catch-all = %v, want an error saying it needs one", err)
	}
}

func TestRunRequestConfig(t *testing.T) {
	var progress bytes.Buffer
	req := RunRequest{Partial: true, Timeout: 3 * time.Second, Starvation: 20 * time.Millisecond, DebugErrorAfter: 7, MeasureCost: true, Progress: &progress}
	_, table, err := req.Policy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg := req.Config(table)
	if cfg.Table != table || !cfg.Partial || cfg.Timeout != 3*time.Second || cfg.Starvation != 20*time.Millisecond ||
		cfg.DebugErrorAfter != 7 || !cfg.MeasureCost || cfg.Progress != &progress {
		t.Errorf("Config() = %+v, want the request's settings", cfg)
	}
}

func TestRunRequestOptions(t *testing.T) {
	var text, json bytes.Buffer
	req := RunRequest{StatsInterval: 2 * time.Second}
	for _, tt := range []struct {
		name       string
		text, json io.Writer
		want       time.Duration
	}{
		{"text lines", &text, nil, 2 * time.Second},
		{"JSON lines", nil, &json, 2 * time.Second},
		{"both", &text, &json, 2 * time.Second},
		{"nowhere to write: no stats read", nil, nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := req.Options(tt.text, tt.json)
			if opts.StatsInterval != tt.want || opts.Text != tt.text || opts.JSON != tt.json {
				t.Errorf("stats every %s to %v and %v, want every %s to %v and %v", opts.StatsInterval, opts.Text, opts.JSON, tt.want, tt.text, tt.json)
			}
		})
	}
}

func TestRunRequestMode(t *testing.T) {
	if m := (RunRequest{Partial: true}).Mode(); m != "partial" {
		t.Errorf("partial request: mode %q", m)
	}
	if m := (RunRequest{}).Mode(); m != "full" {
		t.Errorf("full request: mode %q", m)
	}
}

func TestRunRequestRunError(t *testing.T) {
	errLoad := errors.New("sched_ext is not enabled")
	req := RunRequest{Restarts: 3}
	if err := req.RunError(errLoad, 0); err != errLoad {
		t.Errorf("RunError(err, 0) = %v, want err as it was", err)
	}
	err := req.RunError(errLoad, 2)
	if !errors.Is(err, errLoad) || err.Error() != "after 2 restarts: sched_ext is not enabled" {
		t.Errorf("RunError(err, 2) = %v, want it wrapped with the restarts used", err)
	}
}

func TestRunRequestGaveUp(t *testing.T) {
	for _, tt := range []struct {
		name     string
		restarts int
		info     ExitInfo
		used     int
		want     bool
	}{
		{"an error exit with the restarts used up", 3, exitBPFError, 3, true},
		{"an error exit with none allowed", 0, exitBPFError, 0, false},
		{"an orderly exit after restarts", 3, exitUnreg, 3, false},
		{"an error exit with restarts left (stopped meanwhile)", 3, exitStall, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := (RunRequest{Restarts: tt.restarts}).GaveUp(tt.info, tt.used); got != tt.want {
				t.Errorf("GaveUp(%s, %d) = %v, want %v", tt.info, tt.used, got, tt.want)
			}
		})
	}
}
