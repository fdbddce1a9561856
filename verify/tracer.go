package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/internal/cstr"
	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
)

// Hook families the tracer can attach with.
const (
	HookTpBTF = "tp_btf" // typed tracepoints, task-local stamps
	HookRawTP = "raw_tp" // fallback: untyped, pid-keyed stamps
)

// TracerConfig says what to trace.
type TracerConfig struct {
	// Table is the compiled policy: the tracer classifies like the
	// scheduler.
	Table *policy.Table
	// Thresholds streams each wait above the class's threshold as a
	// Violation; classes without one stream nothing. ThresholdViews says
	// which view of a wait a class's threshold compares (ViewFelt unless
	// given).
	Thresholds     map[string]time.Duration
	ThresholdViews map[string]View
	// FilterTGID and FilterComm (a prefix) restrict the tracer to one
	// process or to matching threads; zero values trace everything.
	FilterTGID uint32
	// FilterTIDs restricts it to these threads (at most MaxFilterTIDs),
	// with the other filters.
	FilterTIDs []uint32
	FilterComm string
	// PerTask keeps histograms per task (the wait and the felt view),
	// for up to MaxTasks tasks (default 1024, about 16 KiB each); samples of tasks beyond that are
	// counted as dropped from the per-task view.
	PerTask  bool
	MaxTasks int
	// RingBufferBytes sizes the violation stream (a power of two of at
	// least one page); 0 means 256 KiB.
	RingBufferBytes int
	// Hook forces HookTpBTF or HookRawTP; empty picks tp_btf and falls
	// back to raw_tp when it cannot attach.
	Hook string
	// MeasureCost turns on the kernel's BPF run-time statistics, which
	// Cost reports. They are global: while on, every BPF program on the
	// machine pays two clock reads a run, a sched_ext scheduler's
	// callbacks included. Leave it off where schedulers are compared.
	MeasureCost bool
	// Explain keeps each CPU's recent history (the tasks that had it,
	// their scheduling class, its hardirq and softirq time) so that each
	// violation says where its wait went. It costs a little on every
	// context switch and interrupt; without thresholds it has nothing to
	// explain.
	Explain bool
	// ExtCallbacks, with Explain, also times the callbacks of the
	// sched_ext scheduler loaded when the tracer attaches (fentry/fexit
	// on each), so that explanations say how much of a wait went to
	// them. It taxes every callback run: 1.5 us per run, about 7 us per
	// traced event, in the TCG VM (verify --json cost of rq_ext_cb_*).
	ExtCallbacks bool
	// WaitOnly attaches none of the hooks behind the felt view (timer
	// expiry, the sleep calls' return): every wait then has no known
	// cause, felt is the wait, and timer interrupts and sleeps cost the
	// tracer nothing.
	WaitOnly bool
}

// Selection describes the tasks the filters select, as the reports name
// them ("pid 1234", "tids 7, 8 and comm prefix \"infer\""), or "" when
// they select every task.
func (c TracerConfig) Selection() string {
	var parts []string
	if c.FilterTGID != 0 {
		parts = append(parts, fmt.Sprintf("pid %d", c.FilterTGID))
	}
	if len(c.FilterTIDs) > 0 {
		tids := make([]string, len(c.FilterTIDs))
		for i, tid := range c.FilterTIDs {
			tids[i] = fmt.Sprint(tid)
		}
		name := "tid "
		if len(tids) > 1 {
			name = "tids "
		}
		parts = append(parts, name+strings.Join(tids, ", "))
	}
	if c.FilterComm != "" {
		parts = append(parts, fmt.Sprintf("comm prefix %q", c.FilterComm))
	}
	return strings.Join(parts, " and ")
}

// FeltEnd says where the tracer ends a felt wait, which depends on what
// the kernel let it hook.
type FeltEnd string

const (
	// FeltToReturn ends a timer-caused wait when the sleep call returns
	// (fexit on hrtimer_nanosleep and schedule_hrtimeout_range_clock):
	// the context switch's own tail and the way out of the call count,
	// as they do for the application.
	FeltToReturn FeltEnd = "return"
	// FeltToSwitchIn ends it at the switch-in, like the wait: the kernel
	// refused fexit (or the tracer runs on raw_tp).
	FeltToSwitchIn FeltEnd = "switch-in"
	// FeltOff: no cause is looked for (TracerConfig.WaitOnly).
	FeltOff FeltEnd = "off"
)

// A View is one way to measure a wait: from where it starts to the
// switch that ends it.
type View string

const (
	// ViewFelt measures from the wake-up's cause where the kernel tells
	// it, else from the wake-up: what the application feels. The cause
	// known today is a sleeping task's own timer (nanosleep,
	// clock_nanosleep, poll and epoll timeouts): such a wait starts at
	// the timer's expiry, and the interrupt's delivery counts.
	ViewFelt View = "felt"
	// ViewWait measures from the wake-up (sched_waking) or the
	// preemption, as runqlat does: the run queue alone.
	ViewWait View = "wait"
)

// Views are the views a bound can check, the default first.
var Views = []View{ViewFelt, ViewWait}

// index is the view's HL_THRESHOLD_* number.
func (v View) index() uint8 {
	if v == ViewWait {
		return 0
	}
	return 1
}

// The BPF side's histogram rows (enum hl_row): disjoint sets of waits,
// added up into the views here.
const (
	bpfRowWait       = iota // no known cause: the wait, which is also what it felt
	bpfRowCausedWait        // a known cause: the wait from the wake-up
	bpfRowCausedFelt        // a known cause: from it
	bpfRowDelivery          // a known cause: from it to the wake-up
	bpfRows
)

// MaxFilterTIDs is how many threads TracerConfig.FilterTIDs may name.
const MaxFilterTIDs = 16

