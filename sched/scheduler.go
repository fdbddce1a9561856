package sched

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/internal/cstr"
	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/topology"
)

// Limits of the knobs Load accepts.
const (
	DefaultTimeout    = 5 * time.Second
	MaxTimeout        = 30 * time.Second // the kernel's SCX_WATCHDOG_MAX_TIMEOUT
	DefaultStarvation = 10 * time.Millisecond
	structOpsName     = "hotlane_ops"
)

// Config is what Load needs to start the scheduler.
type Config struct {
	// Table is the compiled policy (policy.Policy.Compile).
	Table *policy.Table
	// Partial schedules only tasks that chose SCHED_EXT
	// (SCX_OPS_SWITCH_PARTIAL); otherwise every normal task.
	Partial bool
	// Timeout is the sched_ext watchdog: a runnable task that waits this
	// long makes the kernel eject the scheduler. 0 means DefaultTimeout.
	Timeout time.Duration
	// Starvation bounds how long the fair queue waits while high-priority
	// tasks keep every CPU busy. 0 means DefaultStarvation.
	Starvation time.Duration
	// DebugErrorAfter makes the BPF code call scx_bpf_error() after this
	// many enqueues; for testing the error path only.
	DebugErrorAfter uint64
	// MeasureCost turns on the kernel's BPF run-time statistics while the
	// scheduler runs, for Cost. It adds two clock reads to every callback.
	MeasureCost bool
	// BTF caches the running kernel's BTF across loads (a restart); nil
	// reads it afresh. Parsing it is the dearest part of a start after
	// the verifier: the scheduler reads it, and so does cilium/ebpf,
	// which is given the same cache.
	BTF *btf.Cache
	// Progress, if set, is told what Load is doing when a step takes
	// longer than ProgressAfter (the verifier, on a big machine), so that
	// a start does not look hung.
	Progress io.Writer
	// CPUs, if not 0, is the CPU count written into the object instead of
	// the machine's, in as many LLCs as it handles: Verify checks the
	// scheduler for a machine of any size on this one.
	CPUs int
}

// ProgressAfter is how long a step of Load runs before Config.Progress
// hears of it.
const ProgressAfter = time.Second

