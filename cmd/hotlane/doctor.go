package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hotlane/hotlane/loader"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runDoctor(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	var (
		asJSON  = fs.Bool("json", false, "print the findings as JSON instead of text")
		noMount = fs.Bool("no-mount", false, "do not mount tracefs at /sys/kernel/tracing when it is missing")
		require stringList
	)
	fs.Var(&require, "require", "exit 1 unless `FEATURE` is available; repeatable or comma-separated\n(names: "+strings.Join(loader.FeatureNames(), ", ")+"; root = caps)")
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, `Usage: hotlane doctor [--json] [--require FEATURE[,FEATURE...]] [--no-mount]

Report what this kernel and this process support: kernel release, the
capabilities hotlane needs, kernel BTF, sched_ext (state and running
scheduler), the scx kfunc API generation (read from kernel BTF) and which
hook types load and attach (tp_btf, raw_tp, tracepoint, fentry, kprobe,
XDP). Hook checks load tiny test programs and detach them at once; if
tracefs is not mounted, doctor mounts it and says so.

Every missing feature gets a line saying what to do. The exit status is 0
unless a --require'd feature is missing (1) or the arguments are bad (2).

Flags:
`)
		printFlags(fs)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "hotlane doctor: unexpected argument %q\n", fs.Arg(0))
		return exitError
	}
	required, err := loader.ParseFeatureNames(require)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane doctor: %v\n", err)
		return exitError
	}

	feats, err := loader.Probe(ctx, loader.ProbeOptions{NoMount: *noMount})
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane doctor: %v\n", err)
		return exitError
	}
	if *asJSON {
		err = feats.WriteJSON(os.Stdout)
	} else {
		err = feats.WriteText(os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotlane doctor: %v\n", err)
		return exitError
	}

	if missing := feats.Missing(required); len(missing) > 0 {
		names := make([]string, len(missing))
		for i, m := range missing {
			names[i] = m.Name
		}
		fmt.Fprintf(os.Stderr, "hotlane doctor: required feature(s) missing: %s\n", strings.Join(names, ", "))
		return exitFail
	}
	return exitOK
}
