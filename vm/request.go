package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
)

// A Request is what a vm command line asks for, as given: Validate checks
// it, Config assembles the run, and Vmlinux or Run fetch the kernel and
// boot it. Its errors name the command's flags, for they are what the
// user has to change.
type Request struct {
	// Kernel is the kernel as written (see ResolveKernel); "" is
	// DefaultKernel.
	Kernel string
	// CacheDir keeps kernels, apt state and scheduler builds; ""
	// is DefaultCacheDir.
	CacheDir string
	Timeout  time.Duration
	Memory   string
	// CPUs in the guest; a Topology gives the count instead unless
	// CPUsGiven says the user chose it too (then they must agree).
	CPUs      int
	CPUsGiven bool
	Topology  *Topology
	// Retries is how many times a guest that crashed, or died without a
	// result, is booted again.
	Retries          int
	MultiThreadedTCG bool
	// ResultsDir receives the guest's /results; "" is a new temporary
	// directory.
	ResultsDir string
	// Scx are the example schedulers to build; ScxSimple adds
	// scx_simple.
	Scx       []string
	ScxSimple bool
	// Judges adds the bench's outside judges from this machine.
	Judges bool
	// PrintVmlinux asks only for the kernel's vmlinux path: no command,
	// nothing booted.
	PrintVmlinux bool
	// Env, Add (HOST[:GUEST] specs) and Args (the command after --) are
	// the guest's.
	Env, Add, Args []string
	// Init is this hotlane binary, the guest's /init; Subcommands are the
	// hotlane commands the guest can run.
	Init        string
	Subcommands []string
	// Console receives the guest's output: only the command's, unless
	// KernelLog asks for the kernel's messages too.
	Console   io.Writer
	KernelLog bool
	// Log receives the progress of fetching and building, and the
	// retries.
	Log io.Writer
	// LookPath finds the judges' programs; nil is exec.LookPath.
	LookPath func(string) (string, error)
}

// Validate checks every flag, file and directory that does not need the
// command's files: the schedulers' names, the kernel, the cache, the
// command (or its absence with PrintVmlinux) and the results directory.
// On a fresh machine what follows is an apt update and a download, and a
// mistake must not wait for them.
func (r Request) Validate() error {
	for _, name := range r.Scx {
		if err := CheckScxName(name); err != nil {
			return fmt.Errorf("--scx %w", err)
		}
	}
	if err := CheckKernelSpec(r.Kernel); err != nil {
		return err
	}
	cache, err := r.cache()
	if err != nil {
		return err
	}
	if err := safefile.CheckDir("--cache", cache); err != nil {
		return err
	}
	if err := CheckCacheDir(cache); err != nil {
		return err
	}
	if r.PrintVmlinux {
		if len(r.Args) > 0 {
			return fmt.Errorf("--print-vmlinux only prints the path and boots nothing; leave out the command %q", r.Args[0])
		}
		return nil
	}
	if len(r.Args) == 0 {
		return errors.New("no command given; e.g. 'hotlane vm -- doctor'")
	}
	if r.ResultsDir != "" {
		return safefile.CheckDir("--results", r.ResultsDir)
	}
	return nil
}

func (r Request) cache() (string, error) {
	if r.CacheDir != "" {
		return r.CacheDir, nil
	}
	return DefaultCacheDir()
}

// scx are the example schedulers to build, scx_simple among them if
// asked for by its own flag.
func (r Request) scx() []string {
	if r.ScxSimple {
		return append(slices.Clone(r.Scx), "scx_simple")
	}
	return r.Scx
}

// Vmlinux fetches the kernel and returns the path of its uncompressed
// vmlinux.
func (r Request) Vmlinux(ctx context.Context) (string, error) {
	cache, err := r.cache()
	if err != nil {
		return "", err
	}
	k, err := ResolveKernel(ctx, cache, r.Kernel, r.logTo())
	if err != nil {
		return "", err
	}
	if k.Vmlinux == "" {
		return "", fmt.Errorf("no vmlinux could be extracted from %s", k.Vmlinuz)
	}
	return k.Vmlinux, nil
}

