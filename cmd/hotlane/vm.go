package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hotlane/hotlane/vm"
)

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// memorySize is what qemu -m takes: a number, optionally with a suffix.
var memorySize = regexp.MustCompile(`^[1-9][0-9]*[MGT]?$`)

const vmUsage = `Usage: hotlane vm [flags] -- COMMAND [ARGS...]

Boots a sched_ext-capable kernel under qemu (TCG) with an initramfs whose
/init is this hotlane binary, runs COMMAND inside and exits with its exit
code. COMMAND is a hotlane subcommand (e.g. "doctor") or an absolute path
of a file added with --add. Kernels are fetched with apt into the cache on
first use; the host's apt configuration is not touched.

Examples:
  hotlane vm -- doctor
  hotlane vm --kernel sid -- doctor --require sched_ext
  hotlane vm --scx-simple --add ./sched.test:/sched.test -- /sched.test -test.v
  hotlane vm --scx scx_qmap -- /usr/bin/scx_qmap
  hotlane vm --mttcg --topology sockets=2,cores=8,nodes=2 -- run --inference-comm x
  hotlane vm --mttcg --judges --topology sockets=2,cores=4 -- bench --workload judges --schedulers eevdf,hotlane

Flags:
`

// vmFlags are the flags of hotlane vm.
type vmFlags struct {
	kernel, cacheDir, results                       *string
	memory                                          string
	topology                                        *vm.Topology
	timeout                                         *time.Duration
	cpus, retries                                   *int
	mttcg, scxSimple, judges, printVmlinux, kernLog *bool
	scx, add, env                                   listFlag
}

func newVMFlags(fs *flag.FlagSet) *vmFlags {
	f := &vmFlags{memory: "2G"}
	f.kernel = fs.String("kernel", "", "kernel to boot: a kernel of the test matrix ("+strings.Join(slices.Sorted(maps.Keys(vm.NamedKernels)), ", ")+"), a vmlinuz path, a Debian suite (newest cloud kernel of it, e.g. sid), or SUITE/PACKAGE; SUITE/linux-source-X.Y builds that source here (about 40 minutes, cached), at 250 Hz or at the tick rate of SUITE/linux-source-X.Y,hz=N (100, 300, 1000) (default "+vm.DefaultKernel+")")
	f.cacheDir = fs.String("cache", "", "where kernels, apt state and the scx_simple build are kept; a directory of this user's that others cannot write to (default $HOTLANE_CACHE, else $XDG_CACHE_HOME/hotlane or ~/.cache/hotlane, else /var/cache/hotlane for root; never a shared directory such as /tmp)")
	f.timeout = durationFlag(fs, "timeout", 5*time.Minute, time.Second, 0, "kill the guest after this long")
	fs.Func("memory", "guest memory (qemu -m), a number of MiB or with a suffix: 512M, 2G (default 2G)", func(v string) error {
		if !memorySize.MatchString(v) {
			return fmt.Errorf("%q is not a memory size; write e.g. 512M or 2G", v)
		}
		f.memory = v
		return nil
	})
	f.cpus = intFlag(fs, "cpus", 2, 1, vm.MaxCPUs, "guest CPUs, in one socket (with --topology: as many as it gives)")
	fs.Func("topology", "the guest's CPU shape as sockets=N,cores=N,threads=N,nodes=N (fields left out are 1; each socket has its own L3, nodes split the CPUs evenly), e.g. sockets=2,cores=8,nodes=2", func(v string) error {
		t, err := vm.ParseTopology(v)
		if err != nil {
			return err
		}
		f.topology = &t
		return nil
	})
	f.retries = intFlag(fs, "retries", 0, 0, 10, "boot again, up to this many times, when the guest kernel crashes or dies without a result (see --mttcg)")
	f.mttcg = fs.Bool("mttcg", false, "run each guest CPU on its own host thread: faster and needed for meaningful latencies, but qemu older than 10 then sometimes crashes the guest when the kernel patches live code")
	f.results = fs.String("results", "", "copy the files the guest leaves in /results here (default: a new temporary directory)")
	f.scxSimple = fs.Bool("scx-simple", false, "build the upstream scx_simple for the kernel and put it at /usr/bin/scx_simple (the same as --scx scx_simple)")
	fs.Var(&f.scx, "scx", "build one of the kernel's example schedulers ("+strings.Join(vm.ScxExamples, ", ")+") for the kernel and put it at /usr/bin/NAME (repeatable)")
	f.judges = fs.Bool("judges", false, "add the bench's outside judges with their libraries: perf (linux-perf; the real binary where /usr/bin/perf is Debian's wrapper script), sysbench, rt-app and stress-ng, at /usr/bin/NAME, for 'bench --workload judges'")
	f.printVmlinux = fs.Bool("print-vmlinux", false, "fetch the kernel, print the path of its uncompressed vmlinux (with BTF) and exit")
	f.kernLog = fs.Bool("kernel-log", false, "also show the guest kernel's messages, not only the command's output")
	fs.Var(&f.env, "env", "set an environment variable for the guest command, as NAME=VALUE (repeatable)")
	fs.Var(&f.add, "add", "add a host file (and, for a program, its shared libraries) to the guest as HOST[:GUEST] (repeatable; GUEST defaults to HOST; not at /init, under /hotlane or at another path the runner fills itself)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), vmUsage)
		printFlags(fs)
	}
	return f
}

