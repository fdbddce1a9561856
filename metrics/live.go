package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotlane/hotlane/report"
)

// live is what a collector reads: a running tracer's or probe's figures
// through read while it is attached, then the last figures it had. A
// scrape reads under mu, so stop, which the owner calls before it closes
// what read uses, waits for a scrape in flight and no scrape starts one
// after.
type live[T any] struct {
	mu   sync.Mutex
	read func() (T, error)
	last T
	have bool
}

// start makes scrapes call read from now on, forgetting the figures of
// an earlier source (a restarted scheduler counts from zero again); the
// function it returns stops reading (it may be called more than once).
func (l *live[T]) start(read func() (T, error)) (stop func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero T
	l.read, l.last, l.have = read, zero, false
	return l.stop
}

// stop stops reading; the last figures read stay.
func (l *live[T]) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.read = nil
}

// final stops reading and exports v from now on: the figures read once
// the source was detached, which are exact.
func (l *live[T]) final(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.read, l.last, l.have = nil, v, true
}

// get returns fresh figures while attached, else the last ones; ok is
// false before there are any. A failed read goes to ch as an invalid
// metric of errDesc (failing the scrape with the reason) and the last
// figures are still returned for export.
func (l *live[T]) get(ch chan<- prometheus.Metric, errDesc *prometheus.Desc) (v T, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.read != nil {
		if fresh, err := l.read(); err != nil {
			ch <- prometheus.NewInvalidMetric(errDesc, err)
		} else {
			l.last, l.have = fresh, true
		}
	}
	return l.last, l.have
}

// desc names a metric hotlane_<subsystem>_<name>.
func desc(subsystem, name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, subsystem, name), help, labels, nil)
}

// counter and gauge emit one sample; the descriptors are this package's,
// so a mismatch is a bug here and panics (as MustNewConstMetric does).
func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// bpfCost exports the BPF run time of a tracer's or probe's programs
// (BPF_ENABLE_STATS), labelled with the program and extra labels first.
type bpfCost struct{ runs, runTime *prometheus.Desc }

func newBPFCost(subsystem, what string, labels ...string) bpfCost {
	labels = append(labels, "program")
	return bpfCost{
		runs:    desc(subsystem, "bpf_runs_total", "Runs of each "+what+" BPF program (BPF_ENABLE_STATS).", labels...),
		runTime: desc(subsystem, "bpf_run_seconds_total", "Time spent in each "+what+" BPF program (BPF_ENABLE_STATS).", labels...),
	}
}

func (b bpfCost) describe(ch chan<- *prometheus.Desc) { ch <- b.runs; ch <- b.runTime }

func (b bpfCost) collect(ch chan<- prometheus.Metric, costs []report.ProgramCost, labels ...string) {
	for _, p := range costs {
		l := append(append([]string{}, labels...), p.Program)
		counter(ch, b.runs, float64(p.Runs), l...)
		counter(ch, b.runTime, p.Total.Seconds(), l...)
	}
}
