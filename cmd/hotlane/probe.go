package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/report"
)

// probes are the `hotlane probe` subcommands; each lives in probe_NAME.go.
func probes() []command {
	return []command{
		{"ioctl", "latency of ioctl(2) per device and command", runProbeIoctl},
		{"dma", "DMA-API mapping activity per device", runProbeDMA},
		{"xdp", "count packets per protocol on an interface and apply a drop policy", runProbeXDP},
	}
}

func runProbe(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		w := os.Stdout // asked for
		if len(args) == 0 {
			w = os.Stderr
		}
		fmt.Fprintf(w, "Usage: hotlane probe PROBE [flags]\n\nProbes:\n")
		for _, p := range probes() {
			fmt.Fprintf(w, "  %-8s %s\n", p.name, p.summary)
		}
		if len(args) == 0 {
			return exitError
		}
		return exitOK
	}
	for _, p := range probes() {
		if p.name == args[0] {
			return p.run(ctx, args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "hotlane probe: unknown probe %q; run 'hotlane probe --help' for the list\n", args[0])
	return exitError
}

// probeCollector is the metrics collector of a probe whose result is R.
type probeCollector[R any] interface {
	prometheus.Collector
	Live(read func() (R, error)) (stop func())
	Final(R)
}

// probeMetrics are a probe's metrics, served while it runs (--listen);
// a nil *probeMetrics serves nothing.
type probeMetrics[R any] struct {
	col probeCollector[R]
	srv *metrics.Server
}

// serveProbeMetrics serves col on listen for the probe called name, or
// returns nil when listen is "".
func serveProbeMetrics[R any](name, listen, webConfig string, quiet bool, col probeCollector[R]) (*probeMetrics[R], error) {
	if listen == "" {
		return nil, nil
	}
	srv, err := serveMetrics(name, listen, webConfig, quiet, col)
	if err != nil {
		return nil, err
	}
	return &probeMetrics[R]{col: col, srv: srv}, nil
}

// live is the probe's RunOptions.Live: nil when nothing is served.
func (m *probeMetrics[R]) live() func(read func() (R, error)) (stop func()) {
	if m == nil {
		return nil
	}
	return m.col.Live
}

// final serves res, the run's result, until the server closes.
func (m *probeMetrics[R]) final(res R) {
	if m != nil {
		m.col.Final(res)
	}
}

func (m *probeMetrics[R]) close() {
	if m != nil {
		m.srv.Close()
	}
}

// writeProbeReports writes a probe's text report, and its JSON when
// jsonOut is set, and returns the run's exit status.
func writeProbeReports(jsonOut *output, quiet bool, text, json func(io.Writer) error, interrupted bool) (int, error) {
	if err := text(textOut(jsonOut, quiet)); err != nil {
		return 0, err
	}
	if err := jsonOut.write(json); err != nil {
		return 0, err
	}
	return exitCode(report.Judge(interrupted, true)), nil
}
