package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hotlane/hotlane/hookbench"
	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/report"
)

// benchHooksUsage is the help before the flags, with the hook kinds to
// fill in.
const benchHooksUsage = `Usage: hotlane bench hooks [flags]

Measures what a BPF program costs on each kind of hook of this kernel. One
trivial program (count and timestamp into a per-CPU map) is attached in
turn as %s
to the same event: getpid(2), made in a tight loop by one thread (the
function hooks take __task_pid_nr_ns, the work getpid calls out of line;
the tracepoint hooks raw_syscalls:sys_enter; the uprobe a function of this
binary). Each hook is measured three ways, side by side:

  added    the loop's time per call with the program attached minus
           without it (alternating rounds; noise is the widest spread of
           either set of rounds)
  stats    the program's run time per run from BPF_ENABLE_STATS
  outside  the same from fentry/fexit on the program, as bpftool prog
           profile does

A hook the kernel refuses is listed with the kernel's reason. Then the
same two per-run measures for hotlane's own tracer and ioctl probe
programs, under a pipe ping-pong and a FIONREAD loop (--own=false: skip).

Needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN). Runs on any kernel
hotlane supports; no sched_ext needed.

Example:
  sudo hotlane bench hooks --hooks fentry,tp_btf,kprobe --json hooks.json

Exit status: 0 measured (refused hooks included), 2 error.

Flags:
`

// benchHooksFlags are the flags of hotlane bench hooks.
type benchHooksFlags struct {
	hooks, jsonPath *string
	calls, rounds   *int
	own             *bool
	ownFor          *time.Duration
}

func newBenchHooksFlags(fs *flag.FlagSet) *benchHooksFlags {
	f := &benchHooksFlags{}
	f.hooks = fs.String("hooks", "", "comma-separated hook kinds to measure (default all: "+kindList()+")")
	f.calls = intFlag(fs, "calls", 100000, 100, 100000000, "getpid calls per round")
	f.rounds = intFlag(fs, "rounds", 5, 1, 1000, "rounds per hook, each timing the loop without and with the program")
	f.own = fs.Bool("own", true, "also measure hotlane's own tracer and ioctl probe programs")
	f.ownFor = durationFlag(fs, "own-duration", 2*time.Second, 100*time.Millisecond, time.Hour, "load time per measure of hotlane's own programs")
	f.jsonPath = fs.String("json", "", "also write every figure as JSON to this file (-: standard output, and the text report goes to standard error)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), benchHooksUsage, kindList())
		printFlags(fs)
	}
	return f
}

// request is what the parsed flags of fs ask the bench for.
func (f *benchHooksFlags) request(fs *flag.FlagSet) hookbench.Request {
	return hookbench.Request{
		Hooks: *f.hooks, Calls: *f.calls, Rounds: *f.rounds, Own: *f.own, OwnFor: *f.ownFor,
		Args: fs.Args(), Progress: os.Stderr,
	}
}

func runBenchHooks(ctx context.Context, args []string) int {
	return runCommand(ctx, "bench hooks", args, newBenchHooksFlags, func(ctx context.Context, fs *flag.FlagSet, f *benchHooksFlags) (int, error) {
		return benchHooksRun(ctx, f.request(fs), *f.jsonPath)
	})
}

// benchHooksRun checks req, measures and writes the reports; it returns
// the exit status.
func benchHooksRun(ctx context.Context, req hookbench.Request, jsonPath string) (int, error) {
	cfg, err := req.Config()
	if err != nil {
		return 0, err
	}
	if err := loader.RequireCapabilities("CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"); err != nil {
		return 0, err
	}
	jsonOut, err := newOutput(jsonPath, anyoneReads)
	if err != nil {
		return 0, fmt.Errorf("--json: %w", err)
	}
	rep, err := req.Run(ctx, cfg)
	if err != nil {
		return 0, err
	}
	if err := rep.WriteText(textOut(jsonOut, false)); err != nil {
		return 0, err
	}
	if err := jsonOut.write(func(w io.Writer) error { return report.WriteJSON(w, rep) }); err != nil {
		return 0, err
	}
	return exitOK, nil
}

func kindList() string {
	var s []string
	for _, k := range hookbench.Kinds() {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}
