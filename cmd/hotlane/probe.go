package main

import (
	"context"
	"fmt"
	"os"
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