// Tracer is an attached run-queue latency tracer.
type Tracer struct {
	// objs are the maps and globals every part of the tracer shares;
	// shared are the same by name, to load the parts on; btf holds the
	// kernel's BTF, read once for every part.
	objs   tracerObjects
	shared map[string]*ebpf.Map
	btf    *btf.Cache
	// parts are its programs, a collection each, in the order they
	// load and attach (see family).
	parts   []*part
	ring    *ringbuf.Reader
	stats   io.Closer
	classes []string
	// measureCost says run-time statistics were asked for.
	measureCost bool
	// Hook is the hook family in use.
	Hook string
	// FeltEnd is where felt waits end; FeltNote says why not at the
	// return, if not.
	FeltEnd  FeltEnd
	FeltNote string
	// CallbacksTimed counts the sched_ext scheduler's callbacks timed for
	// the explanations (ExtCallbacks); CallbacksNote says why none are.
	CallbacksTimed int
	CallbacksNote  string
	// BypassNote says why the hook on sched_ext's bypass mode is missing
	// when explaining on a kernel with sched_ext, if it is (then
	// explanations cannot tell a bypass).
	BypassNote string
	// Started is when the tracer was attached.
	Started time.Time
	// switches holds the hook's count of switches against the kernel's.
	switches switchAudit
}

// tracerObjects are the tracer's maps and globals, created (LoadAndAssign)
// before any program: every part's programs load on them. The .rodata
// and .bss maps hold the globals, which the parts must share too.
type tracerObjects struct {
	bpf.RunqlatMaps
	bpf.RunqlatVariables
	Rodata *ebpf.Map `ebpf:".rodata"`
	Bss    *ebpf.Map `ebpf:".bss"`
}

func (o *tracerObjects) Close() error { return loader.CloseMaps(o) }

// ErrBadTracerConfig is returned for configurations Attach refuses.
var ErrBadTracerConfig = errors.New("bad tracer configuration")

// A family is one way to hook the scheduler's events, with its programs
// for each part of the tracer, each part's in the order they attach
// (where to, each program's section says: ProgramSpec.AttachTo). The
// parts attach in the order of the fields: first the ones that start
// waits, so that no task the tracer has seen leave the CPU can be woken
// unseen while the tracer attaches (and a timer's expiry is noted before
// its wake-up can be seen), and the interrupt hooks, so that sched_switch
// never sees a CPU whose interrupt time is not counted. Stop detaches in
// the opposite order.
type family struct {
	attach func(prog *ebpf.Program, target string) (link.Link, error)
	// taskStorage says the family's task pointers are trusted, so that
	// it can keep task storage, which device matchers and felt waits that
	// end at the sleep call's return need.
	taskStorage bool
	frees       []*ebpf.ProgramSpec // forgetting freed tasks (raw_tp keeps their state by pid)
	causes      []*ebpf.ProgramSpec // timer expiries, the felt view's causes (unless WaitOnly)
	interrupts  []*ebpf.ProgramSpec // hardirq and softirq time (Explain)
	events      []*ebpf.ProgramSpec // the starts and ends of waits
	bypass      []*ebpf.ProgramSpec // sched_ext's bypass mode (Explain, with sched_ext; optional)
}

// families are the hook families over the object's programs p.
func families(p *bpf.RunqlatProgramSpecs) map[string]family {
	return map[string]family{
		HookTpBTF: {
			attach:      attachTracing,
			taskStorage: true,
			causes:      []*ebpf.ProgramSpec{p.RqTimerExitBtf, p.RqTimerBtf},
			interrupts:  []*ebpf.ProgramSpec{p.RqIrqEntryBtf, p.RqIrqExitBtf, p.RqSoftirqEntryBtf, p.RqSoftirqExitBtf},
			events:      []*ebpf.ProgramSpec{p.RqWakingBtf, p.RqWakeupNewBtf, p.RqSwitchBtf},
			bypass:      []*ebpf.ProgramSpec{p.RqExtEventBtf},
		},
		HookRawTP: {
			attach: func(prog *ebpf.Program, tracepoint string) (link.Link, error) {
				return link.AttachRawTracepoint(link.RawTracepointOptions{Name: tracepoint, Program: prog})
			},
			frees:      []*ebpf.ProgramSpec{p.RqFreeRaw},
			causes:     []*ebpf.ProgramSpec{p.RqTimerExitRaw, p.RqTimerRaw},
			interrupts: []*ebpf.ProgramSpec{p.RqIrqEntryRaw, p.RqIrqExitRaw, p.RqSoftirqEntryRaw, p.RqSoftirqExitRaw},
			events:     []*ebpf.ProgramSpec{p.RqWakingRaw, p.RqWakeupNewRaw, p.RqSwitchRaw},
			bypass:     []*ebpf.ProgramSpec{p.RqExtEventRaw},
		},
	}
}

// attachTracing attaches a tp_btf, fentry or fexit program where it was
// loaded for (its section, or its AttachTarget).
func attachTracing(prog *ebpf.Program, _ string) (link.Link, error) {
	return link.AttachTracing(link.TracingOptions{Program: prog})
}

