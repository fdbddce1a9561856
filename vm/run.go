package vm

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
)

// Errors a run can end with; test them with errors.Is.
var (
	ErrQemuMissing = errors.New("qemu-system-x86_64 not found: install it with 'apt-get install qemu-system-x86'")
	ErrTimeout     = errors.New("guest did not finish in time and was killed")
	ErrKernelPanic = errors.New("guest kernel panicked")
	ErrNoResult    = errors.New("guest ended without reporting a result")
)

// Config describes one VM run.
type Config struct {
	Kernel *Kernel
	// Init is the static hotlane binary that becomes /init.
	Init string
	// Args is the command /init runs. A first element without a slash is
	// a hotlane subcommand, run as "/init ARGS...".
	Args []string
	Env  []string
	// Files maps guest paths to host files to add to the initramfs;
	// Executables likewise, with their shared libraries.
	Files       map[string]string
	Executables map[string]string
	Memory      string // qemu -m, e.g. "2G"
	// CPUs is the number of guest CPUs, in one socket unless Topology
	// gives them a shape (then CPUs is 0 or Topology.CPUs()).
	CPUs     int
	Topology *Topology
	Timeout  time.Duration
	// QemuArgs are extra qemu arguments (devices such as an NVMe disk).
	QemuArgs []string
	// MultiThreadedTCG runs each vCPU on its own host thread: faster and
	// closer to real hardware, but qemu 7.2 then races with the kernel's
	// live code patching (BPF trampolines, static keys) and guests die
	// with "Oops: int3"; qemu 10 far more rarely (vmtest boots such a
	// guest once more). Off by default.
	MultiThreadedTCG bool
	// ResultsDir receives the files the guest left in /results; it is
	// created when missing, and a new temporary directory when empty.
	ResultsDir string
	// Console, if set, receives the guest console as it is produced.
	Console io.Writer
}

// Result is what came back from the guest.
type Result struct {
	ExitCode   int
	Console    string
	ResultsDir string
	// Boot is the time from starting qemu until /init ran the command;
	// Total is the whole run.
	Boot, Total time.Duration
}

// Run boots the kernel under qemu TCG with an initramfs around cfg.Init,
// runs cfg.Args and returns its exit code, console and result files.
// When the guest panics, hangs or dies without a result, the error says
// which and the Result still carries the console for diagnosis.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Kernel == nil {
		return nil, errors.New("vm: no kernel to boot")
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, ErrQemuMissing
	}
	cfg.Memory = cfg.memory()
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
		if cfg.Topology != nil {
			cfg.CPUs = cfg.Topology.CPUs()
		}
	}
	shape := Topology{Sockets: 1, Cores: cfg.CPUs, Threads: 1, Nodes: 1}
	if cfg.Topology != nil {
		shape = *cfg.Topology
	}
	smp, err := shape.qemuArgs(cfg.Memory)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}

	wd, err := newWorkDir()
	if err != nil {
		return nil, err
	}
	defer wd.Remove()
	work := wd.path

	initrd := filepath.Join(work, "initrd.cpio.gz")
	if err := writeInitramfs(cfg, initrd); err != nil {
		return nil, err
	}
	resultPort := filepath.Join(work, "results.bin")

	args := []string{
		"-nodefaults", "-display", "none", "-no-reboot",
		"-accel", tcgAccel(cfg.MultiThreadedTCG), "-cpu", "max",
		"-m", cfg.Memory,
		"-kernel", cfg.Kernel.Vmlinuz, "-initrd", initrd,
		"-append", kernelCommandLine,
		"-chardev", "stdio,id=console,signal=off", "-serial", "chardev:console",
		"-serial", "file:" + resultPort,
	}
	args = append(args, smp...)
	args = append(args, cfg.QemuArgs...)

	runCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, qemu, args...)
	killedWithRunner(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var qemuErr bytes.Buffer
	cmd.Stderr = &qemuErr

	res := &Result{}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	var console bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			if res.Boot == 0 && strings.Contains(line, bootMarker) {
				res.Boot = time.Since(start)
			}
			console.WriteString(line + "\n")
			if cfg.Console != nil {
				io.WriteString(cfg.Console, line+"\n")
			}
		}
	}()
	wg.Wait()
	waitErr := cmd.Wait()
	res.Total = time.Since(start)
	res.Console = console.String()

	switch {
	case runCtx.Err() == context.DeadlineExceeded:
		return res, fmt.Errorf("%w after %s; last console lines:\n%s", ErrTimeout, cfg.Timeout, tail(res.Console, 20))
	case ctx.Err() != nil:
		return res, ctx.Err()
	case strings.Contains(res.Console, "Kernel panic"):
		return res, fmt.Errorf("%w:\n%s", ErrKernelPanic, tail(res.Console, 30))
	case waitErr != nil:
		return res, fmt.Errorf("qemu: %v: %s", waitErr, strings.TrimSpace(qemuErr.String()))
	}

	res.ResultsDir = cfg.ResultsDir
	if res.ResultsDir == "" {
		if res.ResultsDir, err = os.MkdirTemp("", "hotlane-results-"); err != nil {
			return res, err
		}
	} else if err := os.MkdirAll(res.ResultsDir, 0o755); err != nil {
		return res, err
	}
	code, err := readResults(resultPort, res.ResultsDir)
	if err != nil {
		return res, fmt.Errorf("%w (%v); last console lines:\n%s", ErrNoResult, err, tail(res.Console, 20))
	}
	res.ExitCode = code
	return res, nil
}

