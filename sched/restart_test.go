package sched

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	exitUnreg    = ExitInfo{Kind: 64, KindName: "SCX_EXIT_UNREG", Reason: "unregistered from user space"}
	exitHotplug  = ExitInfo{Kind: 66, KindName: "SCX_EXIT_UNREG_KERN", ExitCode: 1<<48 | 1<<32, Reason: "unregistered from the main kernel", Message: "cpu 1 going offline, exiting scheduler"}
	exitBPFError = ExitInfo{Kind: 1025, KindName: "SCX_EXIT_ERROR_BPF", Reason: "scx_bpf_error", Message: "debug: error injected after 200 enqueues"}
	exitStall    = ExitInfo{Kind: 1026, KindName: "SCX_EXIT_ERROR_STALL", Reason: "runnable task stall", Message: "kworker/0:1[42] failed to run for 5.2s"}
)

// fakeRuns returns a run function that hands out results in order and
// counts its calls, and a wait function that counts its calls.
type fakeRuns struct {
	results []fakeResult
	calls   int
	waits   int
	waitErr error
	// cancel, when set, is called by the run with this index (1-based).
	cancelAt int
	cancel   context.CancelFunc
}

type fakeResult struct {
	info ExitInfo
	err  error
}

func (f *fakeRuns) restarter(t *testing.T) restarter {
	return restarter{
		run: func(ctx context.Context, cfg Config, opts RunOptions) (ExitInfo, error) {
			f.calls++
			if f.calls > len(f.results) {
				t.Fatalf("run called %d times, only %d results scripted", f.calls, len(f.results))
			}
			if f.calls == f.cancelAt {
				f.cancel()
			}
			r := f.results[f.calls-1]
			return r.info, r.err
		},
		waitDisabled: func(ctx context.Context) error {
			f.waits++
			return f.waitErr
		},
	}
}

func TestRestartLoop(t *testing.T) {
	errLoad := errors.New("another sched_ext scheduler is running")
	for _, tc := range []struct {
		name      string
		restarts  int
		results   []fakeResult
		waitErr   error
		wantInfo  ExitInfo
		wantUsed  int
		wantErr   error
		wantCalls int
		wantLog   []string
	}{
		{
			name: "orderly exit is not restarted", restarts: 3,
			results:  []fakeResult{{info: exitUnreg}},
			wantInfo: exitUnreg, wantUsed: 0, wantCalls: 1,
		},
		{
			name: "kernel unregistration (hotplug) is not an error", restarts: 3,
			results:  []fakeResult{{info: exitHotplug}},
			wantInfo: exitHotplug, wantUsed: 0, wantCalls: 1,
		},
		{
			name: "no restarts allowed", restarts: 0,
			results:  []fakeResult{{info: exitBPFError}},
			wantInfo: exitBPFError, wantUsed: 0, wantCalls: 1,
		},
		{
			name: "error then orderly exit", restarts: 3,
			results:  []fakeResult{{info: exitStall}, {info: exitUnreg}},
			wantInfo: exitUnreg, wantUsed: 1, wantCalls: 2,
			wantLog: []string{
				"hotlane: scheduler exited with error: SCX_EXIT_ERROR_STALL (1026): runnable task stall: kworker/0:1[42] failed to run for 5.2s; restarting (1 of 3)",
			},
		},
		{
			name: "errors until the restarts run out", restarts: 2,
			results:  []fakeResult{{info: exitBPFError}, {info: exitStall}, {info: exitBPFError}},
			wantInfo: exitBPFError, wantUsed: 2, wantCalls: 3,
			wantLog: []string{
				"hotlane: scheduler exited with error: SCX_EXIT_ERROR_BPF (1025): scx_bpf_error: debug: error injected after 200 enqueues; restarting (1 of 2)",
				"hotlane: scheduler exited with error: SCX_EXIT_ERROR_STALL (1026): runnable task stall: kworker/0:1[42] failed to run for 5.2s; restarting (2 of 2)",
			},
		},
		{
			name: "first load fails", restarts: 2,
			results: []fakeResult{{err: errLoad}},
			wantErr: errLoad, wantUsed: 0, wantCalls: 1,
		},
		{
			name: "relaunch fails to load", restarts: 2,
			results: []fakeResult{{info: exitBPFError}, {err: errLoad}},
			wantErr: errLoad, wantUsed: 1, wantCalls: 2,
			wantLog: []string{
				"hotlane: scheduler exited with error: SCX_EXIT_ERROR_BPF (1025): scx_bpf_error: debug: error injected after 200 enqueues; restarting (1 of 2)",
			},
		},
		{
			name: "sched_ext never disabled", restarts: 2,
			results:  []fakeResult{{info: exitBPFError}},
			waitErr:  errors.New("sched_ext still disabling"),
			wantInfo: exitBPFError, wantUsed: 0, wantCalls: 1,
			wantLog: []string{
				"hotlane: scheduler exited with error: SCX_EXIT_ERROR_BPF (1025): scx_bpf_error: debug: error injected after 200 enqueues; restarting (1 of 2)",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRuns{results: tc.results, waitErr: tc.waitErr}
			var log strings.Builder
			info, used, err := f.restarter(t).loop(context.Background(), Config{}, RunOptions{}, tc.restarts, &log)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			case tc.waitErr != nil && (err == nil || !strings.Contains(err.Error(), tc.waitErr.Error())):
				t.Errorf("err = %v, want it to say %q", err, tc.waitErr)
			case tc.wantErr == nil && tc.waitErr == nil && err != nil:
				t.Errorf("err = %v", err)
			}
			if diff := cmp.Diff(tc.wantInfo, info); diff != "" {
				t.Errorf("exit info (-want +got):\n%s", diff)
			}
			if used != tc.wantUsed || f.calls != tc.wantCalls {
				t.Errorf("used %d restarts in %d runs, want %d in %d", used, f.calls, tc.wantUsed, tc.wantCalls)
			}
			if f.waits != len(tc.wantLog) {
				t.Errorf("waited for sched_ext to disable %d times, want once per restart (%d)", f.waits, len(tc.wantLog))
			}
			var lines []string
			if s := strings.TrimSpace(log.String()); s != "" {
				lines = strings.Split(s, "\n")
			}
			if diff := cmp.Diff(tc.wantLog, lines); diff != "" {
				t.Errorf("log (-want +got):\n%s", diff)
			}
		})
	}
}

