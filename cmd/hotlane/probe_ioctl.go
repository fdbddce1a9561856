package main

import (
	"context"
	"fmt"
	"os"
)

func runProbeIoctl(ctx context.Context, args []string) int {
	fmt.Fprintln(os.Stderr, "hotlane probe ioctl: not built yet")
	return exitError
}
