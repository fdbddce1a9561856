// Command hotlane is a sched_ext scheduler with a high-priority lane for
// latency-critical tasks, plus the tracer, probes, workloads and VM runner
// that prove what it does. Each subcommand lives in its own file and only
// wires flags to the packages that do the work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/version"
	"github.com/hotlane/hotlane/vm"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitFail  = 1 // the check ran and failed (bound violated, requirement missing)
	exitError = 2 // bad input or an error that prevented the check
	// exitInterrupted: a signal ended a measurement before its
	// --duration. Its reports are written, marked interrupted, but it is
	// no verdict. Not 130 or 143: a shell gives those to a process the
	// signal killed, which hides that hotlane caught it and wrote its
	// reports, and they differ between SIGINT and SIGTERM; one code that
	// no other outcome uses is what a CI step can test.
	exitInterrupted = 3
)

// probeExitHelp is the exit status paragraph of every probe's help.
const probeExitHelp = `Exit status: 0 measured, 2 error, 3 interrupted: Ctrl-C or SIGTERM ended
the run before --duration; the report is written and says INTERRUPTED
(JSON "interrupted": true). Without a duration (--duration 0) a signal is
the normal end.`

// exitCode is the exit status of a run's verdict.
func exitCode(v report.Verdict) int {
	switch v {
	case report.VerdictPass:
		return exitOK
	case report.VerdictFail:
		return exitFail
	case report.VerdictInterrupted:
		return exitInterrupted
	}
	return exitError
}

// runCommand is a command called name: it parses args into the flags
// newFlags defines and runs what they ask for, which returns the exit
// status or an error, said in one line.
func runCommand[F any](ctx context.Context, name string, args []string, newFlags func(*flag.FlagSet) F, run func(context.Context, *flag.FlagSet, F) (int, error)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f := newFlags(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	code, err := run(ctx, fs, f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane %s: %v\n", name, err)
		return exitError
	}
	return code
}

// command is one hotlane subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) int
}

func commands() []command {
	return []command{
		{"doctor", "report what this kernel supports (BTF, sched_ext, kfuncs, hooks, privileges)", runDoctor},
		{"run", "run the hotlane sched_ext scheduler until Ctrl-C", runRun},
		{"probe", "ioctl, DMA and XDP probes", runProbe},
		{"workload", "run a periodic inference task over CPU hogs and report its lateness", runWorkload},
		{"verify", "measure run-queue latency per class and check a bound", runVerify},
		{"bench", "compare schedulers on the same workload (inside the VM); 'bench hooks': BPF hook costs", runBench},
		{"vm", "boot a sched_ext kernel under qemu and run a hotlane command inside it", runVM},
		{"completion", "print a shell completion script (bash)", runCompletion},
	}
}

// parseFlags parses a subcommand's flags. When done is true the command
// returns code at once: -h printed the help (0), or a flag was wrong (2),
// which is said in one line rather than the whole usage.
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	addShortFlags(fs)
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// Asked for: the help is the output, on standard output.
		fs.SetOutput(os.Stdout)
		usage()
		return exitOK, true
	case err != nil:
		fmt.Fprintf(os.Stderr, "hotlane %s: %v; run 'hotlane %s -h' for the flags\n", fs.Name(), err, fs.Name())
		return exitError, true
	}
	return 0, false
}

// usage lists the commands: on standard output when asked for, on
// standard error when the command line was wrong.
func usage(w io.Writer) {
	fmt.Fprintf(w, "hotlane: a sched_ext scheduler with a high-priority lane for latency-critical tasks\n\n")
	fmt.Fprintf(w, "Usage: hotlane COMMAND [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'hotlane COMMAND -h' for the flags of one command, 'hotlane --version' for the build.\n")
}

func main() {
	// Inside the test VM this binary is /init: set the machine up, run the
	// requested command and power off. Being PID 1 does not make it so
	// (containers, unshare --pid): the runner marks its /init.
	if vm.IsGuestInit() {
		vm.GuestInit()
		return
	}
	os.Exit(dispatch(os.Args[1:]))
}

func dispatch(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return exitError
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "help" {
		usage(os.Stdout)
		return exitOK
	}
	if name == "--version" || name == "version" {
		fmt.Println(version.Read())
		return exitOK
	}
	for _, c := range commands() {
		if c.name == name {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return c.run(ctx, args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "hotlane: unknown command %q; run 'hotlane --help' for the list\n", name)
	return exitError
}
