package sched

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/hotlane/hotlane/loader"
)

// disabledWait bounds how long a restart waits for the kernel to finish
// disabling the scheduler that ended before loading it again.
const disabledWait = 10 * time.Second

// RunWithRestarts is Run, relaunching the scheduler when it ends with an
// error exit (ExitInfo.IsError: scx_bpf_error, a watchdog stall, …) at most
// restarts times. Each relaunch is announced on log (which may be nil) as
//
//	hotlane: scheduler exited with error: <exit info>; restarting (1 of 3)
//
// It returns the exit information of the last run and how many restarts
// were used. An orderly end (ctx done, sysrq-S, kernel unregistration such
// as CPU hotplug) is never restarted, nor is a failure to load: that is
// returned as the error, with the restarts used until then.
func RunWithRestarts(ctx context.Context, cfg Config, opts RunOptions, restarts int, log io.Writer) (ExitInfo, int, error) {
	wait := func(ctx context.Context) error { return waitDisabled(ctx, loader.SchedExtSysfs, disabledWait) }
	return restarter{run: Run, waitDisabled: wait}.loop(ctx, cfg, opts, restarts, log)
}

// restarter is the restart loop with the kernel-facing parts injectable,
// so the loop itself is tested without sched_ext.
type restarter struct {
	run          func(context.Context, Config, RunOptions) (ExitInfo, error)
	waitDisabled func(context.Context) error
}

func (r restarter) loop(ctx context.Context, cfg Config, opts RunOptions, restarts int, log io.Writer) (ExitInfo, int, error) {
	if restarts < 0 {
		return ExitInfo{}, 0, fmt.Errorf("restarts %d: must be 0 or more", restarts)
	}
	if log == nil {
		log = io.Discard
	}
	if cfg.BTF == nil {
		// Parsed once for every restart.
		cfg.BTF = btf.NewCache()
	}
	for used := 0; ; used++ {
		info, err := r.run(ctx, cfg, opts)
		if err != nil {
			return info, used, err
		}
		if !info.IsError() || used >= restarts || ctx.Err() != nil {
			return info, used, nil
		}
		fmt.Fprintf(log, "hotlane: scheduler exited with error: %s; restarting (%d of %d)\n", info, used+1, restarts)
		if err := r.waitDisabled(ctx); err != nil {
			if ctx.Err() != nil {
				// Stopped while waiting: the last exit stands.
				return info, used, nil
			}
			return info, used, fmt.Errorf("restart: %w", err)
		}
	}
}

// waitDisabled waits until the sched_ext sysfs directory dir says the
// kernel has finished disabling the previous scheduler, so the next Load
// does not find it still "disabling". Closing the struct_ops link already
// waits for the kernel's disable work; this guards the restart against any
// window left after it.
func waitDisabled(ctx context.Context, dir string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := loader.ReadSchedExtStatus(dir)
		if err != nil {
			return err
		}
		if !st.Present || st.State == "disabled" {
			return nil // without sched_ext the next Load says so
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("sched_ext still %s %s after the scheduler ended", st.State, within)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
