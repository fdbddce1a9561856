package dma

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hotlane/hotlane/report"
)

// RunOptions say how long to run and what to print meanwhile.
type RunOptions struct {
	// Duration stops the run after this long; 0 runs until ctx is done.
	Duration time.Duration
	// Progress, if not nil, gets one line every Interval (default 2s).
	Progress io.Writer
	Interval time.Duration
	// Started, if not nil, is called once the probe is attached.
	Started func(*Probe)
	// Live, if set, is given a reader of the figures so far once the
	// probe is attached (a metrics endpoint reads it meanwhile); Run
	// calls the function it returns before it closes the probe, whatever
	// the outcome, and read must not be called after.
	Live func(read func() (*Result, error)) (stop func())
}

// Run starts the probe, prints progress until the duration is over or ctx
// is done (Ctrl-C), and returns the final counters. Stopping early through
// ctx is not an error; the result says it was interrupted.
func Run(ctx context.Context, opts Options, ro RunOptions) (*Result, error) {
	pr, err := Start(opts)
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	if ro.Started != nil {
		ro.Started(pr)
	}
	stopLive := func() {}
	if ro.Live != nil {
		stopLive = ro.Live(pr.Snapshot)
	}
	defer stopLive()
	win := report.StartWindow(ctx, ro.Duration)
	defer win.Stop()
	interval := ro.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last *Result
	for {
		select {
		case <-win.Done():
			stopLive()
			res, err := pr.Snapshot()
			if err != nil {
				return nil, err
			}
			res.Ended(win)
			if err := pr.Close(); err != nil {
				return nil, fmt.Errorf("detach the DMA probe: %w", err)
			}
			return res, nil
		case <-tick.C:
			if ro.Progress == nil {
				continue
			}
			res, err := pr.Snapshot()
			if err != nil {
				return nil, err
			}
			fmt.Fprintln(ro.Progress, ProgressLine(last, res))
			last = res
		}
	}
}

// ProgressLine is one line of progress: totals so far and the rate since
// the previous snapshot (nil for the first).
func ProgressLine(prev, cur *Result) string {
	t := cur.Total
	var dMaps, dBytes uint64
	dt := cur.Elapsed
	if prev != nil {
		dMaps = t.Maps - prev.Total.Maps
		dBytes = t.BytesMapped - prev.Total.BytesMapped
		dt = cur.Elapsed - prev.Elapsed
	} else {
		dMaps, dBytes = t.Maps, t.BytesMapped
	}
	mapsPerSec, mbPerSec := 0.0, 0.0
	if dt > 0 {
		mapsPerSec = float64(dMaps) / dt.Seconds()
		mbPerSec = float64(dBytes) / dt.Seconds() / 1e6
	}
	devices := "devices"
	if len(cur.Devices) == 1 {
		devices = "device"
	}
	return fmt.Sprintf("dma %6s: %d maps (%.0f/s), %d unmaps, %d allocs, %s mapped (%.2f MB/s), %d errors, %d %s, %d lost",
		cur.Elapsed.Round(time.Second), t.Maps, mapsPerSec, t.Unmaps, t.Allocs, Bytes(t.BytesMapped), mbPerSec,
		t.Errors(), len(cur.Devices), devices, cur.Losses.Total())
}