func (r Request) logTo() io.Writer {
	if r.Log == nil {
		return io.Discard
	}
	return r.Log
}

// Config assembles the run without its kernel and checks it as far as
// this machine can: the files to add and where they go, the judges, the
// command, and whether the schedulers can be built. The kernel is Run's
// to fetch.
func (r Request) Config() (Config, error) {
	cfg := Config{
		Init: r.Init, Args: r.Args, Env: r.Env,
		Memory: r.Memory, CPUs: r.cpus(), Topology: r.Topology, Timeout: r.Timeout, MultiThreadedTCG: r.MultiThreadedTCG,
		ResultsDir:  r.ResultsDir,
		Files:       map[string]string{},
		Executables: map[string]string{},
	}
	guestPaths, err := r.addFiles(cfg.Executables)
	if err != nil {
		return Config{}, err
	}
	if err := CheckCommand(cfg.Args, r.Subcommands, guestPaths); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	cache, err := r.cache()
	if err != nil {
		return Config{}, err
	}
	if err := CheckScxBuild(cache, r.Kernel, r.scx()); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// cpus is the guest's CPU count: the topology's, unless the user gave a
// count too, which Config.Validate then holds against it.
func (r Request) cpus() int {
	if r.Topology != nil && !r.CPUsGiven {
		return r.Topology.CPUs()
	}
	return r.CPUs
}

// addFiles puts the files to add and the judges in executables (guest
// path: host path) and returns the guest paths the guest will have,
// the example schedulers' among them.
func (r Request) addFiles(executables map[string]string) ([]string, error) {
	scx := r.scx()
	var guestPaths []string
	for _, a := range r.Add {
		host, guest, err := ParseAdd(a)
		if err != nil {
			return nil, fmt.Errorf("--add %w", err)
		}
		if err := CheckGuestPath(host, guest, scx); err != nil {
			return nil, err
		}
		executables[guest] = host
		guestPaths = append(guestPaths, guest)
	}
	if r.Judges {
		lookPath := r.LookPath
		if lookPath == nil {
			lookPath = exec.LookPath
		}
		programs, err := JudgePrograms(lookPath)
		if err != nil {
			return nil, fmt.Errorf("--judges: %w", err)
		}
		// An --add at a judge's path is the user's choice: it stays.
		for guest, host := range programs {
			if _, added := executables[guest]; !added {
				executables[guest] = host
				guestPaths = append(guestPaths, guest)
			}
		}
	}
	for _, name := range scx {
		guestPaths = append(guestPaths, ScxGuestPath(name))
	}
	return guestPaths, nil
}

// Run fetches the kernel, builds the example schedulers for it and boots
// cfg (from Config), again after a crash while retries last.
func (r Request) Run(ctx context.Context, cfg Config) (*Result, error) {
	cache, err := r.cache()
	if err != nil {
		return nil, err
	}
	if cfg.Kernel, err = ResolveKernel(ctx, cache, r.Kernel, r.logTo()); err != nil {
		return nil, err
	}
	if scx := r.scx(); len(scx) > 0 {
		bins, err := BuildScx(ctx, cache, cfg.Kernel, scx, r.logTo())
		if err != nil {
			return nil, err
		}
		for name, bin := range bins {
			cfg.Executables[ScxGuestPath(name)] = bin
		}
	}
	cfg.Console = r.Console
	if !r.KernelLog && r.Console != nil {
		cfg.Console = CommandOutputOnly(r.Console)
	}
	return runWithRetries(ctx, cfg, r.Retries, r.logTo(), Run)
}

// runWithRetries is run, booting again while the guest crashed or died
// without a result and retries last, each said on log.
func runWithRetries(ctx context.Context, cfg Config, retries int, log io.Writer, run func(context.Context, Config) (*Result, error)) (*Result, error) {
	res, err := run(ctx, cfg)
	for try := 1; try <= retries && (errors.Is(err, ErrKernelPanic) || errors.Is(err, ErrNoResult)); try++ {
		fmt.Fprintf(log, "hotlane vm: %v\nhotlane vm: the guest crashed; booting again (retry %d of %d)\n", err, try, retries)
		res, err = run(ctx, cfg)
	}
	return res, err
}
