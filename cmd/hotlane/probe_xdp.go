package main

import (
	"context"
	"fmt"
	"os"
)

func runProbeXDP(ctx context.Context, args []string) int {
	fmt.Fprintln(os.Stderr, "hotlane probe xdp: not built yet")
	return exitError
}
