package workloads

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Messaging runs pairs of threads that bounce a byte over a pair of pipes,
// as hackbench does: each round trip is two wake-ups, so it measures how
// quickly a scheduler hands the CPU to a task that was just woken.
type Messaging struct {
	Comm  string
	Pairs int
}

// Run bounces messages until ctx is done and returns the round trips.
func (m Messaging) Run(ctx context.Context) (uint64, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total uint64
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	for range m.Pairs {
		var ping, pong [2]int
		if err := unix.Pipe2(ping[:], unix.O_CLOEXEC); err != nil {
			return 0, fmt.Errorf("messaging: %w", err)
		}
		if err := unix.Pipe2(pong[:], unix.O_CLOEXEC); err != nil {
			unix.Close(ping[0])
			unix.Close(ping[1])
			return 0, fmt.Errorf("messaging: %w", err)
		}
		wg.Add(2)
		// The echoer returns every byte; it stops when the pinger
		// closes its end.
		go func() {
			defer wg.Done()
			defer unix.Close(ping[0])
			defer unix.Close(pong[1])
			if err := lockThread(m.Comm); err != nil {
				fail(err)
				return
			}
			buf := make([]byte, 1)
			for {
				if n, err := unix.Read(ping[0], buf); n != 1 || err != nil {
					return
				}
				if _, err := unix.Write(pong[1], buf); err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			defer unix.Close(pong[0])
			defer unix.Close(ping[1])
			if err := lockThread(m.Comm); err != nil {
				fail(err)
				return
			}
			buf := []byte{'x'}
			var n uint64
			for ctx.Err() == nil {
				if _, err := unix.Write(ping[1], buf); err != nil {
					fail(err)
					break
				}
				if k, err := unix.Read(pong[0], buf); k != 1 || err != nil {
					fail(fmt.Errorf("messaging: echo lost: %v", err))
					break
				}
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	return total, first
}
