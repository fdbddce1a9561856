// Package verify is the run-queue latency tracer: it measures, from the
// kernel's sched_waking, sched_wakeup_new and sched_switch events, how
// long tasks wait for a CPU, keeps log-linear histograms per class,
// accounts for every wait it could not measure, checks latency bounds and
// writes the latency report.
package verify
