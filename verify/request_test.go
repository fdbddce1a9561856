package verify

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/errtest"
)

func TestRequestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  Request
		want string // in the error; "" for none
	}{
		{"nothing asked", Request{}, ""},
		{"a command on violations", Request{OnViolation: true, Args: []string{"sh", "-c", "true"}}, ""},
		{"on violation without a command", Request{OnViolation: true}, "--on-violation needs the command after --"},
		{"a command not found", Request{OnViolation: true, Args: []string{"/nonexistent/logger"}}, "--on-violation: exec: \"/nonexistent/logger\""},
		{"a command without --on-violation", Request{Args: []string{"logger"}}, `unexpected argument "logger"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if !errtest.Says(err, tt.want) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestRequestOptions(t *testing.T) {
	ctx := context.Background()
	log := io.Discard
	for _, tt := range []struct {
		name  string
		req   Request
		check func(t *testing.T, o Options)
	}{
		{"the built-in policy with the comms given", Request{InferenceComms: []string{"llm"}}, func(t *testing.T, o Options) {
			if !slices.Equal(o.Tracer.Table.Names, []string{"inference", "normal"}) {
				t.Errorf("classes %v, want the built-in policy's", o.Tracer.Table.Names)
			}
		}},
		{"served without a duration given runs until stopped", Request{Duration: 10 * time.Second, Served: true, Log: log}, func(t *testing.T, o Options) {
			if o.Duration != 0 || o.ProgressInterval != time.Minute {
				t.Errorf("duration %s, progress every %s; want 0 and a minute", o.Duration, o.ProgressInterval)
			}
		}},
		{"served with a duration given keeps it", Request{Duration: 20 * time.Second, DurationGiven: true, Served: true, Log: log}, func(t *testing.T, o Options) {
			if o.Duration != 20*time.Second || o.ProgressInterval != 2*time.Second {
				t.Errorf("duration %s, progress every %s; want 20s and 2s", o.Duration, o.ProgressInterval)
			}
		}},
		{"progress at least a second apart", Request{Duration: 5 * time.Second, Log: log, ViolationLinesPerSecond: 7}, func(t *testing.T, o Options) {
			if o.Progress != log || o.Violations != log || o.ProgressInterval != time.Second || o.ViolationLinesPerSecond != 7 {
				t.Errorf("progress %v every %s, violations %v at %d a second", o.Progress, o.ProgressInterval, o.Violations, o.ViolationLinesPerSecond)
			}
		}},
		{"quiet: no progress, no violation lines", Request{Duration: 5 * time.Second}, func(t *testing.T, o Options) {
			if o.Progress != nil || o.Violations != nil {
				t.Errorf("progress %v, violations %v; want neither", o.Progress, o.Violations)
			}
		}},
		{"intervals only with an interval", Request{Intervals: log}, func(t *testing.T, o Options) {
			if o.Intervals != nil {
				t.Errorf("intervals written to %v without an interval", o.Intervals)
			}
		}},
		{"a bound explains its violations", Request{Bound: "inference:max<=5ms"}, func(t *testing.T, o Options) {
			if len(o.Bounds) != 1 || o.Bounds[0].Class != "inference" || !o.Tracer.Explain {
				t.Errorf("bounds %+v, explain %v; want inference's, explained", o.Bounds, o.Tracer.Explain)
			}
		}},
		{"no explanations when asked for none", Request{Bound: "inference:max<=5ms", NoExplain: true}, func(t *testing.T, o Options) {
			if o.Tracer.Explain {
				t.Error("explain on with NoExplain")
			}
		}},
		{"no bound, nothing to explain", Request{}, func(t *testing.T, o Options) {
			if o.Tracer.Explain {
				t.Error("explain on without a bound")
			}
		}},
		{"a classless bound covers the selected tasks", Request{Bound: "max<=1ms", PID: 1}, func(t *testing.T, o Options) {
			if len(o.Bounds) != 1 || !o.Bounds[0].Selected || o.Tracer.FilterTGID != 1 {
				t.Errorf("bounds %+v, tgid %d; want one on pid 1", o.Bounds, o.Tracer.FilterTGID)
			}
		}},
		{"the command only with --on-violation", Request{Bound: "max<=1ms", Args: []string{"logger"}}, func(t *testing.T, o Options) {
			if o.OnViolation != nil {
				t.Errorf("runs %v on violations without --on-violation", o.OnViolation)
			}
		}},
		{"per-task histograms with a top", Request{TopTasks: 3, MaxTasks: 64}, func(t *testing.T, o Options) {
			if !o.Tracer.PerTask || o.Tracer.MaxTasks != 64 {
				t.Errorf("per task %v for %d tasks; want on, 64", o.Tracer.PerTask, o.Tracer.MaxTasks)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := tt.req.Options(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, o)
		})
	}
}

func TestRequestOptionsRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		req  Request
		want string
	}{
		{"acting on violations without a bound", Request{ViolationFlags: []string{"plot", "trace"}}, "--plot needs --bound: a violation is a wait over it"},
		{"a bad bound", Request{Bound: "inference:p99<=abc"}, `"abc" is not a duration`},
		{"a missing policy", Request{PolicyPath: filepath.Join(t.TempDir(), "none.json")}, "none.json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.req.Options(ctx); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Options() = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestRequestClasslessNote(t *testing.T) {
	for _, tt := range []struct {
		req  Request
		want string
	}{
		{Request{Bound: "inference:max<=1ms"}, ""},
		{Request{Bound: "max<=1ms"}, "the bound's clauses without CLASS: check the tasks of class inference (the policy's first)"},
		{Request{Bound: "/wait:max<=1ms", Comm: "llm"}, `the bound's clauses without CLASS: check the selected tasks (comm prefix "llm"), whatever their class`},
	} {
		o, err := tt.req.Options(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := tt.req.ClasslessNote(o); got != tt.want {
			t.Errorf("bound %q: note %q, want %q", tt.req.Bound, got, tt.want)
		}
	}
}

func TestRequestCheckTargets(t *testing.T) {
	self := uint32(os.Getpid())
	tooMany := slices.Repeat([]uint32{self}, MaxFilterTIDs+1)
	for _, tt := range []struct {
		req  Request
		want string
	}{
		{Request{}, ""},
		{Request{PID: os.Getpid(), TIDs: []uint32{self}}, ""},
		{Request{PID: 4000000}, "--pid 4000000: no such process"},
		{Request{TIDs: []uint32{self, 4000000}}, "--tid 4000000: no such thread"},
		{Request{TIDs: tooMany}, "at most"},
	} {
		err := tt.req.CheckTargets()
		if !errtest.Says(err, tt.want) {
			t.Errorf("CheckTargets(pid %d, tids %v) = %v, want %q", tt.req.PID, tt.req.TIDs, err, tt.want)
		}
	}
}

func TestRequestPreallocNote(t *testing.T) {
	for _, tt := range []struct {
		req  Request
		want string
	}{
		{Request{TopTasks: 0, MaxTasks: 65536}, ""},
		{Request{TopTasks: 10, MaxTasks: 1024}, ""},
		{Request{TopTasks: 10, MaxTasks: 65536}, "--max-tasks 65536 preallocates about"},
	} {
		note, err := tt.req.PreallocNote()
		if err != nil {
			t.Fatal(err)
		}
		if tt.want == "" && note != "" || !strings.Contains(note, tt.want) {
			t.Errorf("top %d, max tasks %d: note %q, want %q", tt.req.TopTasks, tt.req.MaxTasks, note, tt.want)
		}
	}
}

func TestResultUnchecked(t *testing.T) {
	for _, tt := range []struct {
		name string
		res  Result
		want string
	}{
		{"measured", Result{}, ""},
		{"a class without samples", Result{Unmeasured: []string{"inference", "batch"}}, "no task of class inference, batch waited for a CPU in 2s"},
		{"selected tasks without samples", Result{UnmeasuredSelection: "pid 7"}, "none of the selected tasks (pid 7) waited for a CPU in 2s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.res.Unchecked(2 * time.Second)
			if !errtest.Says(err, tt.want) {
				t.Errorf("Unchecked() = %v, want %q", err, tt.want)
			}
			// Cut short, the run checked nothing yet: no mistake.
			tt.res.Interrupted = true
			if err := tt.res.Unchecked(2 * time.Second); err != nil {
				t.Errorf("interrupted: Unchecked() = %v, want nil", err)
			}
		})
	}
}
