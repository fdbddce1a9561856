package workloads

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hotlane/hotlane/verify"
	"golang.org/x/sys/unix"
)

// RequestServer is a service of the shape of an RPC server or a
// tokenizer beside the inference threads: message threads take requests
// as they arrive and wake worker threads, which compute, sleep (a call to
// a database or a downstream service) and finish the request. Requests
// arrive at a steady rate whatever the server's state (an open loop), so
// a server that falls behind shows it in its latency rather than by
// being asked less.
//
// It records, per request, the wake-up latency (from the message thread
// sending the request to a worker running with it) and the request
// latency (from the request's arrival to its end, the compute and the
// sleep and the wake-up after the sleep included), and counts the
// requests served. Every thread is SCHED_OTHER: it is everyone else, not
// the lane.
type RequestServer struct {
	// Comm names the threads: Comm+"-msg" the message threads, Comm+"-wrk"
	// the workers.
	Comm       string `json:"comm"`
	Messengers int    `json:"message_threads"`
	Workers    int    `json:"workers"`
	// RateHz is the requests per second arriving, over all message
	// threads.
	RateHz float64 `json:"rate_hz"`
	// Compute is the CPU time a worker spends on a request; Sleep the
	// time it then waits.
	Compute time.Duration `json:"compute_ns"`
	Sleep   time.Duration `json:"sleep_ns"`
}

// Defaults of a request server: a small service, 1 % of one CPU of
// compute and 300 wake-ups a second (the request, the worker's sleep, the
// message thread's timer), on two message threads and a worker per two
// CPUs. Under emulation a request costs milliseconds of a guest CPU: at
// 500 a second the backlog grew without end on an 8-CPU guest, at 200 it
// grew on one whose host was busy.
const (
	DefaultRequestComm       = "rpc"
	DefaultRequestMessengers = 2
	DefaultRequestRateHz     = 100
	DefaultRequestCompute    = 100 * time.Microsecond
	DefaultRequestSleep      = 500 * time.Microsecond
)

// DefaultRequestServer is a request server with the defaults and a worker
// per two CPUs.
func DefaultRequestServer(ncpu int) RequestServer {
	return RequestServer{Comm: DefaultRequestComm, Messengers: DefaultRequestMessengers, Workers: max(ncpu/2, 1),
		RateHz: DefaultRequestRateHz, Compute: DefaultRequestCompute, Sleep: DefaultRequestSleep}
}

// RequestServerResult is what a request server measured.
type RequestServerResult struct {
	// WakeUp is, per request, the time from its sending to a worker
	// running with it.
	WakeUp verify.Histogram `json:"wake_up"`
	// Request is, per request, the time from its arrival to its end.
	Request verify.Histogram `json:"request"`
	// Served counts the requests finished; Unfinished those that arrived
	// but had not begun when the run ended (they are in neither
	// histogram: a long backlog shows here).
	Served     uint64 `json:"served"`
	Unfinished uint64 `json:"unfinished"`
	// Ran is how long requests arrived.
	Ran time.Duration `json:"ran_ns"`
}

// Merge adds other's requests to r.
func (r *RequestServerResult) Merge(other *RequestServerResult) {
	r.WakeUp.Merge(&other.WakeUp)
	r.Request.Merge(&other.Request)
	r.Served += other.Served
	r.Unfinished += other.Unfinished
	r.Ran += other.Ran
}

// PerSecond is the requests served per second.
func (r *RequestServerResult) PerSecond() float64 {
	if r.Ran <= 0 {
		return 0
	}
	return float64(r.Served) / r.Ran.Seconds()
}