// memory is the guest's memory size, 2G unless set.
func (cfg *Config) memory() string {
	if cfg.Memory == "" {
		return "2G"
	}
	return cfg.Memory
}

// kernelCommandLine is the guest kernel's command line. panic=-1 reboots
// at once on a panic, and -no-reboot turns that into qemu exiting, so a
// crashed guest never hangs; the last parameter tells /init it is the
// guest's (IsGuestInit). tsc=reliable keeps the TSC as the clocksource:
// TCG derives every vCPU's TSC from one host clock, but with two sockets
// the kernel's sync check failed under emulation and fell back to the
// HPET, so each clock read (timekeeping, the tracer's and the scheduler's
// timestamps) was an emulated MMIO access, where real machines read the
// TSC.
const kernelCommandLine = "console=ttyS0 panic=-1 oops=panic loglevel=4 mitigations=off tsc=reliable " + guestInitEnv + "=1"

func tcgAccel(multiThreaded bool) string {
	if multiThreaded {
		return "tcg,thread=multi"
	}
	return "tcg,thread=single"
}

func writeInitramfs(cfg Config, out string) error {
	im := NewInitramfs()
	if err := im.AddFile(cfg.Init, "/init"); err != nil {
		return err
	}
	for guest, host := range cfg.Files {
		if err := im.AddFile(host, guest); err != nil {
			return err
		}
	}
	for guest, host := range cfg.Executables {
		if err := im.AddExecutable(host, guest); err != nil {
			return err
		}
	}
	args := cfg.Args
	if !strings.Contains(args[0], "/") {
		args = append([]string{"/init"}, args...)
	}
	gc, err := json.Marshal(guestConfig{Args: args, Env: cfg.Env, HostCPUs: runtime.NumCPU()})
	if err != nil {
		return err
	}
	im.AddData(guestConfigPath, gc, 0o644)
	return safefile.Write(out, safefile.Readable, func(w io.Writer) error {
		_, err := im.WriteTo(w)
		return err
	})
}

// checkStatic refuses a dynamically linked /init: the guest has no C
// library for it unless one is added explicitly.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("init binary %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("init binary %s is dynamically linked: build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// readResults parses the framed result stream written by the guest's
// /init and unpacks its files into dir.
func readResults(path, dir string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndex(data, []byte(resultHeader))
	if i < 0 {
		return 0, errors.New("no result header on the result port")
	}
	rest := data[i:]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 {
		return 0, errors.New("truncated result header")
	}
	var code, size int
	if _, err := fmt.Sscanf(string(rest[:nl]), resultHeader+" exit=%d size=%d", &code, &size); err != nil {
		return 0, fmt.Errorf("bad result header %q: %w", rest[:nl], err)
	}
	body := rest[nl+1:]
	if len(body) < size {
		return 0, fmt.Errorf("result archive truncated: %d of %d bytes", len(body), size)
	}
	tr := tar.NewReader(bytes.NewReader(body[:size]))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("result archive: %w", err)
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") {
			return 0, fmt.Errorf("result archive: unsafe path %q", h.Name)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return 0, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return 0, err
		}
		// Readable: the guest's files describe the guest's own tasks.
		if err := safefile.WriteFile(dst, b, safefile.Readable); err != nil {
			return 0, err
		}
	}
	return code, nil
}

// kernelLogLine matches printk output on the console ("[    2.408510] …").
var kernelLogLine = regexp.MustCompile(`^\[\s*\d+\.\d+\] `)

// CommandOutputOnly wraps a console writer so that it receives only what
// the guest command printed, not the kernel's log lines. It expects whole
// lines, as Run writes them.
func CommandOutputOnly(w io.Writer) io.Writer { return lineFilter{w} }

type lineFilter struct{ w io.Writer }

func (f lineFilter) Write(p []byte) (int, error) {
	if kernelLogLine.Match(p) {
		return len(p), nil
	}
	return f.w.Write(p)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
