// Package ioctl is `hotlane probe ioctl`: the latency of every ioctl(2),
// measured in the kernel by bpf/ioctl.bpf.c, per device (the fd's
// major:minor, resolved to a /dev path), per command (decoded into its
// _IOC fields and named from a table of well-known commands) and per
// process, with errors counted per errno, calls slower than a threshold
// streamed as they happen, and every lost event counted.
//
// Attach picks the cheapest hook the running kernel offers, guided by
// loader.Probe: fentry/fexit on the ioctl syscall function, else the
// syscalls:sys_{enter,exit}_ioctl tracepoints, else tp_btf or raw_tp on the
// raw sys_enter/sys_exit tracepoints filtered by syscall number. Run
// attaches, measures for a while and returns a Result, which renders as a
// text report or JSON. On every error path nothing stays attached.
package ioctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/loader"
)

// Hook is a family of kernel hooks the probe can attach with.
type Hook string

// The hook families, in the order Attach tries them.
const (
	// HookFentry: fentry/fexit on __x64_sys_ioctl (and
	// __ia32_compat_sys_ioctl for 32-bit processes). The programs run for
	// ioctl calls only and other syscalls pay nothing.
	HookFentry Hook = "fentry"
	// HookTracepoint: the classic syscalls:sys_enter_ioctl and
	// sys_exit_ioctl tracepoints (tracefs). They run for ioctl only;
	// other syscalls pass a bitmap test that costs nothing measurable.
	// The perf glue makes each counted ioctl about 140 ns dearer than
	// with tp_btf (BenchmarkOverhead on the build host: +400 ns against
	// +260 ns). Calls from 32-bit processes are not reported.
	HookTracepoint Hook = "tracepoint"
	// HookTpBTF: tp_btf programs on the raw sys_enter/sys_exit
	// tracepoints. They run for every syscall of every task, which adds
	// about 105 ns to each, and keep ioctl by number (32-bit processes
	// included). That tax on the whole machine is why they come after
	// the tracepoints.
	HookTpBTF Hook = "tp_btf"
	// HookRawTP: the same on raw_tp, for kernels without BTF-typed
	// tracepoints.
	HookRawTP Hook = "raw_tp"
)

// Hooks returns every hook family in the order Attach tries them.
func Hooks() []Hook { return []Hook{HookFentry, HookTracepoint, HookTpBTF, HookRawTP} }

// feature is the loader.Probe check that says whether a family can work.
func (h Hook) feature() string {
	return map[Hook]string{
		HookFentry: loader.FeatureFentry, HookTracepoint: loader.FeatureTracepoint,
		HookTpBTF: loader.FeatureTpBTF, HookRawTP: loader.FeatureRawTP,
	}[h]
}

// Kernel attach points.
const (
	syscallFunc64 = "__x64_sys_ioctl"
	syscallFunc32 = "__ia32_compat_sys_ioctl"
	tracepointGrp = "syscalls"
)

// syscallTracepoints are the classic tracepoints HookTracepoint uses; a
// variable so that tests can name a missing one.
var syscallTracepoints = [2]string{"sys_enter_ioctl", "sys_exit_ioctl"}

// testAttachFault, when set by a test, runs before each program is
// attached and can make the attach fail.
var testAttachFault func(prog string) error

// Config says what to measure.
type Config struct {
	// Hook forces a hook family; empty tries them all, cheapest first.
	Hook Hook
	// PID restricts the probe to one process (thread-group id; a thread
	// id is taken to mean its process). 0 traces every process.
	PID int
	// Comm restricts it to threads whose comm, or whose process's comm,
	// starts with this (at most 15 bytes, the most the kernel keeps).
	Comm string
	// Dev restricts it to one character or block device: a path such as
	// /dev/nvidia0, or MAJOR:MINOR.
	Dev string
	// StreamSlow streams every call that takes at least Slow (0: every
	// call) as a SlowCall.
	StreamSlow bool
	Slow       time.Duration
	// RingBufferBytes sizes the slow-call stream (a power of two of at
	// least a page); 0 means 256 KiB.
	RingBufferBytes int
	// Wakeups follows each call through its sleeps: how long it slept
	// until something woke it (a device's completion, say) and how long
	// it then waited to run. Two more programs, on sched_switch and
	// sched_waking, run on every context switch of the machine.
	Wakeups bool
	// MeasureCost turns on the kernel's BPF run-time statistics so the
	// result states the probe's own cost per program run. They add two
	// clock reads to every run, some of which lands inside the measured
	// latencies, so they are off by default.
	MeasureCost bool
	// Limits bound the rows of the result (zero: DefaultLimits).
	Limits Limits

	// devDir is where device nodes are looked up; "" means /dev.
	devDir string
	// maxKeys, when set, shrinks the call, histogram and errno tables to
	// this many entries, so that tests can fill them.
	maxKeys uint32
}

