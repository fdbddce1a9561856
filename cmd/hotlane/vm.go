package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
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

func runVM(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("vm", flag.ContinueOnError)
	kernel := fs.String("kernel", "", "kernel to boot: a kernel of the test matrix ("+strings.Join(slices.Sorted(maps.Keys(vm.NamedKernels)), ", ")+"), a vmlinuz path, a Debian suite (newest cloud kernel of it, e.g. sid), or SUITE/PACKAGE (default "+vm.DefaultKernel+")")
	cacheDir := fs.String("cache", "", "where kernels, apt state and the scx_simple build are kept; a directory of this user's that others cannot write to (default $HOTLANE_CACHE, else $XDG_CACHE_HOME/hotlane or ~/.cache/hotlane, else /var/cache/hotlane for root; never a shared directory such as /tmp)")
	timeout := durationFlag(fs, "timeout", 5*time.Minute, time.Second, 0, "kill the guest after this long")
	memory := "2G"
	fs.Func("memory", "guest memory (qemu -m), a number of MiB or with a suffix: 512M, 2G (default 2G)", func(v string) error {
		if !memorySize.MatchString(v) {
			return fmt.Errorf("%q is not a memory size; write e.g. 512M or 2G", v)
		}
		memory = v
		return nil
	})
	cpus := intFlag(fs, "cpus", 2, 1, vm.MaxCPUs, "guest CPUs, in one socket (with --topology: as many as it gives)")
	var topology *vm.Topology
	fs.Func("topology", "the guest's CPU shape as sockets=N,cores=N,threads=N,nodes=N (fields left out are 1; each socket has its own L3, nodes split the CPUs evenly), e.g. sockets=2,cores=8,nodes=2", func(v string) error {
		t, err := vm.ParseTopology(v)
		if err != nil {
			return err
		}
		topology = &t
		return nil
	})
	retries := intFlag(fs, "retries", 0, 0, 10, "boot again, up to this many times, when the guest kernel crashes or dies without a result (see --mttcg)")
	mttcg := fs.Bool("mttcg", false, "run each guest CPU on its own host thread: faster and needed for meaningful latencies, but qemu older than 10 then sometimes crashes the guest when the kernel patches live code")
	results := fs.String("results", "", "copy the files the guest leaves in /results here (default: a new temporary directory)")
	scxSimple := fs.Bool("scx-simple", false, "build the upstream scx_simple for the kernel and put it at /usr/bin/scx_simple (the same as --scx scx_simple)")
	var scx listFlag
	fs.Var(&scx, "scx", "build one of the kernel's example schedulers ("+strings.Join(vm.ScxExamples, ", ")+") for the kernel and put it at /usr/bin/NAME (repeatable)")
	judges := fs.Bool("judges", false, "add the bench's outside judges with their libraries: perf (linux-perf; the real binary where /usr/bin/perf is Debian's wrapper script), sysbench, rt-app and stress-ng, at /usr/bin/NAME, for 'bench --workload judges'")
	printVmlinux := fs.Bool("print-vmlinux", false, "fetch the kernel, print the path of its uncompressed vmlinux (with BTF) and exit")
	kernelLog := fs.Bool("kernel-log", false, "also show the guest kernel's messages, not only the command's output")
	var add, env listFlag
	fs.Var(&env, "env", "set an environment variable for the guest command, as NAME=VALUE (repeatable)")
	fs.Var(&add, "add", "add a host file (and, for a program, its shared libraries) to the guest as HOST[:GUEST] (repeatable; GUEST defaults to HOST; not at /init, under /hotlane or at another path the runner fills itself)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: hotlane vm [flags] -- COMMAND [ARGS...]

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
`)
		printFlags(fs)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "hotlane vm: %v\n", err)
		return exitError
	}
	// Every flag, file and directory is checked here, before the kernel
	// is resolved: on a fresh machine that is an apt update and a
	// download, and a mistake must not wait for them.
	for _, name := range scx {
		if err := vm.CheckScxName(name); err != nil {
			return fail(fmt.Errorf("--scx %w", err))
		}
	}
	if *scxSimple {
		scx = append(scx, "scx_simple")
	}
	if err := vm.CheckKernelSpec(*kernel); err != nil {
		return fail(err)
	}
	if *cacheDir == "" {
		var err error
		if *cacheDir, err = vm.DefaultCacheDir(); err != nil {
			return fail(err)
		}
	}
	if err := checkDir("--cache", *cacheDir); err != nil {
		return fail(err)
	}
	if err := vm.CheckCacheDir(*cacheDir); err != nil {
		return fail(err)
	}
	if *printVmlinux {
		if fs.NArg() > 0 {
			return fail(fmt.Errorf("--print-vmlinux only prints the path and boots nothing; leave out the command %q", fs.Arg(0)))
		}
		k, err := vm.ResolveKernel(ctx, *cacheDir, *kernel, os.Stderr)
		if err != nil {
			return fail(err)
		}
		if k.Vmlinux == "" {
			return fail(fmt.Errorf("no vmlinux could be extracted from %s", k.Vmlinuz))
		}
		fmt.Println(k.Vmlinux)
		return exitOK
	}
	if fs.NArg() == 0 {
		return fail(errors.New("no command given; e.g. 'hotlane vm -- doctor'"))
	}
	if *results != "" {
		if err := checkDir("--results", *results); err != nil {
			return fail(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	if topology != nil && !flagGiven(fs, "cpus") {
		*cpus = topology.CPUs()
	}
	cfg := vm.Config{
		Init: self, Args: fs.Args(), Env: env,
		Memory: memory, CPUs: *cpus, Topology: topology, Timeout: *timeout, MultiThreadedTCG: *mttcg,
		ResultsDir:  *results,
		Files:       map[string]string{},
		Executables: map[string]string{},
	}
	var guestPaths []string
	for _, a := range add {
		host, guest, err := vm.ParseAdd(a)
		if err != nil {
			return fail(fmt.Errorf("--add %w", err))
		}
		if err := vm.CheckGuestPath(host, guest, scx); err != nil {
			return fail(err)
		}
		cfg.Executables[guest] = host
		guestPaths = append(guestPaths, guest)
	}
	if *judges {
		programs, err := vm.JudgePrograms(exec.LookPath)
		if err != nil {
			return fail(fmt.Errorf("--judges: %w", err))
		}
		for guest, host := range programs {
			if _, added := cfg.Executables[guest]; !added {
				cfg.Executables[guest] = host
				guestPaths = append(guestPaths, guest)
			}
		}
	}
	for _, name := range scx {
		guestPaths = append(guestPaths, vm.ScxGuestPath(name))
	}
	if err := vm.CheckCommand(cfg.Args, guestCommands(), guestPaths); err != nil {
		return fail(err)
	}
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	if err := vm.CheckScxBuild(*cacheDir, *kernel, scx); err != nil {
		return fail(err)
	}

	if cfg.Kernel, err = vm.ResolveKernel(ctx, *cacheDir, *kernel, os.Stderr); err != nil {
		return fail(err)
	}
	if len(scx) > 0 {
		bins, err := vm.BuildScx(ctx, *cacheDir, cfg.Kernel, scx, os.Stderr)
		if err != nil {
			return fail(err)
		}
		for name, bin := range bins {
			cfg.Executables[vm.ScxGuestPath(name)] = bin
		}
	}
	cfg.Console = os.Stdout
	if !*kernelLog {
		cfg.Console = vm.CommandOutputOnly(os.Stdout)
	}
	res, err := vm.Run(ctx, cfg)
	for try := 1; try <= *retries && (errors.Is(err, vm.ErrKernelPanic) || errors.Is(err, vm.ErrNoResult)); try++ {
		fmt.Fprintf(os.Stderr, "hotlane vm: %v\nhotlane vm: the guest crashed; booting again (retry %d of %d)\n", err, try, *retries)
		res, err = vm.Run(ctx, cfg)
	}
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "hotlane vm: guest exited %d (boot %.1fs, total %.1fs); results in %s\n",
		res.ExitCode, res.Boot.Seconds(), res.Total.Seconds(), res.ResultsDir)
	return res.ExitCode
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
