package dma

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/loader"
)

// Options say how to trace.
type Options struct {
	// Hooks forces a hook family (HooksTpBTF, HooksTracepoint,
	// HooksFentry); empty or HooksAuto tries them in that order.
	Hooks string
	// Latency says whether to measure map latency with fentry/fexit on the
	// map functions; empty means LatencyAuto.
	Latency string
	// Events, if not empty, are the dma:* tracepoints to trace instead of
	// every one the kernel has (names as in KnownTracepoints, with or
	// without "dma:"). Each must exist. Tracepoint families only.
	Events []string

	// failAttach, for tests: with HooksTracepoint, the last counting
	// tracepoint is attached under this name instead, so that attaching
	// fails after the others succeeded.
	failAttach string
	// tables, for tests: smaller tables, to force every table-full loss.
	tables tableSizes
}

// tableSizes are the entries of the probe's tables; 0 keeps the object's.
type tableSizes struct {
	devices, hists, stamps uint32
}

// Probe is an attached DMA probe.
type Probe struct {
	objs probeObjects
	// instances are the programs loaded on objs, one per instance (see
	// attachment.instance).
	instances map[attachment]*ebpf.Program
	links     []link.Link
	family    string
	hooks     []string
	latHooks  []string
	notes     []string
	kernel    string
	started   time.Time
}

// Start checks privileges, picks the hooks, loads the programs and
// attaches them. On any error nothing stays attached.
func Start(opts Options) (*Probe, error) {
	switch opts.Hooks {
	case "", HooksAuto, HooksTpBTF, HooksTracepoint, HooksFentry:
	default:
		return nil, fmt.Errorf("%w: hooks %q: use %s, %s, %s or %s", ErrBadOptions, opts.Hooks, HooksAuto, HooksTpBTF, HooksTracepoint, HooksFentry)
	}
	switch opts.Latency {
	case "", LatencyAuto, LatencyOn, LatencyOff:
	default:
		return nil, fmt.Errorf("%w: latency %q: use %s, %s or %s", ErrBadOptions, opts.Latency, LatencyAuto, LatencyOn, LatencyOff)
	}
	events, err := normalizeEvents(opts.Events)
	if err != nil {
		return nil, err
	}
	opts.Events = events
	if len(events) > 0 && opts.Hooks == HooksFentry {
		return nil, fmt.Errorf("%w: events name tracepoints; they do not apply to --hook fentry", ErrBadOptions)
	}
	if err := loader.RequireCapabilities("CAP_BPF", "CAP_PERFMON"); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise RLIMIT_MEMLOCK: %w", err)
	}
	k := runningKernel()

	var errs []error
	for _, family := range families(opts) {
		p, err := k.makePlan(family, opts.Events, opts.Latency)
		if err == nil {
			var pr *Probe
			pr, err = start(k, p, opts)
			if err == nil {
				return pr, nil
			}
		}
		// A tracepoint the user named that does not exist, or latency
		// that was required but cannot be measured, is the answer,
		// whatever the other families would say.
		if errors.Is(err, ErrNoLatency) || (errors.Is(err, ErrMissingTracepoint) && (len(opts.Events) > 0 || len(families(opts)) == 1)) {
			return nil, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", family, err))
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("%w: %w", ErrNoHooks, errors.Join(errs...))
}

func runningKernel() *kernel {
	k := &kernel{release: "unknown release"}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		k.release = unix.ByteSliceToString(u.Release[:])
	}
	k.btf, k.btfErr = btf.LoadKernelSpec()
	if k.btfErr != nil {
		k.btf = nil
	}
	k.tracefs = func() (string, error) {
		dir, _, err := loader.EnsureTracefs(true)
		return dir, err
	}
	return k
}

