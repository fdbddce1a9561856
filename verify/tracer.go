package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

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
	coll    *ebpf.Collection
	links   []link.Link
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
	// returns holds the fexit programs on the sleep calls, loaded apart
	// so that a kernel refusing fexit still gets the rest.
	returns *ebpf.Collection
	// callbacks holds fentry/fexit on the sched_ext scheduler's
	// callbacks, when explaining; CallbacksTimed counts the callbacks
	// timed, CallbacksNote says why none are.
	callbacks      *ebpf.Collection
	CallbacksTimed int
	CallbacksNote  string
	// bypass holds the hook on sched_ext's event counters, when
	// explaining on a kernel with sched_ext; BypassNote says why it is
	// missing there, if it is (then explanations cannot tell a bypass).
	bypass     *ebpf.Collection
	BypassNote string
	// Started is when the tracer was attached.
	Started time.Time
}

// ErrBadTracerConfig is returned for configurations Attach refuses.
var ErrBadTracerConfig = errors.New("bad tracer configuration")

// hookProgram is a program and the tracepoint it attaches to.
type hookProgram struct{ prog, tracepoint string }

// hookPrograms lists each family's programs in the order they attach: the
// ones that start waits before sched_switch, so that no task the tracer
// has seen leave the CPU can be woken unseen while the tracer attaches.
// Stop detaches them in the opposite order.
// Explaining adds the interrupt hooks, first, so that the switch hook
// never sees a CPU whose interrupt time is not being counted.
func hookPrograms(hook string, explain, causes bool) []hookProgram {
	suffix := "_btf"
	var progs []hookProgram
	if hook == HookRawTP {
		suffix = "_raw"
		progs = append(progs, hookProgram{"rq_free_raw", "sched_process_free"})
	}
	// A timer's expiry is noted before its wake-up can be seen.
	if causes {
		progs = append(progs,
			hookProgram{"rq_timer_exit" + suffix, "hrtimer_expire_exit"},
			hookProgram{"rq_timer" + suffix, "hrtimer_expire_entry"})
	}
	if explain {
		progs = append(progs,
			hookProgram{"rq_irq_entry" + suffix, "irq_handler_entry"},
			hookProgram{"rq_irq_exit" + suffix, "irq_handler_exit"},
			hookProgram{"rq_softirq_entry" + suffix, "softirq_entry"},
			hookProgram{"rq_softirq_exit" + suffix, "softirq_exit"})
	}
	return append(progs,
		hookProgram{"rq_waking" + suffix, "sched_waking"},
		hookProgram{"rq_wakeup_new" + suffix, "sched_wakeup_new"},
		hookProgram{"rq_switch" + suffix, "sched_switch"})
}

// deviceHooks are the fentry programs that note device opens and ioctls
// for the policy's device matchers, as the scheduler's own do.
var deviceHooks = []hookProgram{
	{"device_open", "security_file_open"},
	{"device_ioctl", "security_file_ioctl"},
}

