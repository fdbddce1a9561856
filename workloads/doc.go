// Package workloads generates the load hotlane is judged under (periodic
// inference tasks, CPU hogs, messaging pairs) and runs the A/B bench that
// compares schedulers over the same workload.
package workloads