// ErrBadConfig is returned (wrapped) for a Config that Attach refuses
// before loading anything; errors.Is finds it, the message does not
// repeat it.
var ErrBadConfig = errors.New("bad ioctl probe configuration")

type configError struct {
	msg string
	err error // the cause, if any
}

func (e *configError) Error() string        { return e.msg }
func (e *configError) Is(target error) bool { return target == ErrBadConfig }
func (e *configError) Unwrap() error        { return e.err }

func badConfig(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// maxComm is TASK_COMM_LEN - 1.
const maxComm = 15

// filters is a validated Config.
type filters struct {
	tgid    uint32
	pidNote string // how PID was interpreted, if not literally
	comm    string
	devOn   bool
	dev     uint32
	device  Device
}

// check validates cfg and resolves its filters; errors name the setting
// and say what is wrong in one line.
func (cfg *Config) check(res *Resolver) (filters, error) {
	var f filters
	bad := func(format string, args ...any) (filters, error) {
		return filters{}, badConfig(format, args...)
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	if err := cfg.Limits.check(); err != nil {
		return filters{}, err
	}
	if cfg.Hook != "" && cfg.Hook.feature() == "" {
		return bad("unknown hook %q; use one of %s", cfg.Hook, hookList())
	}
	switch {
	case cfg.PID < 0:
		return bad("pid %d: not a process id", cfg.PID)
	case cfg.PID > 0:
		tgid, err := processOf(cfg.PID)
		if err != nil {
			return bad("pid %d: %v", cfg.PID, err)
		}
		f.tgid = uint32(tgid)
		if tgid != cfg.PID {
			f.pidNote = fmt.Sprintf("pid %d is a thread of process %d; tracing the whole process", cfg.PID, tgid)
		}
	}
	if len(cfg.Comm) > maxComm {
		return bad("comm %q is %d bytes; the kernel keeps only %d (use the first %d: %q)",
			cfg.Comm, len(cfg.Comm), maxComm, maxComm, cfg.Comm[:maxComm])
	}
	f.comm = cfg.Comm
	if cfg.Dev != "" {
		dev, d, err := res.ParseDevice(cfg.Dev)
		if err != nil {
			return filters{}, &configError{msg: err.Error(), err: err}
		}
		f.devOn, f.dev, f.device = true, dev, d
	}
	if cfg.Slow < 0 {
		return bad("slow threshold %s is negative", cfg.Slow)
	}
	if n := cfg.RingBufferBytes; n != 0 && (n < os.Getpagesize() || n&(n-1) != 0) {
		return bad("ring buffer size %d: use a power of two of at least %d", n, os.Getpagesize())
	}
	return f, nil
}

func hookList() string {
	var s []string
	for _, h := range Hooks() {
		s = append(s, string(h))
	}
	return strings.Join(s, ", ")
}

// processOf returns the thread-group id of pid, which must exist.
func processOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if errors.Is(err, os.ErrNotExist) {
		return 0, errors.New("no such process")
	} else if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no Tgid in its /proc status")
}

// Probe is an attached ioctl probe.
type Probe struct {
	// Hook is the family in use, HookDetail what exactly it attached to.
	Hook       Hook
	HookDetail string
	// Notes say why cheaper hooks were not used, and how filters were
	// read.
	Notes []string
	// Started is when the probe was attached.
	Started time.Time

	cfg      Config
	filters  filters
	resolver *Resolver
	objs     probeObjects
	// progs are the programs loaded on objs, the hook family's first
	// (nHook of them), then those that follow calls through their sleeps;
	// specs are what each was loaded from.
	progs     []*ebpf.Program
	specs     []*ebpf.ProgramSpec
	nHook     int
	links     []link.Link
	ring      *ringbuf.Reader
	stats     interface{ Close() error }
	monoStart uint64    // CLOCK_MONOTONIC at Started, in ns: the BPF clock
	detached  time.Time // when Detach ran
}

// Attach validates cfg, checks privileges, picks a hook family and
// attaches the probe. Nothing stays attached if it fails.
func Attach(ctx context.Context, cfg Config) (*Probe, error) {
	devDir := cfg.devDir
	if devDir == "" {
		devDir = "/dev"
	}
	res := NewResolver(devDir)
	f, err := cfg.check(res)
	if err != nil {
		return nil, err
	}
	if err := loader.RequireCapabilities("CAP_BPF", "CAP_PERFMON"); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise RLIMIT_MEMLOCK: %w", err)
	}
	// The feature probe says which hook families work here; it also
	// mounts tracefs when it is missing, before cilium/ebpf first looks
	// for it.
	feats, err := loader.Probe(ctx, loader.ProbeOptions{})
	if err != nil {
		return nil, err
	}
	var kernelBTF *btf.Spec // loaded on demand
	kernelFunc := func(name string) bool {
		if kernelBTF == nil {
			spec, err := btf.LoadKernelSpec()
			if err != nil {
				return false
			}
			kernelBTF = spec
		}
		_, err := loader.LookupKfunc(kernelBTF, name)
		return err == nil
	}

	hooks := Hooks()
	if cfg.Hook != "" {
		hooks = []Hook{cfg.Hook}
	}
	notes := append([]string(nil), feats.Notes...) // e.g. that it mounted tracefs
	if f.pidNote != "" {
		notes = append(notes, f.pidNote)
	}
	for _, h := range hooks {
		why := ""
		if feat, ok := feats.Get(h.feature()); !ok || !feat.Available {
			why = "not available here: " + feat.Detail
		} else {
			why = precheck(h, kernelFunc)
		}
		var p *Probe
		if why == "" {
			p, err = attach(h, cfg, f, res, kernelFunc)
			if err != nil {
				why = loader.CleanError(err)
			}
		}
		if why != "" {
			if cfg.Hook != "" {
				return nil, fmt.Errorf("hook %s: %s", h, why)
			}
			notes = append(notes, fmt.Sprintf("%s not used: %s", h, why))
			continue
		}
		p.Notes = append(notes, p.Notes...)
		return p, nil
	}
	return nil, fmt.Errorf("no hook family works on this kernel: %s", strings.Join(notes, "; "))
}

