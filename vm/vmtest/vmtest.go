// Package vmtest runs a package's Go tests inside the sched_ext VM, the
// way Tetragon and cilium/ebpf run theirs: the host-side test compiles the
// package's test binary, boots the kernel with it and the static hotlane
// binary in the initramfs, runs the guest-only tests there and fails with
// the guest's output when they fail.
//
// A guest-only test starts with vmtest.RequireGuest(t), which skips it on
// the host; a host-side test calls vmtest.RunGuestTests to run them.
package vmtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/vm"
)

// Options for RunGuestTests.
type Options struct {
	// Run is the -test.run pattern of the guest-only tests;
	// $HOTLANE_GUEST_RUN, when set, replaces it (to run one guest test
	// while working on it: go test ./sched -run TestVMFault with
	// HOTLANE_GUEST_RUN=^TestGuestFaultLaneKeeps).
	Run string
	// ScxSimple puts the upstream scx_simple at vm.ScxSimpleGuestPath.
	ScxSimple bool
	// Scx names more of the kernel's example schedulers (e.g. scx_qmap)
	// to build and put at vm.ScxGuestPath(name).
	Scx []string
	// Executables maps guest paths to host programs to add with their
	// shared libraries (e.g. "/usr/bin/cyclictest"); a host path without
	// a slash is looked up in $PATH, and a missing one fails the test.
	Executables map[string]string
	// Judges adds the bench's outside judges (vm.JudgePrograms: perf,
	// sysbench, rt-app, stress-ng); a missing one fails the test.
	Judges bool
	// Kernel is a --kernel spec; empty means vm.DefaultKernel, or
	// $HOTLANE_TEST_KERNEL when set.
	Kernel  string
	Timeout time.Duration
	// QemuArgs are extra qemu arguments (devices).
	QemuArgs []string
	// Topology, when set, shapes the guest's CPUs (2 in one socket
	// otherwise); Memory is its memory (2G when empty).
	Topology *vm.Topology
	Memory   string
	// Env is NAME=VALUE pairs for the guest tests' environment.
	Env []string
	// MultiThreadedTCG runs each guest CPU on its own host thread. With
	// one thread, qemu switches guest CPUs only every 100 ms when both are
	// busy, so waits measured inside the guest include up to 100 ms of a
	// frozen CPU; tests of latency bounds need this.
	MultiThreadedTCG bool
}

// HotlaneGuestPath is where the guest finds the hotlane binary: it is
// /init, and any test can exec it as a CLI.
const HotlaneGuestPath = "/init"

// RequireGuest skips the test unless it runs inside the VM.
func RequireGuest(t testing.TB) {
	t.Helper()
	if !vm.InGuest() {
		t.Skip("runs only inside the sched_ext VM; the host-side test that boots it runs it there")
	}
}

// RequireBoot skips the test unless it runs inside the VM booted by the
// host test named host, whose -test.run pattern holds word: tests that need
// a guest of their own shape (more CPUs, the judges, a long run) share a
// package with the tests of the plain boot, whose "^TestGuest" matches them.
func RequireBoot(t testing.TB, word, host string) {
	t.Helper()
	RequireGuest(t)
	if f := flag.Lookup("test.run"); f == nil || !strings.Contains(f.Value.String(), word) {
		t.Skipf("runs in %s's boot", host)
	}
}

