package workloads

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hotlane/hotlane/verify"
	"golang.org/x/sys/unix"
)

// Decode is an inference server's decode loop as the CPU sees it: N
// request streams, each serving requests one after another (a server with
// a queue of requests: a closed loop). A request is a prefill burst of CPU
// work, then Tokens decode steps; a step is a burst of host work (the
// runtime's overhead, sampling, launching the next kernels), one ioctl on
// the device node (the submission, what a policy's device matchers see),
// and a wait for the completion, which arrives DeviceTime after the
// submission on a timerfd armed at that absolute time, as an interrupt
// would: the scheduler cannot shorten it, only serve the thread late after
// it. The step's token is out when the thread runs again. A helper thread
// per stream (a detokenizer) is woken through a pipe at every token and
// spends Helper of CPU time on it.
//
// CPU work is the thread's own CPU time, so a step does the same work
// whatever the preemptions; what contention costs is the waiting, once
// per token. It records per stream the tokens, the requests finished, the
// time to first token (TTFT: from the request's start to its first token)
// and the inter-token latency (ITL: between a request's consecutive
// tokens).
type Decode struct {
	// Comm names the stream threads; HelperComm the helpers, apart from
	// them so that the streams' comm prefix leaves the helpers out.
	Comm       string `json:"comm"`
	HelperComm string `json:"helper_comm,omitempty"`
	Streams    int    `json:"streams"`
	// Tokens is the decode steps of a request, one token each.
	Tokens int `json:"tokens"`
	// Prefill is the CPU time of a request's prefill, Host that of each
	// step's host work.
	Prefill time.Duration `json:"prefill_ns"`
	Host    time.Duration `json:"host_ns"`
	// DeviceTime is how long after its submission a step completes.
	DeviceTime time.Duration `json:"device_time_ns"`
	// Device is opened by each stream and every step's submission is an
	// ioctl on it (whose result is ignored: /dev/full refuses it); empty:
	// no ioctl.
	Device string `json:"device,omitempty"`
	// Helper is the CPU time a stream's helper spends per token; 0: no
	// helper threads.
	Helper time.Duration `json:"helper_ns,omitempty"`
	// Lane is applied to each stream thread (not the helpers) when it
	// starts: a bench variant's SCHED_FIFO, SCHED_DEADLINE or nice level.
	Lane LanePolicy `json:"-"`
}

// Defaults of a decode server: a small model on one accelerator, sized so
// that a 2-CPU emulated guest keeps up without contention (a step is
// 2.3 ms, about 400 tokens a second unloaded).
const (
	DefaultDecodeComm       = "infer-decode"
	DefaultDecodeHelperComm = "detok"
	DefaultDecodeStreams    = 1
	DefaultDecodeTokens     = 64
	DefaultDecodePrefill    = 5 * time.Millisecond
	DefaultDecodeHost       = 300 * time.Microsecond
	DefaultDecodeDeviceTime = 2 * time.Millisecond
	DefaultDecodeDevice     = "/dev/full"
	DefaultDecodeHelper     = 50 * time.Microsecond
)

// DefaultDecode is a decode server with the defaults.
func DefaultDecode() Decode {
	return Decode{Comm: DefaultDecodeComm, HelperComm: DefaultDecodeHelperComm, Streams: DefaultDecodeStreams,
		Tokens: DefaultDecodeTokens, Prefill: DefaultDecodePrefill, Host: DefaultDecodeHost,
		DeviceTime: DefaultDecodeDeviceTime, Device: DefaultDecodeDevice, Helper: DefaultDecodeHelper}
}

// DecodeStats is what one stream, or all of a server's, measured.
type DecodeStats struct {
	Tokens uint64 `json:"tokens"`
	// Requests counts the requests that produced all their tokens.
	Requests uint64           `json:"requests"`
	TTFT     verify.Histogram `json:"ttft"`
	ITL      verify.Histogram `json:"itl"`
	// Ran is how long the stream served requests.
	Ran time.Duration `json:"ran_ns"`
}

// Merge adds other's tokens, samples and time to s (another round).
func (s *DecodeStats) Merge(other *DecodeStats) {
	s.Tokens += other.Tokens
	s.Requests += other.Requests
	s.TTFT.Merge(&other.TTFT)
	s.ITL.Merge(&other.ITL)
	s.Ran += other.Ran
}

