package ioctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/hotlane/hotlane/report"
)

// RunOptions say how long to measure and what to report meanwhile.
type RunOptions struct {
	// Duration of the run; 0 runs until ctx is done.
	Duration time.Duration
	// Progress, if set, receives a line every ProgressInterval (default
	// one second).
	Progress         io.Writer
	ProgressInterval time.Duration
	// OnSlow is called for each slow call as it is streamed (from one
	// goroutine, in order).
	OnSlow func(SlowCall)
	// Attached, if set, is called once the probe is attached.
	Attached func(*Probe)
	// Live, if set, is given a reader of the figures so far once the
	// probe is attached (a metrics endpoint reads it meanwhile); Run
	// calls the function it returns before it detaches the probe,
	// whatever the outcome, and read must not be called after.
	Live func(read func() (*Result, error)) (stop func())
}

// Run attaches the probe, measures until the duration is over or ctx is
// done, detaches it and returns what it measured, marked interrupted when
// ctx ended before the duration. Nothing stays attached when it returns.
func Run(ctx context.Context, cfg Config, opts RunOptions) (*Result, error) {
	if opts.Duration < 0 {
		return nil, badConfig("duration %s is negative", opts.Duration)
	}
	p, err := Attach(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if opts.Attached != nil {
		opts.Attached(p)
	}
	stopLive := func() {}
	if opts.Live != nil {
		stopLive = opts.Live(p.Snapshot)
	}
	defer stopLive()

	var slowest []SlowCall
	done := make(chan error, 1)
	go func() {
		done <- p.ReadSlow(func(s SlowCall) {
			slowest = keepSlowest(slowest, s)
			if opts.OnSlow != nil {
				opts.OnSlow(s)
			}
		})
	}()

	win := report.StartWindow(ctx, opts.Duration)
	defer win.Stop()
	var tick <-chan time.Time
	if opts.Progress != nil {
		interval := opts.ProgressInterval
		if interval <= 0 {
			interval = time.Second
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
loop:
	for {
		select {
		case <-win.Done():
			break loop
		case err := <-done:
			// The stream cannot end before Flush: the reader failed.
			if err == nil {
				err = fmt.Errorf("the slow-call stream ended early")
			}
			return nil, err
		case <-tick:
			c, err := p.Counters()
			if err != nil {
				continue
			}
			elapsed := time.Since(p.Started).Round(time.Second).String()
			if opts.Duration > 0 {
				elapsed += "/" + opts.Duration.String()
			}
			fmt.Fprintf(opts.Progress, "ioctl: %s: %d calls, %d failed, %d slow, %d lost\n",
				elapsed, c.Calls, c.Errors, c.Slow, c.Losses().Total())
		}
	}

	// Stop counting, then drain the stream, then read the tables: the
	// figures are final and agree with each other.
	stopLive()
	if err := p.Detach(); err != nil {
		return nil, fmt.Errorf("detach: %w", err)
	}
	if err := p.Flush(); err != nil {
		return nil, fmt.Errorf("flush the slow-call stream: %w", err)
	}
	if err := <-done; err != nil {
		return nil, err
	}
	res, err := p.Snapshot()
	if err != nil {
		return nil, err
	}
	res.Ended(win)
	res.Slowest = slowest
	if res.Slowest == nil && cfg.StreamSlow {
		res.Slowest = []SlowCall{}
	}
	return res, nil
}

// keepSlowest adds s to list, which holds at most MaxSlowKept calls,
// slowest first.
func keepSlowest(list []SlowCall, s SlowCall) []SlowCall {
	if len(list) == MaxSlowKept && s.Latency <= list[len(list)-1].Latency {
		return list
	}
	i, _ := slices.BinarySearchFunc(list, s, func(a, b SlowCall) int {
		// Descending by latency; equal latencies keep arrival order.
		if a.Latency > b.Latency || a.Latency == b.Latency {
			return -1
		}
		return 1
	})
	list = slices.Insert(list, i, s)
	if len(list) > MaxSlowKept {
		list = list[:MaxSlowKept]
	}
	return list
}
