package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/probe/ioctl"
	"github.com/hotlane/hotlane/report"
)

func runProbeIoctl(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("probe ioctl", flag.ContinueOnError)
	duration := durationFlag(fs, "duration", 10*time.Second, 0, 0, "how long to measure; 0: until Ctrl-C or SIGTERM, which is also the default with --listen")
	listen := fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics while measuring (e.g. 127.0.0.1:9464): per device and command the latency histogram at hotlane's bucket edges and failed calls, losses, BPF run time")
	webConfig := webConfigFlag(fs)
	jsonPath := fs.String("json", "", "also write the full result as JSON to this file (-: standard output, and the text report goes to standard error)")
	pid := intFlag(fs, "pid", 0, 0, maxPID, "trace only this process (a thread id means its process)")
	comm := fs.String("comm", "", "trace only threads whose comm, or whose process's comm, starts with this")
	dev := fs.String("dev", "", "trace only this character or block device: a path (/dev/nvidia0) or MAJOR:MINOR")
	var slow time.Duration
	streamSlow := false
	fs.Func("slow", "print each call that takes at least this long as it happens, e.g. 1ms (0: every call)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		if d < 0 {
			return fmt.Errorf("negative duration %s", d)
		}
		slow, streamSlow = d, true
		return nil
	})
	hook := fs.String("hook", "", "force the hook family: fentry, tracepoint, tp_btf or raw_tp (default: the cheapest that works)")
	ringBuf := intFlag(fs, "ringbuf-bytes", 0, 0, 1<<30, "size of the slow-call ring buffer (power of two; default 256 KiB)")
	top := intFlag(fs, "top", 10, 0, 1<<20, "list this many (process, device, command) rows, busiest first (0: none)")
	hists := fs.Uint64("histograms", 0, "draw the histogram of each (device, command) with at least this many calls (0: none)")
	wakeups := fs.Bool("wakeups", false, "follow each call through its sleeps: time asleep until the wake-up (a device's completion, say), then the wait to run; hooks sched_switch and sched_waking, which run on every context switch")
	cost := fs.Bool("cost", false, "report the probe's own BPF run time per program run (adds two clock reads per run, partly inside the measured latencies)")
	limits := ioctl.DefaultLimits()
	maxCommands := intFlag(fs, "max-commands", limits.Commands, 1, ioctl.KernelCommandsPerDevice, "keep this many commands of each device apart, those with the most calls; the device's other commands are counted in one row and series, command \"other\" (the kernel tables keep the first 256 of a device apart)")
	maxDevices := intFlag(fs, "max-devices", limits.Devices, 1, 1<<16, "keep this many devices apart, those with the most calls; the others are counted in one row and series, device \"other\"")
	maxProcesses := intFlag(fs, "max-processes", limits.Processes, 1, 1<<20, "keep this many per-process rows, the busiest; the others are counted in one row, process \"other\"")
	quiet := fs.Bool("q", false, "no progress lines and no per-call slow lines; with --json -, no text report either: the JSON alone (machine-only)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane probe ioctl [flags]

Measures the latency of every ioctl(2) per device and command: the fd's
device (major:minor, shown as its /dev path), the command (decoded into
its _IOC direction, type, number and size, and named when well known)
and the calling process. Failed calls are counted per errno, calls slower
than --slow are printed as they happen, and every event the probe could
not count is reported. The GPU question "which ioctl on /dev/nvidia* is
slow" is: hotlane probe ioctl --dev /dev/nvidia0 --slow 1ms

Which commands a process issues, on which files, is up to it: a flood of
made-up commands on /dev/null must not crowd out the device you care
about. Each device keeps its --max-commands busiest commands apart (the
rest are counted as command "other"), the --max-devices busiest devices
are kept apart (the rest as device "other"), and the report keeps
--max-processes per-process rows; every call is still counted, and the
losses say how many went into "other" rows.

With --wakeups, a call that sleeps in the kernel (waiting for a device to
complete) is split into the time asleep until its wake-up and the wait to
run after it: the part of a blocking ioctl that the scheduler decides.
Run it beside hotlane run to see that wait for a lane task.

It uses the cheapest hook the kernel offers: fentry/fexit on the ioctl
syscall, else the syscalls:sys_enter_ioctl/sys_exit_ioctl tracepoints
(mounting tracefs if needed), else tp_btf or raw_tp on sys_enter/sys_exit.

%s

Examples:
  hotlane probe ioctl --duration 30s
  hotlane probe ioctl --pid 1234 --slow 1ms --json ioctl.json
  hotlane probe ioctl --dev 195:0 --comm python3
  hotlane probe ioctl --dev /dev/nvidia0 --wakeups --slow 5ms

Flags:
`, probeExitHelp)
		printFlags(fs)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "hotlane probe ioctl: %v\n", err)
		return exitError
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if *listen != "" && !flagGiven(fs, "duration") {
		*duration = 0 // a service: until stopped
	}

	cfg := ioctl.Config{
		Hook: ioctl.Hook(*hook), PID: *pid, Comm: *comm, Dev: *dev,
		StreamSlow: streamSlow, Slow: slow, RingBufferBytes: *ringBuf, MeasureCost: *cost, Wakeups: *wakeups,
		Limits: ioctl.Limits{Commands: *maxCommands, Devices: *maxDevices, Processes: *maxProcesses},
	}
	opts := ioctl.RunOptions{Duration: *duration}
	if !*quiet {
		opts.Progress = os.Stderr
		opts.ProgressInterval = max(*duration/10, time.Second)
		if *duration == 0 {
			opts.ProgressInterval = 5 * time.Second
		}
		opts.OnSlow = func(s ioctl.SlowCall) { fmt.Fprintf(os.Stderr, "slow: %s\n", s) }
		opts.Attached = func(p *ioctl.Probe) {
			fmt.Fprintf(os.Stderr, "hotlane probe ioctl: attached (%s: %s); Ctrl-C to stop\n", p.Hook, p.HookDetail)
		}
	}
	// Checked before tracing, so that a bad path fails first.
	jsonOut, err := newOutput(*jsonPath, ownerReads)
	if err != nil {
		return fail(err)
	}
	var col *metrics.IoctlCollector
	if *listen != "" {
		col = metrics.NewIoctlCollector()
		srv, err := serveMetrics("hotlane probe ioctl", *listen, *webConfig, *quiet, col)
		if err != nil {
			return fail(err)
		}
		defer srv.Close()
		opts.Live = col.Live
	}
	res, err := ioctl.Run(ctx, cfg, opts)
	if err != nil {
		return fail(err)
	}
	if col != nil {
		col.Final(res)
	}
	if err := res.WriteText(textOut(jsonOut, *quiet), ioctl.TextOptions{TopProcesses: *top, Histograms: *hists}); err != nil {
		return fail(err)
	}
	if err := jsonOut.write(func(w io.Writer) error { return res.WriteJSON(w) }); err != nil {
		return fail(err)
	}
	return exitCode(report.Judge(res.Interrupted, true))
}