// Attach loads the tracer and attaches it to the scheduler tracepoints.
// On any error nothing stays attached.
func Attach(cfg TracerConfig) (*Tracer, error) {
	// What attach() sets up, checked before anything is loaded.
	var views [policy.MaxClasses]uint8
	for i := range views {
		views[i] = ViewFelt.index()
	}
	if cfg.Table == nil {
		return nil, fmt.Errorf("%w: no policy", ErrBadTracerConfig)
	}
	if len(cfg.FilterComm) > policy.MaxCommLen {
		return nil, fmt.Errorf("%w: comm filter %q is longer than %d bytes", ErrBadTracerConfig, cfg.FilterComm, policy.MaxCommLen)
	}
	if cfg.RingBufferBytes != 0 && (cfg.RingBufferBytes < os.Getpagesize() || cfg.RingBufferBytes&(cfg.RingBufferBytes-1) != 0) {
		return nil, fmt.Errorf("%w: ring buffer size %d: use a power of two of at least %d", ErrBadTracerConfig, cfg.RingBufferBytes, os.Getpagesize())
	}
	if len(cfg.FilterTIDs) > MaxFilterTIDs {
		return nil, fmt.Errorf("%w: %d threads to trace: at most %d", ErrBadTracerConfig, len(cfg.FilterTIDs), MaxFilterTIDs)
	}
	for _, tid := range cfg.FilterTIDs {
		if tid == 0 {
			return nil, fmt.Errorf("%w: thread id 0 is the idle task, which never waits", ErrBadTracerConfig)
		}
	}
	var thresholds [policy.MaxClasses]uint64
	for name, d := range cfg.Thresholds {
		i := indexOf(cfg.Table.Names, name)
		if i < 0 {
			return nil, fmt.Errorf("%w: bound for unknown class %q (classes: %v)", ErrBadTracerConfig, name, cfg.Table.Names)
		}
		thresholds[i] = uint64(d.Nanoseconds())
	}
	for name, v := range cfg.ThresholdViews {
		i := indexOf(cfg.Table.Names, name)
		if i < 0 {
			return nil, fmt.Errorf("%w: view for unknown class %q (classes: %v)", ErrBadTracerConfig, name, cfg.Table.Names)
		}
		if !slices.Contains(Views, v) {
			return nil, fmt.Errorf("%w: view %q for class %q: use one of %v", ErrBadTracerConfig, v, name, Views)
		}
		views[i] = v.index()
	}
	if err := loader.RequireCapabilities("CAP_BPF", "CAP_PERFMON"); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise RLIMIT_MEMLOCK: %w", err)
	}

	hooks := []string{HookTpBTF, HookRawTP}
	if cfg.Hook != "" {
		if cfg.Hook != HookTpBTF && cfg.Hook != HookRawTP {
			return nil, fmt.Errorf("%w: hook %q: use %s or %s", ErrBadTracerConfig, cfg.Hook, HookTpBTF, HookRawTP)
		}
		hooks = []string{cfg.Hook}
	}
	var errs []error
	for _, hook := range hooks {
		t, err := attach(cfg, thresholds, views, hook)
		if err == nil {
			return t, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", hook, err))
	}
	return nil, fmt.Errorf("attach the run-queue tracer: %w", errors.Join(errs...))
}

// attach loads the tracer for one hook family and attaches it: its maps
// and globals first (LoadAndAssign), then its programs in parts, each a
// collection of its own on those maps. What every trace needs fails the
// attach; a kernel that refuses an optional part leaves a note instead.
func attach(cfg TracerConfig, thresholds [policy.MaxClasses]uint64, views [policy.MaxClasses]uint8, hook string) (_ *Tracer, err error) {
	spec, err := bpf.LoadRunqlat()
	if err != nil {
		return nil, err
	}
	var specs bpf.RunqlatSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("the tracer's object: %w", err)
	}
	fam := families(&specs.RunqlatProgramSpecs)[hook]
	devices := cfg.Table.HasDeviceRules()
	if devices && !fam.taskStorage {
		// Task storage, where device uses are noted, needs trusted
		// task pointers: raw tracepoints have none.
		return nil, fmt.Errorf("%w: the policy's device matchers need the %s hooks; raw_tp cannot see which tasks use a device", ErrBadTracerConfig, HookTpBTF)
	}
	scx, err := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
	if err != nil {
		return nil, err
	}
	if err := configure(spec, &specs, cfg, thresholds, views, scx.Present, hook); err != nil {
		return nil, err
	}

	t := &Tracer{Hook: hook, classes: cfg.Table.Names, FeltEnd: FeltToSwitchIn}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("create the tracer's maps: %w", err)
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	t.shared = loader.MapsByName(&t.objs)
	t.btf = btf.NewCache()

	if err := t.attachRequired(spec, &specs.RunqlatProgramSpecs, fam, cfg.WaitOnly, cfg.Explain, devices); err != nil {
		return nil, err
	}
	// sched_switch is attached (the events part attaches last): its count
	// is held against the kernel's from here.
	c, _, err := t.counters()
	if err != nil {
		return nil, err
	}
	t.switches.start(procStat, c.Switches)
	if cfg.Explain {
		// sched_switch is attached: a CPU's first switch from now on
		// ends a run that began no later than this.
		now, err := loader.KtimeNow()
		if err != nil {
			return nil, err
		}
		if err := t.objs.HistorySinceNs.Set(now); err != nil {
			return nil, fmt.Errorf("set history_since_ns: %w", err)
		}
	}
	t.attachOptional(spec, &specs.RunqlatProgramSpecs, fam, cfg, scx.Present)
	if t.ring, err = ringbuf.NewReader(t.objs.Violations); err != nil {
		return nil, err
	}
	// Run-time statistics cost a little on every program run; they are
	// how the report states the tracer's own overhead. Where they cannot
	// be enabled the report says so.
	t.measureCost = cfg.MeasureCost
	if cfg.MeasureCost {
		if st, err := loader.EnableRunTimeStats(); err == nil {
			t.stats = st
		}
	}
	t.Started = time.Now()
	return t, nil
}

