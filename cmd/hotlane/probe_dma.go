package main

import (
	"context"
	"fmt"
	"os"
)

func runProbeDMA(ctx context.Context, args []string) int {
	fmt.Fprintln(os.Stderr, "hotlane probe dma: not built yet")
	return exitError
}