// RunGuestTests compiles the tests of the package in the current directory,
// boots the VM and runs the tests matching opts.Run inside it; it fails
// the test with the guest's console when they fail.
func RunGuestTests(t *testing.T, opts Options) {
	t.Helper()
	run, err := RunGuest(t, opts)
	if run != nil {
		t.Logf("guest console (%s, boot %.1fs, total %.1fs):\n%s", run.Kernel.Name, run.Boot.Seconds(), run.Total.Seconds(), run.Console)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// GuestRun is what one boot of RunGuest left.
type GuestRun struct {
	Kernel      *vm.Kernel
	Console     string
	Boot, Total time.Duration
	// Results holds the files the guest tests left in
	// $HOTLANE_RESULTS (vm.GuestResultsDir).
	Results string
}

// ErrGuestTestsFailed is returned by RunGuest when the guest's tests ran
// and some failed.
var ErrGuestTestsFailed = errors.New("guest tests failed")

// RunGuest is RunGuestTests for a caller that goes on after a failure (a
// kernel matrix): it skips the test where RunGuestTests would, fails it
// only when it cannot set the boot up, and returns the run, with an error
// if the VM did not finish or the tests did not pass.
func RunGuest(t *testing.T, opts Options) (*GuestRun, error) {
	t.Helper()
	if vm.InGuest() {
		t.Skip("already inside the VM")
	}
	if testing.Short() {
		t.Skip("VM tests boot qemu; skipped with -short")
	}
	if run := os.Getenv("HOTLANE_GUEST_RUN"); run != "" {
		t.Logf("guest tests: $HOTLANE_GUEST_RUN=%s instead of %s", run, opts.Run)
		opts.Run = run
	}
	ctx := context.Background()
	hotlane := Hotlane(t)
	testBin := filepath.Join(t.TempDir(), "pkg.test")
	goBuild(t, "test", "-c", "-o", testBin, ".")
	k, err := resolveKernel(t, opts.Kernel)
	if err != nil {
		return nil, err
	}
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	cfg := vm.Config{
		Kernel:      k,
		Init:        hotlane,
		Args:        []string{"/pkg.test", "-test.v", "-test.count=1", "-test.run", opts.Run},
		Files:       map[string]string{"/pkg.test": testBin},
		Executables: map[string]string{},
		Timeout:     opts.Timeout,
		QemuArgs:    opts.QemuArgs,
		Topology:    opts.Topology,
		Env:         opts.Env,
		Memory:      opts.Memory,

		MultiThreadedTCG: opts.MultiThreadedTCG,
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	scx := opts.Scx
	if opts.ScxSimple {
		scx = append(scx, "scx_simple")
	}
	if len(scx) > 0 {
		bins, err := vm.BuildScx(ctx, cache, k, scx, testWriter{t})
		if err != nil {
			return nil, fmt.Errorf("sched_ext examples: %w", err)
		}
		for name, bin := range bins {
			cfg.Executables[vm.ScxGuestPath(name)] = bin
		}
	}
	if opts.Judges {
		judges, err := vm.JudgePrograms(exec.LookPath)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(cfg.Executables, judges)
	}
	for guest, host := range opts.Executables {
		if !strings.Contains(host, "/") {
			p, err := exec.LookPath(host)
			if err != nil {
				t.Fatalf("%s is not installed on the host (scripts/deps.sh installs it): %v", host, err)
			}
			host = p
		}
		cfg.Executables[guest] = host
	}
	res, err := vm.Run(ctx, cfg)
	if cfg.MultiThreadedTCG && errors.Is(err, vm.ErrKernelPanic) && res != nil && livePatchRace(res.Console) {
		t.Logf("the guest died of qemu's race with the kernel's live code patching under multi-threaded TCG; booting it again once:\n%v", err)
		res, err = vm.Run(ctx, cfg)
	}
	var run *GuestRun
	if res != nil {
		run = &GuestRun{Kernel: k, Console: res.Console, Boot: res.Boot, Total: res.Total, Results: res.ResultsDir}
	}
	switch {
	case err != nil:
		return run, fmt.Errorf("VM run: %w", err)
	case res.ExitCode != 0:
		return run, fmt.Errorf("%w (exit %d); see the console", ErrGuestTestsFailed, res.ExitCode)
	case !strings.Contains(res.Console, "--- PASS"):
		return run, fmt.Errorf("no guest test matching %q ran", opts.Run)
	}
	return run, nil
}

// livePatchRace says whether a guest console shows the emulator's race
// with the kernel's live code patching: an "Oops: int3" at an instruction
// the kernel was patching (a jump label that sched_ext's static keys flip,
// a BPF trampoline) while another vCPU ran it. qemu's multi-threaded TCG
// still loses that race now and then: qemu 10.0.2 with the 6.17 guest,
// in __schedule as sched_ext switched, in one fresh `make test` of
// 2026-11-26. The tests that were to run after it never ran.
func livePatchRace(console string) bool {
	return strings.Contains(console, "Oops: int3")
}

// Kernel resolves a --kernel spec for a test: empty means
// $HOTLANE_TEST_KERNEL, else vm.DefaultKernel. It is fetched into the
// cache on first use.
func Kernel(t *testing.T, spec string) *vm.Kernel {
	t.Helper()
	k, err := resolveKernel(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func resolveKernel(t *testing.T, spec string) (*vm.Kernel, error) {
	if spec == "" {
		spec = os.Getenv("HOTLANE_TEST_KERNEL")
	}
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	k, err := vm.ResolveKernel(context.Background(), cache, spec, testWriter{t})
	if err != nil {
		return nil, fmt.Errorf("kernel: %w", err)
	}
	return k, nil
}

// Hotlane builds the static hotlane binary for /init; the Go build cache
// makes repeated builds cheap.
func Hotlane(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "hotlane")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/hotlane")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/hotlane: %v\n%s", err, b)
	}
	return out
}

func goBuild(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
