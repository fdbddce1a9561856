package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/probe/dma"
	"github.com/hotlane/hotlane/report"
)

func runProbeDMA(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("probe dma", flag.ContinueOnError)
	duration := durationFlag(fs, "duration", 0, 0, 0, "how long to measure; 0: until Ctrl-C or SIGTERM")
	listen := fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics while measuring (e.g. 127.0.0.1:9464): per device DMA-API calls, failed calls and bytes by kind, map latency histograms, losses")
	webConfig := webConfigFlag(fs)
	jsonPath := fs.String("json", "", "also write the result as JSON to this file (-: standard output, and the text report goes to standard error)")
	interval := durationFlag(fs, "interval", 2*time.Second, 100*time.Millisecond, 0, "how often to print a progress line")
	quiet := fs.Bool("q", false, "no progress lines; with --json -, no text report either: the JSON alone (machine-only)")
	hooks := fs.String("hook", dma.HooksAuto, "hook family: auto, tp_btf (dma:* tracepoints, typed), tracepoint (dma:* through tracefs) or fentry (fexit on the DMA-API functions)")
	latency := fs.String("latency", dma.LatencyAuto, "map latency with fentry/fexit on the map functions: auto (where fentry loads), on (required) or off")
	var events listFlag
	fs.Var(&events, "events", "trace only these dma:* tracepoints (comma-separated or repeated), e.g. dma_map_phys,dma_unmap_phys")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane probe dma [flags]

Counts DMA-API activity per device until Ctrl-C, SIGTERM or --duration:
map, unmap, alloc and free calls, bytes mapped and their rate, failed
calls, the direction of each mapping and, where fentry works, how long
map calls take. It reads the kernel's dma:* tracepoints (6.12+; 6.18
renamed dma_map_page to dma_map_phys) and falls back to fexit on
dma_map_phys/dma_map_page_attrs and friends on kernels without them.
Every event the probe could not count is reported.

Examples:
  hotlane probe dma --duration 10s
  hotlane probe dma --json dma.json --hook fentry
  hotlane probe dma --events dma_map_phys,dma_unmap_phys

%s

Tracepoints it knows: %s

Flags:
`, probeExitHelp, strings.Join(dma.KnownTracepoints(), ", "))
		printFlags(fs)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "hotlane probe dma: unexpected argument %q\n", fs.Arg(0))
		return exitError
	}
	jsonOut, err := newOutput(*jsonPath, anyoneReads)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane probe dma: %v\n", err)
		return exitError
	}

	ro := dma.RunOptions{Duration: *duration, Interval: *interval, Progress: os.Stderr}
	if *quiet {
		ro.Progress = nil
	}
	until := "Ctrl-C to stop"
	if *duration > 0 {
		until = fmt.Sprintf("stopping after %s or Ctrl-C", *duration)
	}
	ro.Started = func(p *dma.Probe) {
		lat := "not measured"
		if l := p.LatencyHooks(); len(l) > 0 {
			lat = strings.Join(l, ", ")
		}
		fmt.Fprintf(os.Stderr, "hotlane probe dma: attached %s (map latency: %s); %s\n",
			strings.Join(p.Hooks(), ", "), lat, until)
	}
	var col *metrics.DMACollector
	if *listen != "" {
		col = metrics.NewDMACollector()
		srv, err := serveMetrics("hotlane probe dma", *listen, *webConfig, *quiet, col)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hotlane probe dma: %v\n", err)
			return exitError
		}
		defer srv.Close()
		ro.Live = col.Live
	}
	res, err := dma.Run(ctx, dma.Options{Hooks: *hooks, Latency: *latency, Events: events}, ro)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane probe dma: %v\n", err)
		return exitError
	}
	if col != nil {
		col.Final(res)
	}
	if err := res.WriteText(textOut(jsonOut, *quiet)); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane probe dma: %v\n", err)
		return exitError
	}
	if err := jsonOut.write(func(w io.Writer) error { return res.WriteJSON(w) }); err != nil {
		fmt.Fprintf(os.Stderr, "hotlane probe dma: %v\n", err)
		return exitError
	}
	return exitCode(report.Judge(res.Interrupted, true))
}