// TokensPerSecond is the tokens out per second.
func (s *DecodeStats) TokensPerSecond() float64 {
	if s.Ran <= 0 {
		return 0
	}
	return float64(s.Tokens) / s.Ran.Seconds()
}

// DecodeResult is what a decode server measured: per stream, and all
// streams together (Total.Ran is the longest stream's, so its tokens per
// second are the server's).
type DecodeResult struct {
	Comm    string        `json:"comm"`
	Total   DecodeStats   `json:"total"`
	Streams []DecodeStats `json:"streams"`
	// CPU is the CPU time the stream threads used (not the helpers').
	CPU time.Duration `json:"cpu_ns"`
	// TIDs are the stream threads' ids, for the tracer's view.
	TIDs []int `json:"-"`
}

// Merge adds another round of the same server to r.
func (r *DecodeResult) Merge(other *DecodeResult) {
	r.Comm = other.Comm
	r.Total.Merge(&other.Total)
	for len(r.Streams) < len(other.Streams) {
		r.Streams = append(r.Streams, DecodeStats{})
	}
	for i := range other.Streams {
		r.Streams[i].Merge(&other.Streams[i])
	}
	r.CPU += other.CPU
	r.TIDs = append(r.TIDs, other.TIDs...)
}

// LaneTask is a stream as the lane policy sees it: a step's time and its
// largest burst.
func (d Decode) LaneTask() LaneTask {
	return LaneTask{Period: d.Host + d.DeviceTime, Compute: max(d.Host, d.Prefill)}
}

// threads is the number of OS threads the server runs.
func (d Decode) threads() int {
	if d.Helper > 0 {
		return 2 * d.Streams
	}
	return d.Streams
}

// maxDecodeTokens bounds a request's tokens.
const maxDecodeTokens = 1 << 20

func (d Decode) validate() error {
	perStream := 1
	if d.Helper > 0 {
		perStream = 2
	}
	switch {
	case d.Comm == "" || len(d.Comm) > 15:
		return fmt.Errorf("decode comm %q must be 1..15 bytes", d.Comm)
	case d.Helper > 0 && (d.HelperComm == "" || len(d.HelperComm) > 15):
		return fmt.Errorf("decode helper_comm %q must be 1..15 bytes", d.HelperComm)
	case d.Streams < 1 || d.Streams*perStream > MaxThreads:
		return fmt.Errorf("decode streams %d must be 1..%d (%d with helpers)", d.Streams, MaxThreads, MaxThreads/2)
	case d.Tokens < 1 || d.Tokens > maxDecodeTokens:
		return fmt.Errorf("decode tokens %d must be 1..%d", d.Tokens, maxDecodeTokens)
	case d.DeviceTime < MinPeriod || d.DeviceTime > time.Second:
		return fmt.Errorf("decode device_time %s must be %s..1s (a shorter wait is no sleep)", d.DeviceTime, MinPeriod)
	case d.Prefill < 0 || d.Prefill > time.Second || d.Host < 0 || d.Host > time.Second || d.Helper < 0 || d.Helper > time.Second:
		return fmt.Errorf("decode prefill %s, host %s and helper %s must be 0..1s", d.Prefill, d.Host, d.Helper)
	}
	return nil
}

// Run serves requests on every stream until ctx is done; a request under
// way when it ends stops after its current step (its tokens count, but not
// as a request).
func (d Decode) Run(ctx context.Context) (DecodeResult, error) {
	res := DecodeResult{Comm: d.Comm}
	if err := d.validate(); err != nil {
		return res, err
	}
	res.Streams = make([]DecodeStats, d.Streams)
	tids := make([]int, d.Streams)
	cpu := make([]time.Duration, d.Streams)
	errs := make([]error, d.Streams)
	var wg sync.WaitGroup
	for i := range d.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tids[i], cpu[i], errs[i] = d.stream(ctx, &res.Streams[i])
		}()
	}
	wg.Wait()
	for i := range res.Streams {
		s := &res.Streams[i]
		ran := max(res.Total.Ran, s.Ran)
		res.Total.Merge(s)
		res.Total.Ran = ran
		res.CPU += cpu[i]
		if tids[i] != 0 {
			res.TIDs = append(res.TIDs, tids[i])
		}
	}
	return res, errors.Join(errs...)
}