// sleepReturns are the fexit programs that end a timer-caused felt wait
// at its sleep call's return, and the functions they hook.
var sleepReturns = []hookProgram{
	{"rq_nanosleep_ret", "hrtimer_nanosleep"},
	{"rq_hrtimeout_ret", "schedule_hrtimeout_range_clock"},
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

func attach(cfg TracerConfig, thresholds [policy.MaxClasses]uint64, views [policy.MaxClasses]uint8, hook string) (_ *Tracer, err error) {
	spec, err := bpf.LoadRunqlat()
	if err != nil {
		return nil, err
	}
	// Load only this family's programs; the fexit ones come apart, last.
	returnProgs := maps.Clone(spec.Programs)
	want := hookPrograms(hook, cfg.Explain, !cfg.WaitOnly)
	if cfg.Table.HasDeviceRules() {
		// Task storage, where device uses are noted, needs trusted
		// task pointers: raw tracepoints have none.
		if hook == HookRawTP {
			return nil, fmt.Errorf("%w: the policy's device matchers need the %s hooks; raw_tp cannot see which tasks use a device", ErrBadTracerConfig, HookTpBTF)
		}
		want = append(want, deviceHooks...)
	}
	for name := range spec.Programs {
		if !slices.ContainsFunc(want, func(h hookProgram) bool { return h.prog == name }) {
			delete(spec.Programs, name)
		}
	}
	scx, err := loader.ReadSchedExtStatus(loader.SchedExtSysfs)
	if err != nil {
		return nil, err
	}
	var comm [policy.CommLen]byte
	copy(comm[:], cfg.FilterComm)
	var tids [MaxFilterTIDs]uint32
	copy(tids[:], cfg.FilterTIDs)
	vars := cfg.Table.BPFVariables()
	for name, v := range map[string]any{
		"threshold_ns":    thresholds,
		"threshold_view":  views,
		"filter_tgid":     cfg.FilterTGID,
		"filter_tids":     tids,
		"filter_nr_tids":  uint32(len(cfg.FilterTIDs)),
		"filter_comm":     comm,
		"filter_comm_len": uint32(len(cfg.FilterComm)),
		"per_task":        cfg.PerTask,
		"explain":         cfg.Explain,
		"kernel_has_ext":  scx.Present,
	} {
		vars[name] = v
	}
	for name, v := range vars {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	if cfg.RingBufferBytes > 0 {
		spec.Maps["violations"].MaxEntries = uint32(cfg.RingBufferBytes)
	}
	// One histogram row per view and class actually in the policy.
	rows := uint32(bpfRows * cfg.Table.NrClasses())
	spec.Maps["hist"].MaxEntries = rows * NumBuckets
	spec.Maps["totals"].MaxEntries = rows
	if cfg.MaxTasks > 0 {
		spec.Maps["tasks"].MaxEntries = uint32(cfg.MaxTasks)
	}
	if hook != HookRawTP {
		// Only the raw_tp family keys stamps by pid; tp_btf keeps them
		// in task storage. The map is still created: keep it minimal
		// rather than 64k preallocated entries.
		spec.Maps[bpf.RunqlatMapStampsByPid].MaxEntries = 1
	}

	returnsSpec := spec.Copy() // with the settings and sizes above
	returnsSpec.Programs = returnProgs
	callbacksSpec := returnsSpec.Copy()
	bypassSpec := returnsSpec.Copy()

	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		if cfg.Table.HasDeviceRules() && strings.Contains(err.Error(), "program device_") {
			return nil, fmt.Errorf("%w: %v", loader.ErrDeviceHooks, err)
		}
		return nil, err
	}
	t := &Tracer{coll: coll, Hook: hook, classes: cfg.Table.Names, FeltEnd: FeltToSwitchIn}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	for _, h := range want {
		var l link.Link
		if hook == HookRawTP {
			l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: h.tracepoint, Program: coll.Programs[h.prog]})
		} else {
			l, err = link.AttachTracing(link.TracingOptions{Program: coll.Programs[h.prog]})
		}
		if err != nil {
			if slices.Contains(deviceHooks, h) {
				return nil, fmt.Errorf("%w: attach %s: %v", loader.ErrDeviceHooks, h.prog, err)
			}
			return nil, fmt.Errorf("attach %s to %s: %w", h.prog, h.tracepoint, err)
		}
		t.links = append(t.links, l)
	}
	switch {
	case cfg.WaitOnly:
		t.FeltEnd = FeltOff
	case hook == HookRawTP:
		t.FeltNote = "raw_tp keeps no task storage for open felt waits"
	default:
		if err := t.attachSleepReturns(returnsSpec); err != nil {
			t.FeltNote = err.Error()
		} else {
			t.FeltEnd = FeltToReturn
		}
	}
	if cfg.Explain && scx.Present {
		if err := t.watchBypass(bypassSpec, hook); err != nil {
			t.BypassNote = "sched_ext bypass mode not watched: " + err.Error()
		}
	}
	if cfg.Explain && cfg.ExtCallbacks {
		t.attachExtCallbacks(callbacksSpec)
	}
	if t.ring, err = ringbuf.NewReader(coll.Maps["violations"]); err != nil {
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

// attachSleepReturns loads the fexit programs of sleepReturns on the
// tracer's own maps and attaches them, then tells the switch hook to
// leave timer-caused felt waits open for them. On error nothing of them
// stays.
func (t *Tracer) attachSleepReturns(spec *ebpf.CollectionSpec) (err error) {
	for name := range spec.Programs { // all the object's programs
		if !slices.ContainsFunc(sleepReturns, func(h hookProgram) bool { return h.prog == name }) {
			delete(spec.Programs, name)
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: t.coll.Maps})
	if err != nil {
		return fmt.Errorf("load fexit on the sleep calls: %w", err)
	}
	var links []link.Link
	defer func() {
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			coll.Close()
		}
	}()
	for _, h := range sleepReturns {
		l, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[h.prog]})
		if err != nil {
			return fmt.Errorf("attach fexit to %s: %w", h.tracepoint, err)
		}
		links = append(links, l)
	}
	if err := t.coll.Variables["felt_ends_at_return"].Set(true); err != nil {
		return fmt.Errorf("set felt_ends_at_return: %w", err)
	}
	t.returns = coll
	t.links = append(t.links, links...)
	return nil
}

