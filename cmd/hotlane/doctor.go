package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hotlane/hotlane/loader"
)

const doctorUsage = `Usage: hotlane doctor [--json] [--require FEATURE[,FEATURE...]] [--no-mount]

Report what this kernel and this process support: kernel release, the
capabilities hotlane needs, kernel BTF, sched_ext (state and running
scheduler), the scx kfunc API generation (read from kernel BTF) and which
hook types load and attach (tp_btf, raw_tp, tracepoint, fentry, kprobe,
XDP). Hook checks load tiny test programs and detach them at once; if
tracefs is not mounted, doctor mounts it and says so.

Every missing feature gets a line saying what to do. The exit status is 0
unless a --require'd feature is missing (1) or the arguments are bad (2).

Flags:
`

// doctorFlags are the flags of hotlane doctor.
type doctorFlags struct {
	asJSON, noMount *bool
	require         listFlag
}

func newDoctorFlags(fs *flag.FlagSet) *doctorFlags {
	f := &doctorFlags{}
	f.asJSON = fs.Bool("json", false, "print the findings as JSON instead of text")
	f.noMount = fs.Bool("no-mount", false, "do not mount tracefs at /sys/kernel/tracing when it is missing")
	fs.Var(&f.require, "require", "exit 1 unless `FEATURE` is available; repeatable or comma-separated\n(names: "+strings.Join(loader.FeatureNames(), ", ")+"; root = caps)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), doctorUsage)
		printFlags(fs)
	}
	return f
}

func runDoctor(ctx context.Context, args []string) int {
	return runCommand(ctx, "doctor", args, newDoctorFlags, func(ctx context.Context, fs *flag.FlagSet, f *doctorFlags) (int, error) {
		return doctorRun(ctx, loader.DoctorRequest{Require: f.require, NoMount: *f.noMount, JSON: *f.asJSON, Args: fs.Args()})
	})
}

// doctorRun probes this kernel as req asks and says what it found; the
// exit status says whether the features req requires are there.
func doctorRun(ctx context.Context, req loader.DoctorRequest) (int, error) {
	required, err := req.Required()
	if err != nil {
		return 0, err
	}
	feats, err := loader.Probe(ctx, req.Options())
	if err != nil {
		return 0, err
	}
	if err := req.Write(os.Stdout, feats); err != nil {
		return 0, err
	}
	if unmet := loader.Unmet(feats, required); unmet != "" {
		fmt.Fprintf(os.Stderr, "hotlane doctor: %s\n", unmet)
		return exitFail, nil
	}
	return exitOK, nil
}
