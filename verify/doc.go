// Package verify is the run-queue latency tracer: it measures, from the
// kernel's sched_wakeup and sched_switch events, how long tasks wait for a
// CPU, keeps log-linear histograms per class, checks latency bounds and
// writes the latency report.
package verify