// watchBypass attaches the hook on sched_ext's event counters, whose
// bypass events tell explanations that the BPF scheduler was set aside
// during a wait. The tracepoint is 6.17's; older kernels and kernels
// without sched_ext do not have it. On error nothing of it stays.
func (t *Tracer) watchBypass(spec *ebpf.CollectionSpec, hook string) (err error) {
	name, tp := bpf.RunqlatProgRqExtEventBtf, "sched_ext_event"
	if hook == HookRawTP {
		name = bpf.RunqlatProgRqExtEventRaw
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("read the kernel's BTF: %w", err)
	}
	var td *btf.Typedef
	if err := kernel.TypeByName("btf_trace_"+tp, &td); err != nil {
		return fmt.Errorf("the kernel has no %s tracepoint (kernels with sched_ext have it from 6.17)", tp)
	}
	spec.Programs = map[string]*ebpf.ProgramSpec{name: spec.Programs[name]}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: t.coll.Maps})
	if err != nil {
		return fmt.Errorf("load the %s hook: %s", tp, loader.CleanError(err))
	}
	var l link.Link
	if hook == HookRawTP {
		l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp, Program: coll.Programs[name]})
	} else {
		l, err = link.AttachTracing(link.TracingOptions{Program: coll.Programs[name]})
	}
	if err != nil {
		coll.Close()
		return fmt.Errorf("attach to %s: %s", tp, loader.CleanError(err))
	}
	if err := t.coll.Variables["bypass_watched"].Set(true); err != nil {
		l.Close()
		coll.Close()
		return fmt.Errorf("set bypass_watched: %w", err)
	}
	t.bypass = coll
	t.links = append(t.links, l)
	return nil
}

// attachExtCallbacks puts fentry and fexit on every callback of the
// sched_ext scheduler loaded now, so that explanations can say how much of
// a wait the CPU spent in them. It is best effort: a kernel refusing
// fentry, or no scheduler, leaves CallbacksNote saying so. A scheduler
// loaded after the tracer is not timed.
func (t *Tracer) attachExtCallbacks(spec *ebpf.CollectionSpec) {
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
	enter, exit := spec.Programs[bpf.RunqlatProgRqExtCbEnter], spec.Programs[bpf.RunqlatProgRqExtCbExit]
	spec.Programs = make(map[string]*ebpf.ProgramSpec, 2*len(cbs))
	for i, cb := range cbs {
		for _, p := range []*ebpf.ProgramSpec{enter, exit} {
			c := p.Copy()
			c.AttachTarget, c.AttachTo = cb.Program, cb.Func
			spec.Programs[fmt.Sprintf("%s_%d", p.Name, i)] = c
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: t.coll.Maps})
	if err != nil {
		t.CallbacksNote = "sched_ext callbacks not timed: load fentry/fexit on them: " + loader.CleanError(err)
		return
	}
	var links []link.Link
	for name, p := range coll.Programs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			coll.Close()
			t.CallbacksNote = fmt.Sprintf("sched_ext callbacks not timed: attach %s: %s", name, loader.CleanError(err))
			return
		}
		links = append(links, l)
	}
	t.callbacks = coll
	t.links = append(t.links, links...)
	t.CallbacksTimed = len(cbs)
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// Stop detaches the programs but keeps the maps, so that a Snapshot taken
// afterwards is consistent: counters, histograms and per-task figures all
// end at the same event.
func (t *Tracer) Stop() error {
	var errs []error
	if t.returns != nil {
		// A felt wait left open when the fexit hooks go would close
		// only at its task's next block.
		errs = append(errs, t.coll.Variables["felt_ends_at_return"].Set(false))
	}
	for _, l := range slices.Backward(t.links) {
		errs = append(errs, l.Close())
	}
	t.links = nil
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
	if t.returns != nil {
		t.returns.Close()
	}
	if t.bypass != nil {
		t.bypass.Close()
	}
	if t.callbacks != nil {
		t.callbacks.Close()
	}
	t.coll.Close()
	return errors.Join(errs...)
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
}

// countersRecord mirrors struct rq_counters.
type countersRecord struct {
	Wakeups, Switches, Samples, StampFailures, TaskTableFull, RingbufDrops uint64
	UnmeasuredWaits, UnstampedWaits, UnreportedSwitches                    uint64
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
		perCPU []countersRecord
		sum    Counters
	)
	if err := t.coll.Maps["counters"].Lookup(uint32(0), &perCPU); err != nil {
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
	if err := t.coll.Variables["hl_classify_storage_failures"].Get(&sum.ClassifyUncached); err != nil {
		return sum, 0, fmt.Errorf("read classifier failures: %w", err)
	}
	if err := t.coll.Variables["hl_dev_use_failures"].Get(&sum.DeviceUsesLost); err != nil {
		return sum, 0, fmt.Errorf("read lost device uses: %w", err)
	}
	return sum, len(perCPU), nil
}