func (s RequestServer) validate() error {
	switch {
	case s.Comm == "" || len(s.Comm)+4 > 15:
		return fmt.Errorf("request server comm %q must be 1..11 bytes (its threads add -msg and -wrk)", s.Comm)
	case s.Messengers < 1 || s.Workers < 1 || s.Messengers+s.Workers > MaxThreads:
		return fmt.Errorf("request server message threads %d and workers %d must be at least 1 each and %d together at most", s.Messengers, s.Workers, MaxThreads)
	case s.RateHz <= 0 || s.RateHz > 1e6:
		return fmt.Errorf("request server rate_hz %g must be in (0, 1000000]", s.RateHz)
	case s.Compute < 0 || s.Sleep < 0 || s.Compute > time.Second || s.Sleep > time.Second:
		return fmt.Errorf("request server compute %s and sleep %s must be 0..1s", s.Compute, s.Sleep)
	}
	return nil
}

// threads is the number of OS threads the server runs.
func (s RequestServer) threads() int { return s.Messengers + s.Workers }

// A request on the wire: its arrival and sending times (CLOCK_MONOTONIC).
const requestSize = 16

// Run serves requests until ctx is done.
//
// The message threads send requests over one SOCK_SEQPACKET socket that
// every idle worker waits on: the kernel wakes one waiter per request and
// never splits a request, so no lock of ours sits between a request and
// its worker.
func (s RequestServer) Run(ctx context.Context) (RequestServerResult, error) {
	var res RequestServerResult
	if err := s.validate(); err != nil {
		return res, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return res, fmt.Errorf("request server: %w", err)
	}
	send, recv := fds[0], fds[1]
	defer unix.Close(recv)
	var (
		mu       sync.Mutex
		first    error
		senders  sync.WaitGroup
		workers  sync.WaitGroup
		interval = time.Duration(float64(time.Second) * float64(s.Messengers) / s.RateHz)
		start    = monotonicNow()
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	for i := range s.Messengers {
		senders.Add(1)
		go func() {
			defer senders.Done()
			if err := lockThread(s.Comm + "-msg"); err != nil {
				fail(err)
				return
			}
			// Each thread's arrivals are interval apart, the threads'
			// staggered evenly within it.
			next := start + time.Duration(i)*interval/time.Duration(s.Messengers)
			var msg [requestSize]byte
			for ctx.Err() == nil {
				if err := sleepUntil(next); err != nil {
					fail(fmt.Errorf("request server: %w", err))
					return
				}
				if ctx.Err() != nil {
					return
				}
				binary.NativeEndian.PutUint64(msg[0:], uint64(next))
				binary.NativeEndian.PutUint64(msg[8:], uint64(monotonicNow()))
				if _, err := unix.Write(send, msg[:]); err != nil {
					fail(fmt.Errorf("request server: send: %w", err))
					return
				}
				next += interval
			}
		}()
	}
	results := make([]RequestServerResult, s.Workers)
	for i := range s.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			if err := lockThread(s.Comm + "-wrk"); err != nil {
				fail(err)
				return
			}
			r := &results[i]
			var msg [requestSize]byte
			for {
				n, err := unix.Read(recv, msg[:])
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if err != nil || n != requestSize {
					if n != 0 {
						fail(fmt.Errorf("request server: receive: %d bytes, %v", n, err))
					}
					return // 0: the message threads are done
				}
				running := monotonicNow()
				if ctx.Err() != nil {
					r.Unfinished++
					continue
				}
				arrived := time.Duration(binary.NativeEndian.Uint64(msg[0:]))
				sent := time.Duration(binary.NativeEndian.Uint64(msg[8:]))
				r.WakeUp.Record(uint64(max(running-sent, 0)))
				spinCPU(s.Compute)
				if s.Sleep > 0 {
					if err := sleepUntil(monotonicNow() + s.Sleep); err != nil {
						fail(fmt.Errorf("request server: %w", err))
						return
					}
				}
				r.Request.Record(uint64(max(monotonicNow()-arrived, 0)))
				r.Served++
			}
		}()
	}
	senders.Wait()
	res.Ran = monotonicNow() - start
	// The workers finish what they began, count what is left and stop
	// when the socket is empty and closed.
	unix.Close(send)
	workers.Wait()
	for i := range results {
		res.Merge(&results[i]) // the workers' Ran is 0
	}
	return res, first
}
