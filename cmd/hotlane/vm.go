package main

import "context"

func runVM(ctx context.Context, args []string) int { return exitError }