// precheck says why hook h cannot attach here, or "" if it may.
func precheck(h Hook, kernelFunc func(string) bool) string {
	switch h {
	case HookFentry:
		if !kernelFunc(syscallFunc64) {
			return syscallFunc64 + " is not in the kernel's BTF"
		}
	case HookTracepoint:
		dir, _, err := loader.EnsureTracefs(false)
		if err != nil {
			return err.Error()
		}
		if dir == "" {
			return "tracefs is not mounted at " + loader.TracefsPath
		}
		dir = filepath.Join(dir, "events")
		for _, tp := range syscallTracepoints {
			if _, err := os.Stat(filepath.Join(dir, tracepointGrp, tp)); err != nil {
				return fmt.Sprintf("tracepoint %s:%s not found in %s (syscall tracepoints need CONFIG_FTRACE_SYSCALLS)", tracepointGrp, tp, dir)
			}
		}
	}
	return ""
}

// probeObjects are the probe's maps and globals, created (LoadAndAssign)
// before its programs, which load on them (loader.LoadPrograms). The .rodata
// and .bss maps hold the globals, which the programs must share too.
type probeObjects struct {
	bpf.IoctlMaps
	Rodata *ebpf.Map `ebpf:".rodata"`
	Bss    *ebpf.Map `ebpf:".bss"`
}

// Close closes the data sections' maps too, which bpf.IoctlMaps' Close
// does not know.
func (o *probeObjects) Close() error { return loader.CloseMaps(o) }

// hookPrograms are the programs of one family, enter first.
func hookPrograms(p *bpf.IoctlProgramSpecs, h Hook) []*ebpf.ProgramSpec {
	switch h {
	case HookFentry:
		return []*ebpf.ProgramSpec{p.IoctlFentry, p.IoctlFexit, p.IoctlFentry32, p.IoctlFexit32}
	case HookTracepoint:
		return []*ebpf.ProgramSpec{p.IoctlTpEnter, p.IoctlTpExit}
	case HookTpBTF:
		return []*ebpf.ProgramSpec{p.IoctlBtfEnter, p.IoctlBtfExit}
	case HookRawTP:
		return []*ebpf.ProgramSpec{p.IoctlRawEnter, p.IoctlRawExit}
	}
	return nil
}