// start loads what p names, attaches it and returns the probe; on error it
// closes everything again. With LatencyAuto a failure of the latency
// programs alone is retried without them.
func start(k *kernel, p *plan, opts Options) (*Probe, error) {
	pr, err := load(p, true, opts.tables)
	if err != nil && len(p.latency) > 0 {
		// Do the counting programs load on their own? Then it is the
		// latency programs that failed.
		pr2, err2 := load(p, false, opts.tables)
		switch {
		case err2 != nil:
		case opts.Latency == LatencyOn:
			pr2.Close()
			return nil, fmt.Errorf("%w: %v; use --latency auto or off", ErrNoLatency, err)
		default:
			pr2.notes = append(pr2.notes, "map latency not measured: "+err.Error())
			pr, err = pr2, nil
		}
	}
	if err != nil {
		return nil, err
	}
	pr.kernel = k.release
	pr.notes = append(p.notes, pr.notes...)
	if err := pr.attach(p, opts); err != nil {
		pr.Close()
		return nil, err
	}
	pr.started = time.Now()
	return pr, nil
}

// probeObjects are the probe's maps and globals, created (LoadAndAssign)
// before its programs, whose instances all load on them. The .rodata map
// holds the globals.
type probeObjects struct {
	bpf.DmaMaps
	Rodata *ebpf.Map `ebpf:".rodata"`
}

// Close closes the data section's map too, which bpf.DmaMaps' Close does
// not know.
func (o *probeObjects) Close() error { return loader.CloseMaps(o) }

// load creates the maps, then loads one program instance per attachment
// (the same C program serves several tracepoints or functions of one
// prototype) on them.
func load(p *plan, withLatency bool, tables tableSizes) (_ *Probe, err error) {
	spec, err := bpf.LoadDma()
	if err != nil {
		return nil, err
	}
	var specs bpf.DmaSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("the DMA object: %w", err)
	}
	for ms, n := range map[*ebpf.MapSpec]uint32{
		specs.DevStats: tables.devices, specs.LatHist: tables.hists, specs.Stamps: tables.stamps,
	} {
		if n > 0 {
			ms.MaxEntries = n
		}
	}
	all := p.count
	if withLatency {
		all = append(slices.Clip(all), p.latency...)
	}
	var keys []attachment // the instances, in the order of their attachments
	var progs []loader.Instance
	for _, a := range all {
		key := a.instance()
		if slices.Contains(keys, key) {
			continue
		}
		ps := spec.Programs[a.prog] // a.prog is a bpf.DmaProg* name
		if ps == nil {
			return nil, fmt.Errorf("program %s missing from the DMA object", a.prog)
		}
		ps = ps.Copy()
		if a.kind != "tracepoint" {
			ps.AttachTo = a.target
		}
		keys = append(keys, key)
		progs = append(progs, loader.Instance{Name: a.label(), Spec: ps})
	}
	if err := loader.SetVariables(map[*ebpf.VariableSpec]any{
		specs.FexitCounts: p.fexitCounts,
		specs.LatencyOn:   withLatency && len(p.latency) > 0,
	}); err != nil {
		return nil, err
	}
	pr := &Probe{family: p.family, instances: map[attachment]*ebpf.Program{}}
	defer func() {
		if err != nil {
			pr.Close()
		}
	}()
	if err := spec.LoadAndAssign(&pr.objs, nil); err != nil {
		return nil, loadError(err)
	}
	loaded, err := loader.LoadInstances(spec, ebpf.CollectionOptions{MapReplacements: loader.MapsByName(&pr.objs)}, progs...)
	if err != nil {
		return nil, loadError(err)
	}
	for i, key := range keys {
		pr.instances[key] = loaded[i]
	}
	if withLatency {
		for _, a := range p.latency {
			if a.kind == "fentry" {
				pr.latHooks = append(pr.latHooks, "fentry+fexit/"+a.target)
			}
		}
	}
	return pr, nil
}

// loadError is an error of load, shortened.
func loadError(err error) error {
	return errors.New(strings.Replace(shortError(err), ": load program: ", ": ", 1))
}

