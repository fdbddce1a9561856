package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/probe/dma"
)

// probeDMAUsage is the help before the flags, with the exit status and
// the tracepoints the probe knows to fill in.
const probeDMAUsage = `Usage: hotlane probe dma [flags]

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
`

// probeDMAFlags are the flags of hotlane probe dma.
type probeDMAFlags struct {
	duration, interval                          *time.Duration
	listen, webConfig, jsonPath, hooks, latency *string
	quiet                                       *bool
	events                                      listFlag
}

func newProbeDMAFlags(fs *flag.FlagSet) *probeDMAFlags {
	f := &probeDMAFlags{}
	f.duration = durationFlag(fs, "duration", 0, 0, 0, "how long to measure; 0: until Ctrl-C or SIGTERM")
	f.listen = fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics while measuring (e.g. 127.0.0.1:9464): per device DMA-API calls, failed calls and bytes by kind, map latency histograms, losses")
	f.webConfig = webConfigFlag(fs)
	f.jsonPath = fs.String("json", "", "also write the result as JSON to this file (-: standard output, and the text report goes to standard error)")
	f.interval = durationFlag(fs, "interval", 2*time.Second, 100*time.Millisecond, 0, "how often to print a progress line")
	f.quiet = fs.Bool("q", false, "no progress lines; with --json -, no text report either: the JSON alone (machine-only)")
	f.hooks = fs.String("hook", dma.HooksAuto, "hook family: auto, tp_btf (dma:* tracepoints, typed), tracepoint (dma:* through tracefs) or fentry (fexit on the DMA-API functions)")
	f.latency = fs.String("latency", dma.LatencyAuto, "map latency with fentry/fexit on the map functions: auto (where fentry loads), on (required) or off")
	fs.Var(&f.events, "events", "trace only these dma:* tracepoints (comma-separated or repeated), e.g. dma_map_phys,dma_unmap_phys")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), probeDMAUsage, probeExitHelp, strings.Join(dma.KnownTracepoints(), ", "))
		printFlags(fs)
	}
	return f
}

// request is what the parsed flags of fs ask the probe for.
func (f *probeDMAFlags) request(fs *flag.FlagSet) dma.Request {
	r := dma.Request{
		Duration: *f.duration, Interval: *f.interval, Hooks: *f.hooks, Latency: *f.latency, Events: f.events,
		Args: fs.Args(), Log: os.Stderr,
	}
	if !*f.quiet {
		r.Progress = os.Stderr
	}
	return r
}

func runProbeDMA(ctx context.Context, args []string) int {
	return runCommand(ctx, "probe dma", args, newProbeDMAFlags, func(ctx context.Context, fs *flag.FlagSet, f *probeDMAFlags) (int, error) {
		return probeDMARun(ctx, f.request(fs), f)
	})
}

// probeDMARun checks req, counts and writes the reports; it returns the
// exit status.
func probeDMARun(ctx context.Context, req dma.Request, f *probeDMAFlags) (int, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	jsonOut, err := newOutput(*f.jsonPath, anyoneReads)
	if err != nil {
		return 0, err
	}
	ro := req.RunOptions()
	m, err := serveProbeMetrics("hotlane probe dma", *f.listen, *f.webConfig, *f.quiet, metrics.NewDMACollector())
	if err != nil {
		return 0, err
	}
	defer m.close()
	ro.Live = m.live()
	res, err := dma.Run(ctx, req.Options(), ro)
	if err != nil {
		return 0, err
	}
	m.final(res)
	return writeProbeReports(jsonOut, *f.quiet, res.WriteText, res.WriteJSON, res.Interrupted)
}