// wakeupPrograms follow calls through their sleeps (Config.Wakeups).
func wakeupPrograms(p *bpf.IoctlProgramSpecs) []*ebpf.ProgramSpec {
	return []*ebpf.ProgramSpec{p.IoctlSwitch, p.IoctlWaking}
}

// Programs returns the probe's attached programs by function name, for
// tools that measure them (the map is the caller's; the programs close
// with the probe).
func (p *Probe) Programs() map[string]*ebpf.Program { return p.named(p.progs[:p.nHook]) }

// named returns progs, some of p.progs from the first, by function name.
func (p *Probe) named(progs []*ebpf.Program) map[string]*ebpf.Program {
	out := make(map[string]*ebpf.Program, len(progs))
	for i, prog := range progs {
		out[p.specs[i].Name] = prog
	}
	return out
}

// closed says Close has run.
func (p *Probe) closed() bool { return p.objs == (probeObjects{}) }

// attach loads the programs of hook h and attaches them: the maps and
// globals first (LoadAndAssign), then the programs on them.
func attach(h Hook, cfg Config, f filters, res *Resolver, kernelFunc func(string) bool) (_ *Probe, err error) {
	spec, err := bpf.LoadIoctl()
	if err != nil {
		return nil, err
	}
	var specs bpf.IoctlSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("the ioctl probe's object: %w", err)
	}
	progs := hookPrograms(&specs.IoctlProgramSpecs, h)
	compat := h == HookFentry && kernelFunc(syscallFunc32)
	if h == HookFentry && !compat {
		progs = progs[:2]
	}
	all := progs
	if cfg.Wakeups {
		all = append(slices.Clip(all), wakeupPrograms(&specs.IoctlProgramSpecs)...)
	}
	if err := configure(&specs, cfg, f); err != nil {
		return nil, err
	}
	p := &Probe{Hook: h, cfg: cfg, filters: f, resolver: res, specs: all, nHook: len(progs)}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, loadError(h, err)
	}
	if p.progs, err = loader.LoadPrograms(spec, ebpf.CollectionOptions{MapReplacements: loader.MapsByName(&p.objs)}, all...); err != nil {
		return nil, loadError(h, err)
	}

	// The clock the BPF side stamps with, read before anything runs.
	if p.monoStart, err = loader.KtimeNow(); err != nil {
		return nil, err
	}
	p.Started = time.Now()

	// attachOne attaches p.progs[i] to target.
	attachOne := func(i int, target string) error {
		name, prog := p.specs[i].Name, p.progs[i]
		var l link.Link
		var err error
		if testAttachFault != nil {
			if err := testAttachFault(name); err != nil {
				return fmt.Errorf("attach %s to %s: %w", name, target, err)
			}
		}
		switch h {
		case HookFentry:
			l, err = link.AttachTracing(link.TracingOptions{Program: prog})
		case HookTracepoint:
			l, err = link.Tracepoint(tracepointGrp, target, prog, nil)
		case HookTpBTF:
			l, err = link.AttachTracing(link.TracingOptions{Program: prog})
		case HookRawTP:
			l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: target, Program: prog})
		}
		if err != nil {
			return fmt.Errorf("attach %s to %s: %w", name, target, err)
		}
		p.links = append(p.links, l)
		return nil
	}
	switch h {
	case HookFentry:
		p.HookDetail = "fentry/fexit on " + syscallFunc64
		for i := range 2 {
			if err := attachOne(i, syscallFunc64); err != nil {
				return nil, err
			}
		}
		if compat {
			// 32-bit processes are a bonus: without them the probe
			// still works, and says so.
			n := len(p.links)
			err1 := attachOne(2, syscallFunc32)
			var err2 error
			if err1 == nil {
				err2 = attachOne(3, syscallFunc32)
			}
			if err := errors.Join(err1, err2); err != nil {
				for _, l := range p.links[n:] {
					l.Close()
				}
				p.links = p.links[:n]
				p.Notes = append(p.Notes, "32-bit processes are not traced: "+loader.CleanError(err))
			} else {
				p.HookDetail += " and " + syscallFunc32
			}
		} else {
			p.Notes = append(p.Notes, "32-bit processes are not traced: "+syscallFunc32+" is not in the kernel's BTF")
		}
	case HookTracepoint:
		p.HookDetail = fmt.Sprintf("tracepoints %s:%s and %s:%s, which do not report 32-bit processes",
			tracepointGrp, syscallTracepoints[0], tracepointGrp, syscallTracepoints[1])
		for i := range progs {
			if err := attachOne(i, syscallTracepoints[i]); err != nil {
				return nil, err
			}
		}
	case HookTpBTF, HookRawTP:
		p.HookDetail = fmt.Sprintf("%s/sys_enter and %s/sys_exit, filtered by syscall number", h, h)
		for i := range progs {
			if err := attachOne(i, []string{"sys_enter", "sys_exit"}[i]); err != nil {
				return nil, err
			}
		}
	}
	if cfg.Wakeups {
		for i, prog := range p.progs[p.nHook:] {
			l, err := link.AttachTracing(link.TracingOptions{Program: prog})
			if err != nil {
				return nil, fmt.Errorf("attach %s to follow calls through their sleeps: %w", p.specs[p.nHook+i].Name, err)
			}
			p.links = append(p.links, l)
		}
		p.HookDetail += "; sleeps followed on tp_btf/sched_switch and sched_waking"
	}
	if p.ring, err = ringbuf.NewReader(p.objs.IoctlEvents); err != nil {
		return nil, fmt.Errorf("open the slow-call ring buffer: %w", err)
	}
	if cfg.MeasureCost {
		if p.stats, err = loader.EnableRunTimeStats(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// configure writes cfg and its filters f into the object before anything
// is loaded: the globals its programs read as constants, and its maps'
// sizes.
func configure(specs *bpf.IoctlSpecs, cfg Config, f filters) error {
	var comm [16]byte
	copy(comm[:], f.comm)
	v := &specs.IoctlVariableSpecs
	if err := loader.SetVariables(map[*ebpf.VariableSpec]any{
		v.FilterTgid:    f.tgid,
		v.FilterCommLen: uint32(len(f.comm)),
		v.FilterComm:    comm,
		v.FilterDevOn:   f.devOn,
		v.FilterDev:     f.dev,
		v.SlowOn:        cfg.StreamSlow,
		v.WakeupsOn:     cfg.Wakeups,
		v.SlowNs:        uint64(cfg.Slow.Nanoseconds()),
		v.MaxCmdsPerDev: uint32(KernelCommandsPerDevice),
	}); err != nil {
		return err
	}
	m := &specs.IoctlMapSpecs
	if cfg.RingBufferBytes > 0 {
		m.IoctlEvents.MaxEntries = uint32(cfg.RingBufferBytes)
	}
	if cfg.maxKeys > 0 {
		for _, ms := range []*ebpf.MapSpec{m.IoctlStats, m.IoctlHist, m.IoctlErrno} {
			ms.MaxEntries = cfg.maxKeys
		}
	}
	return nil
}

// loadError says why the kernel would not load the programs of hook h (or
// their maps): a verifier error by its last line.
func loadError(h Hook, err error) error {
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		return fmt.Errorf("the verifier rejected the %s programs: %s", h, loader.LastVerifierLine(verr.Log))
	}
	return fmt.Errorf("load the %s programs: %w", h, err)
}

// Detach stops the probe from seeing new calls; what it counted stays
// readable until Close.
func (p *Probe) Detach() error {
	if p.links != nil && p.detached.IsZero() {
		p.detached = time.Now()
	}
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	p.links = nil
	return errors.Join(errs...)
}

// Close detaches the probe and frees everything it loaded. It may be
// called more than once.
func (p *Probe) Close() error {
	errs := []error{p.Detach()}
	if p.ring != nil {
		errs = append(errs, p.ring.Close())
		p.ring = nil
	}
	if p.stats != nil {
		errs = append(errs, p.stats.Close())
		p.stats = nil
	}
	errs = append(errs, loader.ClosePrograms(p.progs...), p.objs.Close())
	p.progs, p.nHook, p.objs = nil, 0, probeObjects{}
	return errors.Join(errs...)
}
