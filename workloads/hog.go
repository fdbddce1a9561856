package workloads

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Hogs are CPU-bound background threads that never sleep. Each counts the
// work it completes, so background throughput can be compared between
// schedulers.
type Hogs struct {
	Comm    string
	Threads int
}

// Run spins the threads until ctx is done and returns the work done.
func (h Hogs) Run(ctx context.Context) (uint64, error) {
	var total atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, h.Threads)
	for range h.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := lockThread(h.Comm); err != nil {
				errs <- err
				return
			}
			for ctx.Err() == nil {
				n := spinCPU(time.Millisecond)
				total.Add(n)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return total.Load(), <-errs
}