// classTotals mirrors struct class_totals.
type classTotals struct{ Max, Sum uint64 }

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
	it := t.coll.Maps["hist"].Iterate()
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
		var tot []classTotals
		if err := t.coll.Maps["totals"].Lookup(uint32(row), &tot); err != nil {
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

// taskViewRecord mirrors struct task_view.
type taskViewRecord struct {
	Max     uint64
	Sum     uint64
	Buckets [NumBuckets]uint32
}

func (r *taskViewRecord) histogram() (*Histogram, error) {
	counts := make([]uint64, NumBuckets)
	for i, n := range r.Buckets {
		counts[i] = uint64(n)
	}
	h, err := FromBuckets(counts, r.Max)
	if err != nil {
		return nil, err
	}
	h.SetSum(r.Sum)
	return h, nil
}

// taskRecord mirrors struct task_hist.
type taskRecord struct {
	TGID       uint32
	ClassID    uint32
	Comm       [policy.CommLen]byte
	Wait, Felt taskViewRecord
}

type taskKey struct {
	PID       uint32
	_         uint32
	StartTime uint64
}

func (t *Tracer) tasks() ([]TaskLatency, error) {
	var (
		key taskKey
		rec taskRecord
		out []TaskLatency
	)
	it := t.coll.Maps["tasks"].Iterate()
	for it.Next(&key, &rec) {
		wait, err := rec.Wait.histogram()
		if err != nil {
			return nil, err
		}
		felt, err := rec.Felt.histogram()
		if err != nil {
			return nil, err
		}
		class := ""
		if int(rec.ClassID) < len(t.classes) {
			class = t.classes[rec.ClassID]
		}
		out = append(out, TaskLatency{PID: key.PID, TGID: rec.TGID, Comm: cstr.String(rec.Comm[:]), Class: class, Hist: wait, Felt: felt})
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
}

// violationRecord mirrors struct violation.
type violationRecord struct {
	AtNs, LatencyNs         uint64
	PID, TGID, ClassID, CPU uint32
	PrevPID, Caused         uint32
	FeltNs, DeliveryNs      uint64
	ResumeNs                uint64
	Comm, PrevComm          [policy.CommLen]byte
	Why                     explanationRecord
}

// ReadViolations calls fn for each streamed violation until ctx is done or
// the tracer is closed.
func (t *Tracer) ReadViolations(ctx context.Context, fn func(Violation)) error {
	// Flush wakes a blocked Read without taking the reader's lock (which
	// SetDeadline would wait for): Read returns what is pending, then
	// ErrFlushed.
	stop := context.AfterFunc(ctx, func() { t.ring.Flush() })
	defer stop()
	for {
		rec, err := t.ring.Read()
		if err != nil {
			if errors.Is(err, ringbuf.ErrFlushed) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
		var v violationRecord
		if err := binary.Read(bytes.NewReader(rec.RawSample), binary.LittleEndian, &v); err != nil {
			return fmt.Errorf("decode violation: %w", err)
		}
		class := ""
		if int(v.ClassID) < len(t.classes) {
			class = t.classes[v.ClassID]
		}
		why := v.Why.explanation(t.classes)
		if why != nil {
			// The span runqlat.bpf.c explained: back from the switch-in by
			// the wait or the felt wait before it, whichever is longer.
			why.Window = max(time.Duration(v.LatencyNs), time.Duration(v.FeltNs)-time.Duration(v.ResumeNs))
		}
		fn(Violation{
			At: time.Duration(v.AtNs), Latency: time.Duration(v.LatencyNs),
			PID: v.PID, TGID: v.TGID, Comm: cstr.String(v.Comm[:]), Class: class, CPU: v.CPU,
			PrevPID: v.PrevPID, PrevComm: cstr.String(v.PrevComm[:]),
			Caused: v.Caused != 0, Felt: time.Duration(v.FeltNs), TimerDelivery: time.Duration(v.DeliveryNs),
			Resume: time.Duration(v.ResumeNs),
			Why:    why,
		})
	}
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
// tracer's and close with it).
func (t *Tracer) Programs() map[string]*ebpf.Program {
	progs := maps.Clone(t.coll.Programs)
	for _, more := range []*ebpf.Collection{t.returns, t.bypass, t.callbacks} {
		if more != nil {
			maps.Copy(progs, more.Programs)
		}
	}
	return progs
}