// attachRequired loads what every trace needs, the family's events and
// the parts cfg asks for (the timer hooks unless waitOnly, the interrupt
// hooks to explain, the device hooks for a policy with device matchers),
// and attaches it once all of it has loaded.
func (t *Tracer) attachRequired(spec *ebpf.CollectionSpec, p *bpf.RunqlatProgramSpecs, fam family,
	waitOnly, explain, devices bool) error {
	required := [][]*ebpf.ProgramSpec{fam.frees}
	if !waitOnly {
		required = append(required, fam.causes)
	}
	if explain {
		required = append(required, fam.interrupts)
	}
	required = append(required, fam.events)
	var parts []*part
	for _, progs := range required {
		if len(progs) == 0 {
			continue
		}
		part, err := t.load(spec, progs, "")
		if err != nil {
			return err
		}
		parts = append(parts, part)
	}
	var deviceHooks *part
	if devices {
		var err error
		if deviceHooks, err = t.load(spec, []*ebpf.ProgramSpec{p.DeviceOpen, p.DeviceIoctl}, ""); err != nil {
			return fmt.Errorf("%w: %v", loader.ErrDeviceHooks, err)
		}
	}
	for _, part := range parts {
		if err := part.attach(fam.attach, nil); err != nil {
			return err
		}
	}
	if deviceHooks != nil {
		if err := deviceHooks.attach(attachTracing, nil); err != nil {
			return fmt.Errorf("%w: %v", loader.ErrDeviceHooks, err)
		}
	}
	return nil
}

// attachOptional attaches what the tracer can do without, noting why
// where the kernel refuses it: the sleep calls' return, to end felt
// waits there (not with WaitOnly, nor on raw_tp); with Explain, the hook
// on sched_ext's bypass mode on a kernel with sched_ext (hasExt), and
// fentry and fexit on the sched_ext scheduler's callbacks (ExtCallbacks).
func (t *Tracer) attachOptional(spec *ebpf.CollectionSpec, p *bpf.RunqlatProgramSpecs, fam family, cfg TracerConfig,
	hasExt bool) {
	switch {
	case cfg.WaitOnly:
		t.FeltEnd = FeltOff
	case !fam.taskStorage:
		t.FeltNote = "raw_tp keeps no task storage for open felt waits"
	default:
		// nanosleep, clock_nanosleep, usleep; poll, select and
		// epoll_wait timeouts.
		returns := []*ebpf.ProgramSpec{p.RqNanosleepRet, p.RqHrtimeoutRet}
		if _, err := t.attachPart("fexit on the sleep calls", spec, returns, "", attachTracing, t.objs.FeltEndsAtReturn); err != nil {
			t.FeltNote = err.Error()
		} else {
			t.FeltEnd = FeltToReturn
		}
	}
	if cfg.Explain && hasExt {
		if err := t.watchBypass(spec, fam); err != nil {
			t.BypassNote = "sched_ext bypass mode not watched: " + err.Error()
		}
	}
	if cfg.Explain && cfg.ExtCallbacks {
		t.attachExtCallbacks(spec, p.RqExtCbEnter, p.RqExtCbExit)
	}
}