// instance is the attachment that names a's program instance: a tracefs
// program is loaded once and attached to every tracepoint of its class,
// the BTF-bound kinds once per target.
func (a attachment) instance() attachment {
	if a.kind == "tracepoint" {
		a.target = ""
	}
	return a
}

// label names a's instance in errors: the program of a tracepoint, which
// serves every tracepoint of its class, or else the attach point.
func (a attachment) label() string {
	if a.kind == "tracepoint" {
		return a.prog
	}
	return a.String()
}

func (pr *Probe) attach(p *plan, opts Options) error {
	if err := pr.attachAll(p, p.count, opts); err != nil {
		return err
	}
	if len(pr.latHooks) == 0 {
		return nil
	}
	counting := len(pr.links)
	if err := pr.attachAll(p, p.latency, opts); err != nil {
		if opts.Latency == LatencyOn {
			return err
		}
		for _, l := range pr.links[counting:] {
			l.Close()
		}
		pr.links = pr.links[:counting]
		pr.latHooks = nil
		pr.notes = append(pr.notes, "map latency not measured: "+err.Error())
	}
	return nil
}

func (pr *Probe) attachAll(p *plan, todo []attachment, opts Options) error {
	for _, a := range todo {
		prog := pr.instances[a.instance()]
		var l link.Link
		var err error
		switch a.kind {
		case "tracepoint":
			target := a.target
			if opts.failAttach != "" && a == p.count[len(p.count)-1] {
				target = opts.failAttach
			}
			l, err = link.Tracepoint("dma", target, prog, nil)
			if err != nil && errors.Is(err, os.ErrNotExist) {
				err = fmt.Errorf("%w: tracepoint dma:%s does not exist on this kernel (%s)", ErrMissingTracepoint, target, pr.kernel)
			}
		default:
			l, err = link.AttachTracing(link.TracingOptions{Program: prog})
		}
		if err != nil {
			if errors.Is(err, ErrMissingTracepoint) {
				return err
			}
			return fmt.Errorf("attach %s: %s", a, shortError(err))
		}
		pr.links = append(pr.links, l)
		if a.kind == "fentry" || (a.kind == "fexit" && !p.fexitCounts) {
			continue
		}
		pr.hooks = append(pr.hooks, a.String())
	}
	return nil
}

// shortError is err without cilium/ebpf's memlock hint (wrong on the
// memcg-accounted kernels hotlane supports) and with a verifier error cut
// to its last line.
func shortError(err error) string {
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		return "verifier: " + loader.LastVerifierLine(verr.Log)
	}
	s := loader.CleanError(err)
	if errors.Is(err, unix.EPERM) {
		s += " (the kernel refuses this hook type here)"
	}
	return s
}

// Family is the hook family in use: HooksTpBTF, HooksTracepoint or
// HooksFentry.
func (pr *Probe) Family() string { return pr.family }

// Hooks lists what counts events, e.g. "tp_btf/dma_map_phys".
func (pr *Probe) Hooks() []string { return slices.Clone(pr.hooks) }

// LatencyHooks lists the functions whose map latency is measured, e.g.
// "fentry+fexit/dma_map_phys"; empty when latency is not measured.
func (pr *Probe) LatencyHooks() []string { return slices.Clone(pr.latHooks) }

// Notes are what the probe could not do (an event it skipped, why latency
// is not measured).
func (pr *Probe) Notes() []string { return slices.Clone(pr.notes) }

// Close detaches every hook (latency stamps first, in reverse order of
// attaching) and frees the programs and maps. It is safe to call twice.
func (pr *Probe) Close() error {
	var errs []error
	for i := len(pr.links) - 1; i >= 0; i-- {
		if err := pr.links[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	pr.links = nil
	for _, prog := range pr.instances {
		prog.Close()
	}
	pr.instances = nil
	pr.objs.Close()
	pr.objs = probeObjects{}
	return errors.Join(errs...)
}