// stream serves one stream's requests on its own thread, and returns the
// thread's id and CPU time.
func (d Decode) stream(ctx context.Context, st *DecodeStats) (tid int, cpu time.Duration, err error) {
	if err := lockThread(d.Comm); err != nil {
		return 0, 0, err
	}
	tid = unix.Gettid()
	// The OS thread may have run other goroutines before this one locked
	// it: its CPU time from then is not the stream's.
	cpu0 := threadCPUTime()
	if err := d.Lane.Apply(0, d.LaneTask()); err != nil {
		return tid, 0, fmt.Errorf("decode stream %q: %w", d.Comm, err)
	}
	dev := -1
	if d.Device != "" {
		if dev, err = unix.Open(d.Device, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return tid, 0, fmt.Errorf("decode stream %q: open its device %s: %w (give an existing device node, e.g. %s)", d.Comm, d.Device, err, DefaultDecodeDevice)
		}
		defer unix.Close(dev)
	}
	timer, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
	if err != nil {
		return tid, 0, fmt.Errorf("decode stream %q: timerfd: %w", d.Comm, err)
	}
	defer unix.Close(timer)
	tokens := -1 // the helper's pipe
	if d.Helper > 0 {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return tid, 0, fmt.Errorf("decode stream %q: pipe: %w", d.Comm, err)
		}
		done := make(chan error, 1)
		go func() { done <- d.helper(p[0]) }()
		tokens = p[1]
		// Closing the pipe ends the helper once it has read every token.
		defer func() {
			unix.Close(p[1])
			err = errors.Join(err, <-done)
		}()
	}
	start := monotonicNow()
	for ctx.Err() == nil {
		began := monotonicNow()
		spinCPU(d.Prefill)
		var last time.Duration
		k := 0
		for ; k < d.Tokens && ctx.Err() == nil; k++ {
			out, err := d.step(dev, timer)
			if err != nil {
				return tid, 0, fmt.Errorf("decode stream %q: %w", d.Comm, err)
			}
			st.Tokens++
			if k == 0 {
				st.TTFT.Record(uint64(max(out-began, 0)))
			} else {
				st.ITL.Record(uint64(max(out-last, 0)))
			}
			last = out
			if tokens >= 0 {
				if err := writeRetry(tokens, []byte{1}); err != nil {
					return tid, 0, fmt.Errorf("decode stream %q: wake its helper: %w", d.Comm, err)
				}
			}
		}
		if k == d.Tokens {
			st.Requests++
		}
	}
	st.Ran = monotonicNow() - start
	return tid, threadCPUTime() - cpu0, nil
}

// step runs one decode step and returns when its token was out: when the
// thread ran again after the completion.
func (d Decode) step(dev, timer int) (time.Duration, error) {
	spinCPU(d.Host)
	if dev >= 0 {
		unix.Syscall(unix.SYS_IOCTL, uintptr(dev), unix.TCGETS, 0)
	}
	done := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(monotonicNow() + d.DeviceTime))}
	if err := unix.TimerfdSettime(timer, unix.TFD_TIMER_ABSTIME, &done, nil); err != nil {
		return 0, fmt.Errorf("arm the completion timer: %w", err)
	}
	var expirations [8]byte
	for {
		_, err := unix.Read(timer, expirations[:])
		if err == nil {
			return monotonicNow(), nil
		}
		if err != unix.EINTR {
			return 0, fmt.Errorf("wait for the completion: %w", err)
		}
	}
}

// helper is a stream's detokenizer: it spends Helper of CPU time on every
// token the stream writes to fd, until the stream closes its end.
func (d Decode) helper(fd int) error {
	defer unix.Close(fd)
	if err := lockThread(d.HelperComm); err != nil {
		return err
	}
	var buf [256]byte
	for {
		n, err := unix.Read(fd, buf[:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("decode helper %q: %w", d.HelperComm, err)
		case n == 0:
			return nil
		}
		spinCPU(time.Duration(n) * d.Helper)
	}
}

// writeRetry writes b to fd, again after a signal.
func writeRetry(fd int, b []byte) error {
	for {
		_, err := unix.Write(fd, b)
		if err != unix.EINTR {
			return err
		}
	}
}