// Tick is the running kernel's scheduler tick (1/HZ): the resolution of
// its coarse clock, which advances once per tick.
func Tick() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		return 0, fmt.Errorf("scheduler tick: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// Scheduler is a loaded and enabled hotlane scheduler.
type Scheduler struct {
	coll      *loader.Collection
	objs      schedObjects // in coll, which closes them
	link      link.Link
	devLinks  []link.Link // the device matchers' hooks, if the policy has any
	stats     io.Closer   // BPF run-time statistics, with Config.MeasureCost
	classes   []string
	exitKinds map[int64]string
	header    report.Header // of every Stats, from when it was enabled
	// Object names the kfunc generation that was loaded (612, 613, 700).
	Object string
	// Load is what loading and enabling it took.
	Load LoadStats
	// Topology is the machine's CPUs as the scheduler sees them.
	Topology *topology.Topology
}

// Load checks the kernel, loads the scheduler object that matches its
// sched_ext kfuncs with the policy written into it, and enables it. On any
// error nothing stays loaded.
func Load(cfg Config) (*Scheduler, error) {
	l, err := loadCollection(cfg)
	if err != nil {
		return nil, err
	}
	return l.enable(cfg)
}

// loaded is a verified scheduler collection, not yet enabled.
type loaded struct {
	coll   *loader.Collection
	objs   schedObjects
	hooks  deviceHooks // loaded for a policy with device matchers only
	kernel *btf.Spec
	object string
	topo   *topology.Topology
	stats  LoadStats
}

// loadCollection does everything Load does before enabling: checks, the
// object for this kernel configured for the policy, and the verifier.
func loadCollection(cfg Config) (*loaded, error) {
	started := time.Now()
	// A load allocates tens of MB that die with it (the kernel's BTF as
	// cilium/ebpf inflates it, the object's ELF), while a fresh process's
	// heap target is 4 MB: the collector ran four times during a start of
	// `hotlane run`, marking for 50-110 ms each time on a 2-vCPU guest.
	// It is off until the load ends (the heap stays under 20 MB): starts
	// to enabled took 1.34-1.67 s against 1.44-1.63 s (median 1.46 s
	// against 1.59 s), alternating in one boot.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if cfg.Table == nil {
		return nil, errors.New("sched: no policy")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Starvation == 0 {
		cfg.Starvation = DefaultStarvation
	}
	if cfg.Timeout < 100*time.Millisecond || cfg.Timeout > MaxTimeout {
		return nil, fmt.Errorf("watchdog timeout %s out of range: use 100ms to %s", cfg.Timeout, MaxTimeout)
	}
	if cfg.Starvation < time.Millisecond || cfg.Starvation > cfg.Timeout/2 {
		return nil, fmt.Errorf("starvation bound %s out of range: use 1ms to half the watchdog timeout (%s)", cfg.Starvation, cfg.Timeout/2)
	}

	status, err := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
	if err != nil {
		return nil, err
	}
	if !status.Present {
		return nil, ErrNoSchedExt
	}
	if err := loader.RequireCapabilities("CAP_BPF", "CAP_SYS_ADMIN"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPermission, err)
	}
	if status.State != "disabled" {
		return nil, fmt.Errorf("%w: %q is %s; stop it first", ErrOtherScheduler, status.Ops, status.State)
	}

	cache := cfg.BTF
	if cache == nil {
		cache = btf.NewCache()
	}
	// The kernel's BTF, a good part of the start on a small machine, is
	// read beside the topology and the newest object's ELF, which is
	// what a current kernel loads.
	kch := make(chan kernelInfo, 1)
	go func() { kch <- readKernel(cache, started) }()
	newest, newestErr := objectLoad(newestObject)()
	topo, topoErr := topology.Read(topology.SysfsRoot)
	kb := <-kch
	if kb.err != nil {
		return nil, kb.err
	}
	if topoErr != nil {
		return nil, topoErr
	}
	kernel := kb.spec
	var stats LoadStats
	stats.KernelBTF = kb.took
	obj, err := objectFor(kb.kfuncs)
	if err != nil {
		return nil, err
	}
	spec, err := newest, newestErr
	if obj.name != newestObject {
		spec, err = obj.load()
	}
	if err != nil {
		return nil, fmt.Errorf("read scheduler object %s: %w", obj.name, err)
	}
	if err := configure(spec, cfg, kernel, topo); err != nil {
		return nil, err
	}

	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise RLIMIT_MEMLOCK: %w", err)
	}
	stats.Prepare = time.Since(started) - stats.KernelBTF
	verifying := time.Now()
	done := progress(cfg.Progress, fmt.Sprintf("the kernel is verifying the scheduler (object %s)", obj.name))
	coll, err := loader.NewCollectionParallel(spec, ebpf.CollectionOptions{Cache: cache}, runtime.NumCPU())
	done()
	stats.Verify = time.Since(verifying)
	if err != nil {
		if cfg.Table.HasDeviceRules() && strings.Contains(err.Error(), "program hl_device_") {
			return nil, fmt.Errorf("%w: %v", ErrDeviceHooks, err)
		}
		return nil, explainLoadError(err)
	}
	stats.Programs = verifiedInstructions(coll.Programs)
	l := &loaded{coll: coll, kernel: kernel, object: obj.name, topo: topo, stats: stats}
	err = coll.Assign(&l.objs)
	if err == nil && cfg.Table.HasDeviceRules() {
		err = coll.Assign(&l.hooks)
	}
	if err != nil {
		coll.Close()
		return nil, fmt.Errorf("scheduler object %s: %w", obj.name, err)
	}
	return l, nil
}

// kernelInfo is the running kernel's BTF and the scx kfuncs it has.
type kernelInfo struct {
	spec   *btf.Spec
	kfuncs loader.Kfuncs
	took   time.Duration // from the start to the BTF parsed
	err    error
}

func readKernel(cache *btf.Cache, started time.Time) kernelInfo {
	kernel, err := cache.Kernel()
	if err != nil {
		return kernelInfo{err: fmt.Errorf("kernel BTF: %w", err)}
	}
	took := time.Since(started)
	kfuncs, err := loader.KfuncsFromBTF(kernel)
	if err != nil {
		return kernelInfo{err: fmt.Errorf("%w: %v", ErrUnsupportedKernel, err)}
	}
	return kernelInfo{spec: kernel, kfuncs: kfuncs, took: took}
}