// A stop request (Ctrl-C) ends the loop: an error exit that races with it
// is reported, not restarted.
func TestRestartStopsWhenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeRuns{results: []fakeResult{{info: exitBPFError}, {info: exitBPFError}}, cancelAt: 1, cancel: cancel}
	info, used, err := f.restarter(t).loop(ctx, Config{}, RunOptions{}, 5, nil)
	if err != nil || used != 0 || f.calls != 1 || info != exitBPFError {
		t.Errorf("got %v, %d restarts, %d runs, err %v; want the error exit, no restart", info, used, f.calls, err)
	}
}

// A stop request while waiting for the kernel to disable the old
// scheduler is not an error.
func TestRestartCanceledWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeRuns{results: []fakeResult{{info: exitBPFError}}}
	r := f.restarter(t)
	r.waitDisabled = func(ctx context.Context) error {
		f.waits++
		cancel()
		return ctx.Err()
	}
	info, used, err := r.loop(ctx, Config{}, RunOptions{}, 2, nil)
	if err != nil || used != 0 || f.calls != 1 || info != exitBPFError {
		t.Errorf("got %v, %d restarts, %d runs, err %v; want the error exit and no error", info, used, f.calls, err)
	}
}

func TestRestartRejectsNegativeCount(t *testing.T) {
	f := &fakeRuns{}
	if _, _, err := f.restarter(t).loop(context.Background(), Config{}, RunOptions{}, -1, nil); err == nil || f.calls != 0 {
		t.Errorf("restarts -1: err %v after %d runs, want an error before any run", err, f.calls)
	}
}

// The loop passes the caller's config and options to every run.
func TestRestartPassesConfig(t *testing.T) {
	cfg := Config{Partial: true, DebugErrorAfter: 200}
	calls := 0
	r := restarter{
		run: func(ctx context.Context, got Config, opts RunOptions) (ExitInfo, error) {
			calls++
			if got.Partial != cfg.Partial || got.DebugErrorAfter != cfg.DebugErrorAfter || opts.StatsInterval != 7 {
				t.Errorf("run %d got config %+v, options %+v", calls, got, opts)
			}
			return exitBPFError, nil
		},
		waitDisabled: func(context.Context) error { return nil },
	}
	if _, used, err := r.loop(context.Background(), cfg, RunOptions{StatsInterval: 7}, 1, nil); err != nil || used != 1 || calls != 2 {
		t.Errorf("used %d restarts in %d runs (err %v), want 1 in 2", used, calls, err)
	}
}

func TestWaitDisabled(t *testing.T) {
	dir := t.TempDir()
	state := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "state"), []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	state("disabled")
	if err := waitDisabled(context.Background(), dir, time.Second); err != nil {
		t.Errorf("already disabled: %v", err)
	}

	state("disabling")
	go func() {
		time.Sleep(50 * time.Millisecond)
		state("disabled")
	}()
	if err := waitDisabled(context.Background(), dir, 10*time.Second); err != nil {
		t.Errorf("disabling, then disabled: %v", err)
	}

	state("disabling")
	if err := waitDisabled(context.Background(), dir, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "still disabling") {
		t.Errorf("stuck disabling: err %v, want it to say so", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitDisabled(ctx, dir, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err %v, want context.Canceled", err)
	}

	// Without sched_ext there is nothing to wait for; the next Load says why.
	if err := waitDisabled(context.Background(), filepath.Join(dir, "absent"), time.Second); err != nil {
		t.Errorf("no sched_ext: %v", err)
	}
}

// The reason an error exit gives ends the report, below the kernel's
// dump; an orderly exit has no dump to show.
func TestExitReportEndsWithTheReason(t *testing.T) {
	stall := exitStall
	stall.Dump = "CPU 0   : nr_run=3 flags=0x1\n  SCX_EV_SELECT_CPU_FALLBACK: 0\n  SCX_EV_SUB_RESCUE: 0"
	unreg := exitUnreg
	unreg.Dump = "left over from an earlier exit"
	for _, tc := range []struct {
		info ExitInfo
		want []string
	}{
		{stall, []string{
			"hotlane: the kernel's dump at the exit:",
			"CPU 0   : nr_run=3 flags=0x1",
			"  SCX_EV_SELECT_CPU_FALLBACK: 0",
			"  SCX_EV_SUB_RESCUE: 0",
			"hotlane: scheduler exited: SCX_EXIT_ERROR_STALL (1026): runnable task stall: kworker/0:1[42] failed to run for 5.2s",
		}},
		{unreg, []string{"hotlane: scheduler exited: SCX_EXIT_UNREG (64): unregistered from user space"}},
	} {
		var b strings.Builder
		if err := tc.info.WriteReport(&b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")); diff != "" {
			t.Errorf("%s: report (-want +got):\n%s", tc.info.KindName, diff)
		}
	}
}
