package main

import "context"

func runDoctor(ctx context.Context, args []string) int { return exitError }
