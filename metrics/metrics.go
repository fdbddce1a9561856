// Package metrics serves hotlane's figures to Prometheus on /metrics, in
// the OpenMetrics text format, the way a fleet scrapes every node.
//
// Latencies are classic histograms in seconds whose bucket edges are
// hotlane's own (verify.BucketBounds): for every bucket that holds a
// sample, its lower and its upper edge, so that histogram_quantile() on a
// scrape lands in the very bucket hotlane's report gives for the same
// quantile. The bucket set grows as samples reach new buckets and never
// shrinks. Prometheus's native histograms have exponential edges, which
// hotlane's linear sub-buckets cannot be mapped onto exactly, so none are
// exported.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/version"
)

// Namespace prefixes every metric hotlane exports.
const Namespace = "hotlane"

// ErrListen is wrapped by Serve when the address cannot be listened on.
var ErrListen = errors.New("cannot listen for the metrics endpoint")

// Server is a running /metrics endpoint.
type Server struct {
	// Addr is the address it listens on (with the port chosen, for ":0").
	Addr string
	srv  *http.Server
	done chan error
}

// Serve listens on addr at once (so that a bad address or configuration
// fails before any work starts) and serves the collectors on /metrics,
// with the build's hotlane_build_info, as cfg says, until Close.
func Serve(addr string, cfg ServerConfig, cs ...prometheus.Collector) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	info := version.Read()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info", Help: "The running hotlane build (always 1).",
		ConstLabels: prometheus.Labels{"version": info.Module, "revision": info.Revision, "goversion": info.Go},
	}, func() float64 { return 1 }))
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w on %s: %w", ErrListen, addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "hotlane: metrics are on /metrics")
	})
	s := &Server{Addr: ln.Addr().String(), done: make(chan error, 1), srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
	}}
	go func() { s.done <- cfg.serve(s.srv, newLimitListener(ln, cfg.MaxConns)) }()
	return s, nil
}

// Close stops serving, letting scrapes in flight finish for up to a
// second, then closing whatever connections are left: a client that
// stopped reading does not hold the command up.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// Histogram turns h (nanoseconds) into a classic Prometheus histogram in
// seconds with hotlane's bucket edges, as the package doc says.
func Histogram(desc *prometheus.Desc, h *verify.Histogram, labels ...string) (prometheus.Metric, error) {
	buckets := map[float64]uint64{}
	var below uint64
	for i, n := range h.Buckets() {
		lo, hi := verify.BucketBounds(i)
		if lo > 0 {
			buckets[seconds(lo)] = below // nothing in [lo, hi) yet
		}
		below += n
		if i < verify.NumBuckets-1 { // the last one's edge is +Inf
			buckets[seconds(hi)] = below
		}
	}
	return prometheus.NewConstHistogram(desc, h.Count(), float64(h.Sum())/1e9, buckets, labels...)
}

// histogram is Histogram, or the error as an invalid metric.
func histogram(desc *prometheus.Desc, h *verify.Histogram, labels ...string) prometheus.Metric {
	m, err := Histogram(desc, h, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }

// TracerCollector exports a run-queue tracer's figures at each scrape:
// latency per class and view, events seen and lost, and the BPF run time
// of its programs. Until it is given a tracer, it exports nothing; after
// the tracer is closed, the last snapshot it had.
type TracerCollector struct {
	src live[tracerFigures]

	latency, events, lost, elapsed *prometheus.Desc
	cost                           bpfCost
}

type tracerFigures struct {
	snapshot *verify.Snapshot
	cost     []report.ProgramCost // nil once detached, or with statistics off
}

// NewTracerCollector returns a collector with nothing to export yet.
func NewTracerCollector() *TracerCollector {
	return &TracerCollector{
		latency: desc("", "runqueue_latency_seconds", "How long tasks waited for a CPU, per hotlane class; view wait starts at the wake-up or preemption (runqlat's), felt at the wake-up's cause where the kernel tells it.", "class", "view"),
		events:  desc("tracer", "events_total", "Scheduler events the tracer handled: wakeups, switches and samples (waits measured).", "event"),
		lost:    desc("tracer", "lost_total", "Data the tracer could not keep, by reason (task_table_full is partial: class figures stay complete).", "reason"),
		elapsed: desc("tracer", "attached_seconds", "How long the tracer has been attached."),
		cost:    newBPFCost("tracer", "tracer"),
	}
}

// Attach makes the collector read t from now on; call the function it
// returns before closing t.
func (c *TracerCollector) Attach(t *verify.Tracer) (stop func()) {
	return c.src.start(func() (tracerFigures, error) {
		s, err := t.ClassSnapshot()
		if err != nil {
			return tracerFigures{}, err
		}
		cost, _ := t.Cost() // statistics off: the report says so; nothing to export
		return tracerFigures{s, cost}, nil
	})
}

// Detach makes the collector export s, the tracer's last snapshot, from
// now on.
func (c *TracerCollector) Detach(s *verify.Snapshot) { c.src.final(tracerFigures{snapshot: s}) }

// Describe implements prometheus.Collector.
func (c *TracerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.latency, c.events, c.lost, c.elapsed} {
		ch <- d
	}
	c.cost.describe(ch)
}

// Collect implements prometheus.Collector.
func (c *TracerCollector) Collect(ch chan<- prometheus.Metric) {
	f, ok := c.src.get(ch, c.latency)
	if !ok {
		return
	}
	s := f.snapshot
	gauge(ch, c.elapsed, s.Elapsed.Seconds())
	for _, cl := range s.Classes {
		for _, v := range []verify.View{verify.ViewWait, verify.ViewFelt} {
			if h := cl.View(v); h != nil {
				ch <- histogram(c.latency, h, cl.Class, string(v))
			}
		}
	}
	n := s.Counters
	for event, v := range map[string]uint64{"wakeups": n.Wakeups, "switches": n.Switches, "samples": n.Samples} {
		counter(ch, c.events, float64(v), event)
	}
	for reason, v := range map[string]uint64{
		"start_stamp_not_stored": n.StampFailures, "ringbuf_full": n.RingbufDrops, "task_table_full": n.TaskTableFull,
		"switch_not_reported": n.UnmeasuredWaits, "start_not_seen": n.UnstampedWaits,
		"switch_not_seen": n.UnseenSwitches, "program_busy": n.SkippedRuns,
	} {
		counter(ch, c.lost, float64(v), reason)
	}
	c.cost.collect(ch, f.cost)
}
