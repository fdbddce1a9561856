package sched

import (
	"context"
	"fmt"
	"io"
	"time"
)

// RunOptions say what Run reports while the scheduler runs.
type RunOptions struct {
	// StatsInterval between stats lines; 0 disables them.
	StatsInterval time.Duration
	// Text receives one stats line per interval; JSON one JSON object per
	// interval. Either may be nil.
	Text, JSON io.Writer
	// Started is called once the scheduler is enabled; Stopping just
	// before it is unloaded, while it can still be read (Cost).
	Started, Stopping func(*Scheduler)
}

// exitPoll is how often Run checks whether the kernel ended the scheduler.
const exitPoll = 50 * time.Millisecond

// Run loads and enables the scheduler, reports stats until ctx is done or
// the kernel ends the scheduler, then unloads it and returns why it ended.
// An error exit (scx_bpf_error, watchdog stall) is returned as the
// ExitInfo with IsError true and a nil error: the run itself worked.
func Run(ctx context.Context, cfg Config, opts RunOptions) (ExitInfo, error) {
	s, err := Load(cfg)
	if err != nil {
		return ExitInfo{}, err
	}
	if opts.Started != nil {
		opts.Started(s)
	}
	poll := time.NewTicker(exitPoll)
	defer poll.Stop()
	var statsC <-chan time.Time
	if opts.StatsInterval > 0 {
		t := time.NewTicker(opts.StatsInterval)
		defer t.Stop()
		statsC = t.C
	}
	stop := func() (ExitInfo, error) {
		if opts.Stopping != nil {
			opts.Stopping(s)
		}
		return s.Close()
	}
	prev, err := s.Stats()
	if err != nil {
		s.Close()
		return ExitInfo{}, err
	}
	for {
		select {
		case <-ctx.Done():
			return stop()
		case <-poll.C:
			if _, done, err := s.Exited(); err != nil || done {
				info, cerr := stop()
				if err == nil {
					err = cerr
				}
				return info, err
			}
		case <-statsC:
			cur, err := s.Stats()
			if err != nil {
				s.Close()
				return ExitInfo{}, err
			}
			d := cur.Sub(prev)
			prev = cur
			if opts.Text != nil {
				d.WriteLine(opts.Text)
			}
			if opts.JSON != nil {
				if err := d.WriteJSON(opts.JSON); err != nil {
					s.Close()
					return ExitInfo{}, fmt.Errorf("write stats: %w", err)
				}
			}
		}
	}
}