// enable attaches the device hooks and the struct_ops map of a loaded
// collection. On error nothing stays loaded.
func (l *loaded) enable(cfg Config) (*Scheduler, error) {
	coll := l.coll
	var stats io.Closer
	var err error
	if cfg.MeasureCost {
		if stats, err = loader.EnableRunTimeStats(); err != nil {
			coll.Close()
			return nil, err
		}
	}
	enabling := time.Now()
	// Device uses are noted before the policy acts on them.
	devLinks, err := l.hooks.attach()
	if err != nil {
		if stats != nil {
			stats.Close()
		}
		coll.Close()
		return nil, err
	}
	done := progress(cfg.Progress, "the kernel is switching tasks to the scheduler")
	ops, err := link.AttachStructOps(link.StructOpsOptions{Map: l.objs.Ops})
	done()
	if err != nil {
		closeLinks(devLinks)
		if stats != nil {
			stats.Close()
		}
		coll.Close()
		return nil, explainAttachError(err)
	}
	l.stats.Enable = time.Since(enabling)
	return &Scheduler{
		coll:      coll,
		objs:      l.objs,
		link:      ops,
		devLinks:  devLinks,
		stats:     stats,
		classes:   cfg.Table.Names,
		exitKinds: exitKindNames(l.kernel),
		header:    report.NewHeader("run", time.Now()),
		Object:    l.object,
		Load:      l.stats,
		Topology:  l.topo,
	}, nil
}

// Verify loads the scheduler object for this kernel, configured as Load
// would (for cfg.CPUs CPUs, when set), through the verifier, and unloads
// it without enabling it: what the scheduler costs the verifier, on a
// machine of any size.
func Verify(cfg Config) (LoadStats, error) {
	l, err := loadCollection(cfg)
	if err != nil {
		return LoadStats{}, err
	}
	l.coll.Close()
	return l.stats, nil
}

// progress writes what to w, with the time so far, once ProgressAfter has
// passed and then every ProgressAfter, until done is called.
func progress(w io.Writer, what string) (done func()) {
	if w == nil {
		return func() {}
	}
	start := time.Now()
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(ProgressAfter)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Fprintf(w, "hotlane: %s (%.0fs)\n", what, time.Since(start).Seconds())
			}
		}
	}()
	return func() {
		close(stop)
		<-finished
	}
}

// configure writes the policy and knobs into the object's read-only data
// and the struct_ops value, before load.
func configure(spec *ebpf.CollectionSpec, cfg Config, kernel *btf.Spec, topo *topology.Topology) error {
	if cfg.CPUs != 0 {
		// As many LLCs as the scheduler handles, or one a CPU.
		topo = topology.Uniform(cfg.CPUs, max(1, cfg.CPUs/MaxLLCs))
	}
	layout, err := newCPULayout(topo)
	if err != nil {
		return err
	}
	var specs schedSpecs
	if err := spec.Assign(&specs); err != nil {
		return fmt.Errorf("scheduler object: %w", err)
	}
	tick, err := Tick()
	if err != nil {
		return err
	}
	vars := map[*ebpf.VariableSpec]any{
		specs.Classes:         cfg.Table.ClassesArray(),
		specs.DebtBudgetNs:    uint64(cfg.Bound(tick).DebtBudget().Nanoseconds()),
		specs.StarvationNs:    uint64(cfg.Starvation.Nanoseconds()),
		specs.MinSliceNs:      uint64(DefaultMinSlice.Nanoseconds()),
		specs.NiceWeight:      niceWeights(),
		specs.DebugErrorAfter: cfg.DebugErrorAfter,
	}
	layout.variables(&specs.layoutSpecs, vars)
	// The classifier's settings, under the names the tracer writes them
	// by too (classify.bpf.h is shared).
	for name, v := range cfg.Table.BPFVariables() {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("scheduler object lacks variable %s", name)
		}
		vars[vs] = v
	}
	if err := loader.SetVariables(vars); err != nil {
		return err
	}
	if !cfg.Table.HasDeviceRules() {
		// Nothing to note: the device hooks are not even loaded.
		delete(spec.Programs, specs.DeviceOpen.Name)
		delete(spec.Programs, specs.DeviceIoctl.Name)
	}

	// An object that enforces cpu.max has the kernel ask it before it
	// keeps a CPU's last task running, so that one out of quota is held.
	_, quotas := spec.Programs["hl_cgroup_set_bandwidth"]
	flags, err := opsFlags(kernel, cfg.Partial, quotas)
	if err != nil {
		return err
	}
	return patchStructOps(specs.Ops, map[string]uint64{
		"flags":      flags,
		"timeout_ms": uint64(cfg.Timeout.Milliseconds()),
	})
}