// configure writes cfg into the object before anything is loaded: the
// globals its programs read as constants, and its maps' sizes.
func configure(spec *ebpf.CollectionSpec, s *bpf.RunqlatSpecs, cfg TracerConfig, thresholds [policy.MaxClasses]uint64,
	views [policy.MaxClasses]uint8, hasExt bool, hook string) error {
	var errs []error
	set := func(v *ebpf.VariableSpec, value any) {
		if err := v.Set(value); err != nil {
			errs = append(errs, fmt.Errorf("set %s: %w", v.Name, err))
		}
	}
	var comm [policy.CommLen]byte
	copy(comm[:], cfg.FilterComm)
	var tids [MaxFilterTIDs]uint32
	copy(tids[:], cfg.FilterTIDs)
	v := &s.RunqlatVariableSpecs
	set(v.ThresholdNs, thresholds)
	set(v.ThresholdView, views)
	set(v.FilterTgid, cfg.FilterTGID)
	set(v.FilterTids, tids)
	set(v.FilterNrTids, uint32(len(cfg.FilterTIDs)))
	set(v.FilterComm, comm)
	set(v.FilterCommLen, uint32(len(cfg.FilterComm)))
	set(v.PerTask, cfg.PerTask)
	set(v.Explain, cfg.Explain)
	set(v.KernelHasExt, hasExt)
	// The classifier's settings, under the names the scheduler writes
	// them by too (classify.bpf.h is shared).
	for name, value := range cfg.Table.BPFVariables() {
		if vs := spec.Variables[name]; vs != nil {
			set(vs, value)
		} else {
			errs = append(errs, fmt.Errorf("the tracer's object has no classifier setting %s", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	m := &s.RunqlatMapSpecs
	if cfg.RingBufferBytes > 0 {
		m.Violations.MaxEntries = uint32(cfg.RingBufferBytes)
	}
	// One histogram row per view and class actually in the policy.
	rows := uint32(bpfRows * cfg.Table.NrClasses())
	m.Hist.MaxEntries = rows * NumBuckets
	m.Totals.MaxEntries = rows
	if cfg.MaxTasks > 0 {
		m.Tasks.MaxEntries = uint32(cfg.MaxTasks)
	}
	if hook != HookRawTP {
		// Only the raw_tp family keys stamps by pid; tp_btf keeps them
		// in task storage. The map is still created: keep it minimal
		// rather than 64k preallocated entries.
		m.StampsByPid.MaxEntries = 1
	}
	return nil
}

// A part is some of the tracer's programs, loaded on its maps (so that a
// part the kernel refuses costs only itself), and their links once
// attached.
type part struct {
	specs []*ebpf.ProgramSpec
	progs []*ebpf.Program // loaded, in the order of specs
	// label tells apart parts of the same programs in Programs: the
	// programs are listed under their names followed by it.
	label string
	links []link.Link
}

// load loads specs as a part of the tracer, which closes it.
func (t *Tracer) load(spec *ebpf.CollectionSpec, specs []*ebpf.ProgramSpec, label string) (*part, error) {
	progs, err := loader.LoadPrograms(spec, ebpf.CollectionOptions{MapReplacements: t.shared, Cache: t.btf}, specs...)
	if err != nil {
		return nil, err
	}
	p := &part{specs: specs, progs: progs, label: label}
	t.parts = append(t.parts, p)
	return p, nil
}

// unload closes a part that could not be attached.
func (t *Tracer) unload(p *part) {
	t.parts = slices.DeleteFunc(t.parts, func(q *part) bool { return q == p })
	p.detach()
	loader.ClosePrograms(p.progs...)
}

// attach attaches p's programs in order with attach, then sets on, if
// any: the global that tells the other programs the part is there. On
// error nothing of p stays attached.
func (p *part) attach(attach func(prog *ebpf.Program, target string) (link.Link, error), on *ebpf.Variable) error {
	for i, prog := range p.progs {
		l, err := attach(prog, p.specs[i].AttachTo)
		if err != nil {
			p.detach()
			return fmt.Errorf("attach %s to %s: %s", p.specs[i].Name, p.specs[i].AttachTo, loader.CleanError(err))
		}
		p.links = append(p.links, l)
	}
	if on != nil {
		if err := on.Set(true); err != nil {
			p.detach()
			return fmt.Errorf("set %v: %w", on, err)
		}
	}
	return nil
}

// detach closes p's links, the last first.
func (p *part) detach() error {
	var errs []error
	for _, l := range slices.Backward(p.links) {
		errs = append(errs, l.Close())
	}
	p.links = nil
	return errors.Join(errs...)
}

// attachPart loads and attaches a part the tracer can do without, what:
// on error (which says which step failed) nothing of it stays.
func (t *Tracer) attachPart(what string, spec *ebpf.CollectionSpec, specs []*ebpf.ProgramSpec, label string,
	attach func(*ebpf.Program, string) (link.Link, error), on *ebpf.Variable) (*part, error) {
	p, err := t.load(spec, specs, label)
	if err != nil {
		return nil, fmt.Errorf("load %s: %s", what, loader.CleanError(err))
	}
	if err := p.attach(attach, on); err != nil {
		t.unload(p)
		return nil, err
	}
	return p, nil
}

// watchBypass attaches the hook on sched_ext's event counters, whose
// bypass events tell explanations that the BPF scheduler was set aside
// during a wait. The tracepoint is 6.17's; older kernels and kernels
// without sched_ext do not have it.
func (t *Tracer) watchBypass(spec *ebpf.CollectionSpec, fam family) error {
	tp := fam.bypass[0].AttachTo
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("read the kernel's BTF: %w", err)
	}
	var td *btf.Typedef
	if err := kernel.TypeByName("btf_trace_"+tp, &td); err != nil {
		return fmt.Errorf("the kernel has no %s tracepoint (kernels with sched_ext have it from 6.17)", tp)
	}
	_, err = t.attachPart("the "+tp+" hook", spec, fam.bypass, "", fam.attach, t.objs.BypassWatched)
	return err
}

// attachExtCallbacks puts fentry and fexit (enter, exit) on every callback
// of the sched_ext scheduler loaded now, so that explanations can say how
// much of a wait the CPU spent in them. It is best effort: a kernel
// refusing fentry, or no scheduler, leaves CallbacksNote saying so. A
// scheduler loaded after the tracer is not timed.
func (t *Tracer) attachExtCallbacks(spec *ebpf.CollectionSpec, enter, exit *ebpf.ProgramSpec) {
	cbs, err := loader.SchedExtCallbacks()
	if err != nil {
		t.CallbacksNote = "sched_ext callbacks not timed: " + err.Error()
		return
	}
	defer func() {
		for _, cb := range cbs {
			cb.Program.Close()
		}
	}()
	if len(cbs) == 0 {
		t.CallbacksNote = "sched_ext callbacks not timed: no sched_ext scheduler was loaded when the tracer attached"
		return
	}
	// A part per callback, with its own copies of enter and exit; every
	// callback is timed, or none.
	var timed []*part
	for _, cb := range cbs {
		var specs []*ebpf.ProgramSpec
		for _, p := range []*ebpf.ProgramSpec{enter, exit} {
			c := p.Copy()
			c.AttachTarget, c.AttachTo = cb.Program, cb.Func
			specs = append(specs, c)
		}
		p, err := t.attachPart("fentry/fexit on "+cb.Func, spec, specs, "/"+cb.Func, attachTracing, nil)
		if err != nil {
			for _, p := range slices.Backward(timed) {
				t.unload(p)
			}
			t.CallbacksNote = "sched_ext callbacks not timed: " + err.Error()
			return
		}
		timed = append(timed, p)
	}
	t.CallbacksTimed = len(cbs)
}

// Stop detaches the programs but keeps the maps, so that a Snapshot taken
// afterwards is consistent: counters, histograms and per-task figures all
// end at the same event.
func (t *Tracer) Stop() error {
	var errs []error
	t.switches.stop(procStat)
	if t.FeltEnd == FeltToReturn {
		// A felt wait left open when the fexit hooks go would close
		// only at its task's next block.
		errs = append(errs, t.objs.FeltEndsAtReturn.Set(false))
	}
	for _, p := range slices.Backward(t.parts) {
		errs = append(errs, p.detach())
	}
	return errors.Join(errs...)
}

// Close detaches the tracer and frees it.
func (t *Tracer) Close() error {
	errs := []error{t.Stop()}
	if t.ring != nil {
		errs = append(errs, t.ring.Close())
	}
	if t.stats != nil {
		errs = append(errs, t.stats.Close())
	}
	for _, p := range t.parts {
		loader.ClosePrograms(p.progs...)
	}
	t.parts = nil
	return errors.Join(append(errs, t.objs.Close())...)
}

// Counters are the tracer's event counts and losses.
type Counters struct {
	// Wakeups counts sched_waking and sched_wakeup_new events: a wait
	// starts at the waker's try_to_wake_up, the same point under every
	// scheduler.
	Wakeups  uint64 `json:"wakeups"`
	Switches uint64 `json:"switches"`
	Samples  uint64 `json:"samples"`
	// Losses: each is a sample, a task or a violation record the tracer
	// could not keep.
	StampFailures    uint64 `json:"stamp_failures"`
	TaskTableFull    uint64 `json:"task_table_full"`
	RingbufDrops     uint64 `json:"ringbuf_drops"`
	ClassifyUncached uint64 `json:"classify_uncached"`
	// DeviceUsesLost are device opens and ioctls a device matcher could
	// not note (task storage full): the task joined its class late.
	DeviceUsesLost uint64 `json:"device_uses_lost"`
	// UnmeasuredWaits are waits (of the tasks the filters select) that
	// began or ended at a context switch the kernel did not report to
	// sched_switch probes; they are counted from the kernel's own per-task
	// switch counts, so for every traced task its switch-ins equal
	// Samples + UnmeasuredWaits + UnstampedWaits.
	UnmeasuredWaits uint64 `json:"unmeasured_waits"`
	// UnstampedWaits are switch-ins of a task the tracer had seen leave
	// the CPU but not become runnable again.
	UnstampedWaits uint64 `json:"unstamped_waits"`
	// UnreportedSwitches counts, per CPU, switches whose prev was not the
	// task the previous reported switch put there: the kernel switched
	// without reporting it (any task, traced or not).
	UnreportedSwitches uint64 `json:"unreported_switches"`
	// UnseenSwitches are context switches the kernel counted (/proc/stat
	// ctxt) while the tracer was attached that its sched_switch hook did
	// not see, at least: a loss no per-task or per-CPU count can show
	// (switchAudit).
	UnseenSwitches uint64 `json:"unseen_switches"`
	// KernelSwitches is the kernel's count of context switches over the
	// same time (0: /proc/stat could not be read).
	KernelSwitches uint64 `json:"kernel_switches,omitempty"`
	// SkippedRuns are runs of the tracer's programs the kernel skipped
	// because the same program was already running on that CPU (the
	// programs' recursion_misses): an fexit program whose task was
	// preempted mid-run while the next task on that CPU took the same
	// hook, or an event in an interrupt over its own hook. The waits they
	// touched are also counted among the losses above where the tracer
	// can tell.
	SkippedRuns uint64 `json:"skipped_runs"`
}

// ClassLatency is one class's run-queue latency, in each view.
type ClassLatency struct {
	Class string `json:"class"`
	// Hist is the wait view: from the wake-up or preemption.
	Hist *Histogram `json:"histogram"`
	// Felt is the felt view: from the wake-up's cause where known.
	Felt *Histogram `json:"felt_histogram"`
	// TimerDelivery is, for the waits a timer's expiry began, the time
	// from the expiry to the wake-up (the interrupt's delivery and
	// handling); its count is how many waits had a known cause.
	TimerDelivery *Histogram `json:"timer_delivery_histogram"`
}

// View returns the histogram of view v.
func (c ClassLatency) View(v View) *Histogram {
	if v == ViewWait {
		return c.Hist
	}
	return c.Felt
}

// CPULatency is the run-queue latency of the tasks switched in on a CPU.
type CPULatency struct {
	CPU  int        `json:"cpu"`
	Hist *Histogram `json:"histogram"`
}

// TaskLatency is one task's run-queue latency, as waited and as felt.
type TaskLatency struct {
	PID   uint32     `json:"pid"`
	TGID  uint32     `json:"tgid"`
	Comm  string     `json:"comm"`
	Class string     `json:"class"`
	Hist  *Histogram `json:"histogram"`
	Felt  *Histogram `json:"felt_histogram"`
}

// Snapshot is everything the tracer has measured so far.
type Snapshot struct {
	Hook     string         `json:"hook"`
	FeltEnd  FeltEnd        `json:"felt_end"`
	Elapsed  time.Duration  `json:"elapsed_ns"`
	Classes  []ClassLatency `json:"classes"`
	CPUs     []CPULatency   `json:"cpus"`
	Tasks    []TaskLatency  `json:"tasks,omitempty"`
	Counters Counters       `json:"counters"`
}

// counters reads the counters, summed over the CPUs, and the number of
// CPUs.
func (t *Tracer) counters() (Counters, int, error) {
	var (
		perCPU []bpf.RunqlatRqCounters
		sum    Counters
	)
	// The kernel's count first: the comparison errs on the side of seen.
	made, audited := t.switches.made(procStat)
	if err := t.objs.Counters.Lookup(uint32(0), &perCPU); err != nil {
		return sum, 0, fmt.Errorf("read counters: %w", err)
	}
	for _, c := range perCPU {
		sum.Wakeups += c.Wakeups
		sum.Switches += c.Switches
		sum.Samples += c.Samples
		sum.StampFailures += c.StampFailures
		sum.TaskTableFull += c.TaskTableFull
		sum.RingbufDrops += c.RingbufDrops
		sum.UnmeasuredWaits += c.UnmeasuredWaits
		sum.UnstampedWaits += c.UnstampedWaits
		sum.UnreportedSwitches += c.UnreportedSwitches
	}
	if audited {
		sum.KernelSwitches = made
		sum.UnseenSwitches = t.switches.unseen(made, sum.Switches, len(perCPU))
	}
	for _, p := range t.parts {
		sum.SkippedRuns += loader.RecursionMisses(p.progs...)
	}
	if err := t.objs.HlClassifyStorageFailures.Get(&sum.ClassifyUncached); err != nil {
		return sum, 0, fmt.Errorf("read classifier failures: %w", err)
	}
	if err := t.objs.HlDevUseFailures.Get(&sum.DeviceUsesLost); err != nil {
		return sum, 0, fmt.Errorf("read lost device uses: %w", err)
	}
	return sum, len(perCPU), nil
}

// Snapshot reads the histograms and counters. While the tracer runs the
// pieces are read one after the other and may differ by the events in
// between; after Stop they agree exactly.
func (t *Tracer) Snapshot() (*Snapshot, error) { return t.snapshot(true) }

// ClassSnapshot is Snapshot without the per-task table (Tasks is empty):
// for what is read again and again while the tracer runs (interval lines,
// scrapes), which need not copy every task's histograms each time.
func (t *Tracer) ClassSnapshot() (*Snapshot, error) { return t.snapshot(false) }

func (t *Tracer) snapshot(withTasks bool) (*Snapshot, error) {
	s := &Snapshot{Hook: t.Hook, FeltEnd: t.FeltEnd, Elapsed: time.Since(t.Started)}

	c, ncpu, err := t.counters()
	if err != nil {
		return nil, err
	}
	s.Counters = c

	nclass := len(t.classes)
	counts := make([][]uint64, bpfRows*nclass) // by row * nclass + class
	cpuCounts := make([][]uint64, ncpu)        // the wait view
	for i := range counts {
		counts[i] = make([]uint64, NumBuckets)
	}
	for i := range cpuCounts {
		cpuCounts[i] = make([]uint64, NumBuckets)
	}
	var (
		key    uint32
		values []uint64
	)
	it := t.objs.Hist.Iterate()
	for it.Next(&key, &values) {
		row, bucket := int(key)/NumBuckets, int(key)%NumBuckets
		if row >= len(counts) {
			continue
		}
		waitRow := row < 2*nclass // bpfRowWait or bpfRowCausedWait
		for cpu, n := range values {
			counts[row][bucket] += n
			if waitRow {
				cpuCounts[cpu][bucket] += n
			}
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read histograms: %w", err)
	}

	cpuMax := make([]uint64, ncpu)
	cpuSum := make([]uint64, ncpu)
	hists := make([]*Histogram, len(counts))
	for row := range counts {
		var tot []bpf.RunqlatClassTotals
		if err := t.objs.Totals.Lookup(uint32(row), &tot); err != nil {
			return nil, fmt.Errorf("read class totals: %w", err)
		}
		var mx, sum uint64
		for cpu, c := range tot {
			mx = max(mx, c.Max)
			sum += c.Sum
			if row < 2*nclass {
				cpuMax[cpu] = max(cpuMax[cpu], c.Max)
				cpuSum[cpu] += c.Sum
			}
		}
		h, err := FromBuckets(counts[row], mx)
		if err != nil {
			return nil, err
		}
		h.SetSum(sum)
		hists[row] = h
	}
	for i, name := range t.classes {
		row := func(r int) *Histogram { return hists[r*nclass+i] }
		wait, felt := &Histogram{}, &Histogram{}
		wait.Merge(row(bpfRowWait))
		wait.Merge(row(bpfRowCausedWait))
		felt.Merge(row(bpfRowWait))
		felt.Merge(row(bpfRowCausedFelt))
		s.Classes = append(s.Classes, ClassLatency{Class: name, Hist: wait, Felt: felt, TimerDelivery: row(bpfRowDelivery)})
	}
	for cpu := range cpuCounts {
		h, err := FromBuckets(cpuCounts[cpu], cpuMax[cpu])
		if err != nil {
			return nil, err
		}
		h.SetSum(cpuSum[cpu])
		s.CPUs = append(s.CPUs, CPULatency{CPU: cpu, Hist: h})
	}

	if !withTasks {
		return s, nil
	}
	tasks, err := t.tasks()
	if err != nil {
		return nil, err
	}
	s.Tasks = tasks
	return s, nil
}

// taskViewHistogram is the histogram of one view of a task's waits.
func taskViewHistogram(v *bpf.RunqlatTaskView) (*Histogram, error) {
	// The BPF side's buckets are this package's: a different count
	// would not compile here.
	var buckets [NumBuckets]uint32 = v.Buckets
	counts := make([]uint64, NumBuckets)
	for i, n := range buckets {
		counts[i] = uint64(n)
	}
	h, err := FromBuckets(counts, v.Max)
	if err != nil {
		return nil, err
	}
	h.SetSum(v.Sum)
	return h, nil
}

func (t *Tracer) tasks() ([]TaskLatency, error) {
	var (
		key bpf.RunqlatTaskKey
		rec bpf.RunqlatTaskHist
		out []TaskLatency
	)
	it := t.objs.Tasks.Iterate()
	for it.Next(&key, &rec) {
		wait, err := taskViewHistogram(&rec.Wait)
		if err != nil {
			return nil, err
		}
		felt, err := taskViewHistogram(&rec.Felt)
		if err != nil {
			return nil, err
		}
		out = append(out, TaskLatency{PID: key.Pid, TGID: rec.Tgid, Comm: cstr.String(rec.Comm[:]), Class: t.className(rec.ClassId),
			Hist: wait, Felt: felt})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read per-task histograms: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Hist.QuantileUpper(0.99) > out[j].Hist.QuantileUpper(0.99)
	})
	return out, nil
}

// Violation is one wait above its class's threshold.
type Violation struct {
	At       time.Duration `json:"at_ns"` // CLOCK_MONOTONIC
	Latency  time.Duration `json:"latency_ns"`
	PID      uint32        `json:"pid"`
	TGID     uint32        `json:"tgid"`
	Comm     string        `json:"comm"`
	Class    string        `json:"class"`
	CPU      uint32        `json:"cpu"`
	PrevPID  uint32        `json:"prev_pid"`
	PrevComm string        `json:"prev_comm"`
	// Caused says a timer's expiry woke the task: Felt is from then to
	// the felt wait's end (Snapshot.FeltEnd) and TimerDelivery from then
	// to the wake-up. Without a
	// known cause Felt is Latency.
	Caused        bool          `json:"caused,omitempty"`
	Felt          time.Duration `json:"felt_ns"`
	TimerDelivery time.Duration `json:"timer_delivery_ns,omitempty"`
	// Resume is the part of Felt after the switch-in, up to the sleep
	// call's return (Snapshot.FeltEnd "return").
	Resume time.Duration `json:"resume_ns,omitempty"`
	// Why is where the wait went, if the tracer was asked to explain.
	Why *Explanation `json:"why,omitempty"`
	// Bound is the class's threshold, the tightest limit of its bound,
	// which the wait in View (Felt, or Latency for ViewWait) exceeded;
	// Run fills them in.
	Bound time.Duration `json:"bound_ns,omitempty"`
	View  View          `json:"view,omitempty"`
}

// Measured is the figure the bound compared: the wait in its view.
func (v Violation) Measured() time.Duration {
	if v.View == ViewWait {
		return v.Latency
	}
	return v.Felt
}

// ReadViolations calls fn for each streamed violation until ctx is done or
// the tracer is closed. When ctx is done it reads what the ring holds at
// that moment, not what arrives while it reads: a reader slower than the
// programs writing (the tracer starved of CPU by a saturating lane) would
// otherwise never find the ring empty, and a 2 s verify went on for 86 s.
func (t *Tracer) ReadViolations(ctx context.Context, fn func(Violation)) error {
	var left atomic.Int64 // bytes left to read once ctx is done; -1 before
	left.Store(-1)
	// Flush wakes a blocked Read without taking the reader's lock (which
	// SetDeadline would wait for): Read returns what is pending, then
	// ErrFlushed.
	stop := context.AfterFunc(ctx, func() {
		left.Store(int64(t.ring.AvailableBytes()))
		t.ring.Flush()
	})
	defer stop()
	for {
		if left.Load() == 0 {
			return nil
		}
		rec, err := t.ring.Read()
		if err != nil {
			if errors.Is(err, ringbuf.ErrFlushed) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
		var v bpf.RunqlatViolation
		if err := decodeViolation(rec.RawSample, &v); err != nil {
			return err
		}
		why := explanationOf(&v.Why, t.classes)
		if why != nil {
			// The span runqlat.bpf.c explained: back from the switch-in by
			// the wait or the felt wait before it, whichever is longer.
			why.Window = max(time.Duration(v.LatencyNs), time.Duration(v.FeltNs)-time.Duration(v.ResumeNs))
		}
		fn(Violation{
			At: time.Duration(v.AtNs), Latency: time.Duration(v.LatencyNs),
			PID: v.Pid, TGID: v.Tgid, Comm: cstr.String(v.Comm[:]), Class: t.className(v.ClassId), CPU: v.Cpu,
			PrevPID: v.PrevPid, PrevComm: cstr.String(v.PrevComm[:]),
			Caused: v.Caused != 0, Felt: time.Duration(v.FeltNs), TimerDelivery: time.Duration(v.DeliveryNs),
			Resume: time.Duration(v.ResumeNs),
			Why:    why,
		})
		if n := left.Load(); n > 0 {
			left.Store(max(0, n-ringRecordSize(len(rec.RawSample))))
		}
	}
}

// decodeViolation fills v from a ring buffer sample: the bytes of the C
// struct, which bpf2go's Go struct mirrors field for field, padding
// included, on this little-endian target. A plain copy: binary.Read took
// 3 µs a record (BenchmarkDecodeViolation), most of what the reader spent
// on a violation, and the reader of a saturated guest reads thousands a
// second while the lane starves it.
func decodeViolation(raw []byte, v *bpf.RunqlatViolation) error {
	dst := unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
	if len(raw) < len(dst) {
		return fmt.Errorf("decode violation: a record of %d bytes, want %d (a tracer object of another build?)", len(raw), len(dst))
	}
	copy(dst, raw)
	return nil
}

// ringRecordSize is the room a sample of n bytes takes in a BPF ring
// buffer: an 8-byte header and the sample, padded to 8 bytes.
func ringRecordSize(n int) int64 {
	return int64(8 + (n+7)&^7)
}

// Cost returns each program's run count and run time (BPF_ENABLE_STATS),
// or an error saying the kernel did not provide them.
func (t *Tracer) Cost() ([]report.ProgramCost, error) {
	if t.stats == nil && !t.measureCost {
		return nil, errors.New("BPF run-time statistics not asked for (TracerConfig.MeasureCost)")
	}
	if t.stats == nil {
		return nil, errors.New("BPF run-time statistics unavailable (BPF_ENABLE_STATS failed)")
	}
	return loader.Costs(t.Programs())
}

// Programs returns the tracer's loaded programs by function name, for
// tools that measure them (the map is the caller's; the programs are the
// tracer's and close with it). The programs timing sched_ext callbacks
// are named after the callback too: "rq_ext_cb_enter/hl_enqueue".
func (t *Tracer) Programs() map[string]*ebpf.Program {
	progs := map[string]*ebpf.Program{}
	for _, p := range t.parts {
		for i, prog := range p.progs {
			progs[p.specs[i].Name+p.label] = prog
		}
	}
	return progs
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// className is the name of class id, or "" for an id the policy lacks.
func (t *Tracer) className(id uint32) string {
	if int(id) < len(t.classes) {
		return t.classes[id]
	}
	return ""
}
