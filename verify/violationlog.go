package verify

import (
	"context"
	"sync"
)

// ViolationLog keeps the worst violations of the tracers it follows, one
// after another (a bench's rounds of one variant), for a trace file: what
// a caller that attaches the tracer itself uses where Run is not.
type ViolationLog struct {
	mu    sync.Mutex
	worst worstViolations
}

// WatchBounds sets cfg up to stream and explain the waits over bounds, as
// Run does: each class's threshold is its bound's tightest limit.
func WatchBounds(cfg *TracerConfig, bounds []Bound) {
	if len(bounds) == 0 || cfg.Table == nil {
		return
	}
	cfg.Thresholds, cfg.ThresholdViews = Thresholds(bounds, cfg.Table.Names)
	cfg.Explain = true
}

// Follow keeps tr's violations, attached with cfg, until the function it
// returns is called or tr is closed; the function then returns once the
// reading has ended. Stopping tr (Tracer.Stop) ends the stream, and what
// it held is read by the time a caller has taken its snapshot.
func (l *ViolationLog) Follow(tr *Tracer, cfg TracerConfig) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- tr.ReadViolations(ctx, func(v Violation) {
			v.Bound, v.View = cfg.Thresholds[v.Class], orFelt(cfg.ThresholdViews[v.Class])
			l.mu.Lock()
			defer l.mu.Unlock()
			l.worst.n = KeptViolations
			l.worst.add(v)
		})
	}()
	return sync.OnceValue(func() error {
		cancel()
		return <-done
	})
}

// Worst returns the violations kept, the worst first.
func (l *ViolationLog) Worst() []Violation {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.worst.n = KeptViolations
	return append([]Violation(nil), l.worst.trim()...)
}

// WriteTraceFile writes the trace of the max worst violations kept (0:
// DefaultTraceViolations) to path, as WriteTraceFile does; without a
// violation it writes nothing and returns ErrNoViolation.
func (l *ViolationLog) WriteTraceFile(path string, max int) error {
	worst := l.Worst()
	if len(worst) == 0 {
		return ErrNoViolation
	}
	return WriteTraceFile(path, worst, max)
}