// opsFlags returns sched_ext_ops.flags for the kernel: SWITCH_PARTIAL when
// partial, ENQ_LAST when enqLast (cpu.max: the kernel would keep a CPU's
// last task running whatever its quota), and ENQ_MIGRATION_DISABLED where
// the kernel has it (6.15 on).
// Without that flag, 6.15-6.18 queue every migration-disabled task on its
// CPU without asking ops.enqueue, and to them the task cpu_release hands
// back is one: a lane task preempted by an RT task would wait out the RT
// task's burst (migration_disabled in sched_ctx.bpf.h tells the two apart).
func opsFlags(kernel *btf.Spec, partial, enqLast bool) (uint64, error) {
	var flags uint64
	for _, f := range []struct {
		name string
		on   bool
	}{{"SCX_OPS_SWITCH_PARTIAL", partial}, {"SCX_OPS_ENQ_LAST", enqLast}} {
		if !f.on {
			continue
		}
		v, err := loader.EnumValue(kernel, "scx_ops_flags", f.name)
		if err != nil {
			return 0, err
		}
		flags |= v
	}
	v, err := loader.EnumValue(kernel, "scx_ops_flags", "SCX_OPS_ENQ_MIGRATION_DISABLED")
	switch {
	case err == nil:
		flags |= v
	case !errors.Is(err, loader.ErrEnumNotFound):
		return 0, err
	}
	return flags, nil
}

// attach attaches the device hooks that were loaded (none for a policy
// without device matchers), open first. On error none stays attached.
func (h *deviceHooks) attach() ([]link.Link, error) {
	var links []link.Link
	for _, hook := range []struct {
		name string // in sched.bpf.c, for the error
		prog *ebpf.Program
	}{{"hl_device_open", h.Open}, {"hl_device_ioctl", h.Ioctl}} {
		if hook.prog == nil {
			continue
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: hook.prog})
		if err != nil {
			closeLinks(links)
			return nil, fmt.Errorf("%w: attach %s: %v", ErrDeviceHooks, hook.name, err)
		}
		links = append(links, l)
	}
	return links, nil
}

func closeLinks(links []link.Link) {
	for _, l := range links {
		l.Close()
	}
}

// patchStructOps overwrites integer members of the struct_ops value, found
// by name in its BTF. cilium/ebpf copies members by name into the running
// kernel's layout at load.
func patchStructOps(ms *ebpf.MapSpec, values map[string]uint64) error {
	if ms == nil || len(ms.Contents) != 1 {
		return fmt.Errorf("scheduler object lacks the %s struct_ops map", structOpsName)
	}
	st, ok := ms.Value.(*btf.Struct)
	if !ok {
		return fmt.Errorf("%s: value type %T is not a struct", structOpsName, ms.Value)
	}
	data, ok := ms.Contents[0].Value.([]byte)
	if !ok {
		return fmt.Errorf("%s: unexpected contents %T", structOpsName, ms.Contents[0].Value)
	}
	data = bytes.Clone(data)
	for name, v := range values {
		var m *btf.Member
		for i := range st.Members {
			if st.Members[i].Name == name {
				m = &st.Members[i]
			}
		}
		if m == nil {
			return fmt.Errorf("struct %s has no member %s", st.Name, name)
		}
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			return err
		}
		off := int(m.Offset.Bytes())
		switch size {
		case 4:
			binary.LittleEndian.PutUint32(data[off:], uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(data[off:], v)
		default:
			return fmt.Errorf("%s.%s: unexpected size %d", st.Name, name, size)
		}
	}
	ms.Contents[0].Value = data
	return nil
}

// exitKindNames maps enum scx_exit_kind values to their names, from the
// kernel's own BTF.
func exitKindNames(kernel *btf.Spec) map[int64]string {
	names := map[int64]string{}
	var e *btf.Enum
	if kernel.TypeByName("scx_exit_kind", &e) == nil {
		for _, v := range e.Values {
			names[int64(v.Value)] = v.Name
		}
	}
	return names
}

// Classes returns the class names, indexed by class id.
func (s *Scheduler) Classes() []string { return s.classes }

