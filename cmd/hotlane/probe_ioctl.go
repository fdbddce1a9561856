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
)

const probeIoctlUsage = `Usage: hotlane probe ioctl [flags]

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

` + probeExitHelp + `

Examples:
  hotlane probe ioctl --duration 30s
  hotlane probe ioctl --pid 1234 --slow 1ms --json ioctl.json
  hotlane probe ioctl --dev 195:0 --comm python3
  hotlane probe ioctl --dev /dev/nvidia0 --wakeups --slow 5ms

Flags:
`

// probeIoctlFlags are the flags of hotlane probe ioctl.
type probeIoctlFlags struct {
	duration                                            *time.Duration
	slow                                                time.Duration
	streamSlow                                          bool
	listen, webConfig, jsonPath, comm, dev, hook        *string
	pid, ringBuf, top, maxCommands, maxDevices, maxProc *int
	hists                                               *uint64
	wakeups, cost, quiet                                *bool
}

func newProbeIoctlFlags(fs *flag.FlagSet) *probeIoctlFlags {
	f := &probeIoctlFlags{}
	f.duration = durationFlag(fs, "duration", 10*time.Second, 0, 0, "how long to measure; 0: until Ctrl-C or SIGTERM, which is also the default with --listen")
	f.listen = fs.String("listen", "", "serve Prometheus metrics on ADDR/metrics while measuring (e.g. 127.0.0.1:9464): per device and command the latency histogram at hotlane's bucket edges and failed calls, losses, BPF run time")
	f.webConfig = webConfigFlag(fs)
	f.jsonPath = fs.String("json", "", "also write the full result as JSON to this file (-: standard output, and the text report goes to standard error)")
	f.pid = intFlag(fs, "pid", 0, 0, maxPID, "trace only this process (a thread id means its process)")
	f.comm = fs.String("comm", "", "trace only threads whose comm, or whose process's comm, starts with this")
	f.dev = fs.String("dev", "", "trace only this character or block device: a path (/dev/nvidia0) or MAJOR:MINOR")
	fs.Func("slow", "print each call that takes at least this long as it happens, e.g. 1ms (0: every call)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		if d < 0 {
			return fmt.Errorf("negative duration %s", d)
		}
		f.slow, f.streamSlow = d, true
		return nil
	})
	f.hook = fs.String("hook", "", "force the hook family: fentry, tracepoint, tp_btf or raw_tp (default: the cheapest that works)")
	f.ringBuf = intFlag(fs, "ringbuf-bytes", 0, 0, 1<<30, "size of the slow-call ring buffer (power of two; default 256 KiB)")
	f.top = intFlag(fs, "top", 10, 0, 1<<20, "list this many (process, device, command) rows, busiest first (0: none)")
	f.hists = fs.Uint64("histograms", 0, "draw the histogram of each (device, command) with at least this many calls (0: none)")
	f.wakeups = fs.Bool("wakeups", false, "follow each call through its sleeps: time asleep until the wake-up (a device's completion, say), then the wait to run; hooks sched_switch and sched_waking, which run on every context switch")
	f.cost = fs.Bool("cost", false, "report the probe's own BPF run time per program run (adds two clock reads per run, partly inside the measured latencies)")
	limits := ioctl.DefaultLimits()
	f.maxCommands = intFlag(fs, "max-commands", limits.Commands, 1, ioctl.KernelCommandsPerDevice, "keep this many commands of each device apart, those with the most calls; the device's other commands are counted in one row and series, command \"other\" (the kernel tables keep the first 256 of a device apart)")
	f.maxDevices = intFlag(fs, "max-devices", limits.Devices, 1, 1<<16, "keep this many devices apart, those with the most calls; the others are counted in one row and series, device \"other\"")
	f.maxProc = intFlag(fs, "max-processes", limits.Processes, 1, 1<<20, "keep this many per-process rows, the busiest; the others are counted in one row, process \"other\"")
	f.quiet = fs.Bool("q", false, "no progress lines and no per-call slow lines; with --json -, no text report either: the JSON alone (machine-only)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), probeIoctlUsage)
		printFlags(fs)
	}
	return f
}

// request is what the parsed flags of fs ask the probe for.
func (f *probeIoctlFlags) request(fs *flag.FlagSet) ioctl.Request {
	r := ioctl.Request{
		Duration: *f.duration, DurationGiven: flagGiven(fs, "duration"), Served: *f.listen != "",
		PID: *f.pid, Comm: *f.comm, Dev: *f.dev, StreamSlow: f.streamSlow, Slow: f.slow,
		Hook: *f.hook, RingBufferBytes: *f.ringBuf, Wakeups: *f.wakeups, MeasureCost: *f.cost,
		Limits: ioctl.Limits{Commands: *f.maxCommands, Devices: *f.maxDevices, Processes: *f.maxProc},
		Args:   fs.Args(),
	}
	if !*f.quiet {
		r.Log = os.Stderr
	}
	return r
}

func runProbeIoctl(ctx context.Context, args []string) int {
	return runCommand(ctx, "probe ioctl", args, newProbeIoctlFlags, func(ctx context.Context, fs *flag.FlagSet, f *probeIoctlFlags) (int, error) {
		return probeIoctlRun(ctx, f.request(fs), f)
	})
}

// probeIoctlRun checks req, runs the probe and writes its reports; it
// returns the exit status.
func probeIoctlRun(ctx context.Context, req ioctl.Request, f *probeIoctlFlags) (int, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	opts := req.Options()
	// Checked before tracing, so that a bad path fails first.
	jsonOut, err := newOutput(*f.jsonPath, ownerReads)
	if err != nil {
		return 0, err
	}
	m, err := serveProbeMetrics("hotlane probe ioctl", *f.listen, *f.webConfig, *f.quiet, metrics.NewIoctlCollector())
	if err != nil {
		return 0, err
	}
	defer m.close()
	opts.Live = m.live()
	res, err := ioctl.Run(ctx, req.Config(), opts)
	if err != nil {
		return 0, err
	}
	m.final(res)
	text := func(w io.Writer) error {
		return res.WriteText(w, ioctl.TextOptions{TopProcesses: *f.top, Histograms: *f.hists})
	}
	return writeProbeReports(jsonOut, *f.quiet, text, res.WriteJSON, res.Interrupted)
}