// request is what the parsed flags of fs ask the VM runner for.
func (f *vmFlags) request(fs *flag.FlagSet) vm.Request {
	return vm.Request{
		Kernel: *f.kernel, CacheDir: *f.cacheDir, Timeout: *f.timeout, Memory: f.memory,
		CPUs: *f.cpus, CPUsGiven: flagGiven(fs, "cpus"), Topology: f.topology,
		Retries: *f.retries, MultiThreadedTCG: *f.mttcg, ResultsDir: *f.results,
		Scx: f.scx, ScxSimple: *f.scxSimple, Judges: *f.judges, PrintVmlinux: *f.printVmlinux,
		Env: f.env, Add: f.add, Args: fs.Args(), Subcommands: guestCommands(),
		Console: os.Stdout, KernelLog: *f.kernLog, Log: os.Stderr,
	}
}

func runVM(ctx context.Context, args []string) int {
	return runCommand(ctx, "vm", args, newVMFlags, func(ctx context.Context, fs *flag.FlagSet, f *vmFlags) (int, error) {
		return vmRun(ctx, f.request(fs))
	})
}

// vmRun checks req, boots the guest and returns the guest command's exit
// status.
func vmRun(ctx context.Context, req vm.Request) (int, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	if req.PrintVmlinux {
		path, err := req.Vmlinux(ctx)
		if err != nil {
			return 0, err
		}
		fmt.Println(path)
		return exitOK, nil
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	req.Init = self
	cfg, err := req.Config()
	if err != nil {
		return 0, err
	}
	res, err := req.Run(ctx, cfg)
	if errors.Is(err, vm.ErrTimeout) {
		return 0, fmt.Errorf("%w\n(--timeout gives the guest longer: a bench takes about its variants x --repeats x (--duration + --warmup + 20 s) on 8 emulated CPUs)", err)
	}
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "hotlane vm: guest exited %d (boot %.1fs, total %.1fs); results in %s\n",
		res.ExitCode, res.Boot.Seconds(), res.Total.Seconds(), res.ResultsDir)
	return res.ExitCode, nil
}

// guestCommands are the hotlane subcommands the guest can run: all but vm,
// as the guest has no qemu.
func guestCommands() []string {
	var names []string
	for _, c := range commands() {
		if c.name != "vm" {
			names = append(names, c.name)
		}
	}
	return names
}