// ExitInfo is why the scheduler ended, as the kernel reported it to ops.exit.
type ExitInfo struct {
	Kind     int64  `json:"kind"`
	KindName string `json:"kind_name"`
	ExitCode int64  `json:"exit_code"`
	Reason   string `json:"reason"`
	Message  string `json:"message,omitempty"`
	// Dump is the kernel's account of what every CPU and queue held at
	// an error exit (a watchdog stall names the task that waited), as
	// much as fits in 16 KiB.
	Dump string `json:"dump,omitempty"`
}

// IsError reports whether the exit was an error (SCX_EXIT_ERROR and up:
// scx_bpf_error, a watchdog stall, …) rather than an orderly unload.
func (e ExitInfo) IsError() bool { return e.Kind >= 1024 }

func (e ExitInfo) String() string {
	s := fmt.Sprintf("%s (%d)", e.KindName, e.Kind)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// WriteReport writes why the scheduler ended: at an error exit the
// kernel's dump first, then the exit itself as the last line, where a
// terminal leaves it in view below pages of dump and a supervisor that
// keeps a program's last line (hotlane bench does) finds the reason, not
// the dump's last event counter.
func (e ExitInfo) WriteReport(w io.Writer) error {
	var b strings.Builder
	if e.IsError() && e.Dump != "" {
		fmt.Fprintf(&b, "hotlane: the kernel's dump at the exit:\n%s\n", e.Dump)
	}
	fmt.Fprintf(&b, "hotlane: scheduler exited: %s\n", e)
	_, err := io.WriteString(w, b.String())
	return err
}

// exitRecord mirrors struct hl_exit_info in sched.bpf.c.
type exitRecord struct {
	Kind     int64
	ExitCode int64
	Reason   [128]byte
	Msg      [1024]byte
	Dump     [16384]byte
}

// Exited returns the exit information once the kernel has ended the
// scheduler (an error, the watchdog, sysrq-S), and false while it runs.
func (s *Scheduler) Exited() (ExitInfo, bool, error) {
	var rec exitRecord
	if err := s.objs.ExitInfo.Get(&rec); err != nil {
		return ExitInfo{}, false, fmt.Errorf("read exit info: %w", err)
	}
	if rec.Kind == 0 {
		return ExitInfo{}, false, nil
	}
	name := s.exitKinds[rec.Kind]
	if name == "" {
		name = "SCX_EXIT_?"
	}
	return ExitInfo{
		Kind:     rec.Kind,
		KindName: name,
		ExitCode: rec.ExitCode,
		Reason:   strings.TrimSpace(cstr.String(rec.Reason[:])),
		Message:  strings.TrimSpace(cstr.String(rec.Msg[:])),
		Dump:     strings.TrimSpace(cstr.String(rec.Dump[:])),
	}, true, nil
}

// Close disables the scheduler, unloads it and returns why it ended.
func (s *Scheduler) Close() (ExitInfo, error) {
	errLink := s.link.Close()
	closeLinks(s.devLinks)
	info, _, errExit := s.Exited()
	if s.stats != nil {
		s.stats.Close()
	}
	s.coll.Close()
	return info, errors.Join(errLink, errExit)
}

// Cost is each callback's run count and run time so far: what the policy
// costs the CPUs it schedules.
func (s *Scheduler) Cost() ([]report.ProgramCost, error) {
	if s.stats == nil {
		return nil, ErrNoCost
	}
	return loader.Costs(s.coll.Programs)
}

// explainLoadError keeps the verifier's last lines, ending with the one
// that says what it rejected, instead of the whole log.
func explainLoadError(err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		log := loader.VerifierExcerpt(ve.Log, 24)
		// cilium/ebpf names the program before the verifier's words.
		where, _, _ := strings.Cut(err.Error(), ": "+ve.Cause.Error())
		return fmt.Errorf("the kernel's verifier rejected the scheduler (%s): %v\n  %s", where, ve.Cause, strings.Join(log, "\n  "))
	}
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: %v", ErrPermission, err)
	}
	return fmt.Errorf("load scheduler: %w", err)
}

func explainAttachError(err error) error {
	if errors.Is(err, os.ErrExist) || strings.Contains(err.Error(), "file exists") {
		status, _ := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
		return fmt.Errorf("%w: %q took sched_ext first", ErrOtherScheduler, status.Ops)
	}
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: %v", ErrPermission, err)
	}
	return fmt.Errorf("enable scheduler: %w", err)
}
