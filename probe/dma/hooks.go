package dma

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/hotlane/hotlane/bpf"
)

// Hook families (Options.Hooks).
const (
	HooksAuto       = "auto"       // tp_btf, else tracepoint, else fentry
	HooksTpBTF      = "tp_btf"     // dma:* tracepoints with typed arguments
	HooksTracepoint = "tracepoint" // dma:* tracepoints through tracefs
	HooksFentry     = "fentry"     // fexit on the DMA-API functions
)

// Latency modes (Options.Latency).
const (
	LatencyAuto = "auto" // measure map latency where fentry loads
	LatencyOn   = "on"   // fail if map latency cannot be measured
	LatencyOff  = "off"  // do not attach fentry/fexit for latency
)

var (
	// ErrBadOptions is returned (wrapped) for options Start refuses.
	ErrBadOptions = errors.New("bad DMA probe options")
	// ErrMissingTracepoint is returned (wrapped) when a tracepoint the
	// probe was asked for does not exist on the running kernel.
	ErrMissingTracepoint = errors.New("missing tracepoint")
	// ErrNoLatency is returned (wrapped) with LatencyOn when map latency
	// cannot be measured here.
	ErrNoLatency = errors.New("map latency cannot be measured")
	// ErrNoHooks is returned (wrapped) when no hook family can trace the
	// DMA API on this kernel.
	ErrNoHooks = errors.New("no usable DMA hooks")
)

// class is a group of dma:* tracepoints that share a prototype, and the
// programs that read it.
type class struct {
	name string
	tpb  string // tp_btf program
	tp   string // tracefs tracepoint program
	// shape is the prototype after the leading void *, one letter per
	// argument: D struct device *, P another pointer, I an integer or
	// enum. The programs read ctx[i] by position, so a kernel whose
	// prototype has another shape must not get them.
	shape string
	// required: a tracepoint family needs one tracepoint of this class.
	required bool
}

func classes() []class {
	return []class{
		{"map", bpf.DmaProgHldmaTpbMap, bpf.DmaProgHldmaTpMap, "DIIIII", true},
		{"unmap", bpf.DmaProgHldmaTpbUnmap, bpf.DmaProgHldmaTpUnmap, "DIIII", true},
		{"map_sg", bpf.DmaProgHldmaTpbMapSg, bpf.DmaProgHldmaTpMapSg, "DPIIII", false},
		{"map_sg_err", bpf.DmaProgHldmaTpbMapSgErr, bpf.DmaProgHldmaTpMapSgErr, "DPIIII", false},
		{"unmap_sg", bpf.DmaProgHldmaTpbUnmapSg, bpf.DmaProgHldmaTpUnmapSg, "DPIII", false},
		{"alloc", bpf.DmaProgHldmaTpbAlloc, bpf.DmaProgHldmaTpAlloc, "DPIIIII", false},
		{"alloc_err", bpf.DmaProgHldmaTpbAllocErr, bpf.DmaProgHldmaTpAllocErr, "DPIIIII", false},
		{"alloc_sgt", bpf.DmaProgHldmaTpbAllocSgt, bpf.DmaProgHldmaTpAllocSgt, "DPIIII", false},
		{"free", bpf.DmaProgHldmaTpbFree, bpf.DmaProgHldmaTpFree, "DPIIII", false},
		{"free_sgt", bpf.DmaProgHldmaTpbFreeSgt, bpf.DmaProgHldmaTpFreeSgt, "DPII", false},
	}
}

func classByName(name string) class {
	for _, c := range classes() {
		if c.name == name {
			return c
		}
	}
	panic("unknown DMA tracepoint class " + name)
}

// tracepoint is one dma:* event hotlane knows how to read.
type tracepoint struct {
	name    string
	class   string
	renamed string // what it is called on other kernels, for error messages
}

// KnownTracepoints returns the dma:* tracepoints the probe can read, in
// the order it attaches them. Kernels have a subset: 6.18 renamed
// dma_map_page/dma_unmap_page to dma_map_phys/dma_unmap_phys and dropped
// dma_map_resource/dma_unmap_resource.
func KnownTracepoints() []string {
	var names []string
	for _, tp := range tracepoints() {
		names = append(names, tp.name)
	}
	return names
}

func tracepoints() []tracepoint {
	return []tracepoint{
		{"dma_map_phys", "map", "dma_map_page before 6.18"},
		{"dma_map_page", "map", "dma_map_phys since 6.18"},
		{"dma_map_resource", "map", "gone since 6.18, which maps resources with dma_map_phys"},
		{"dma_unmap_phys", "unmap", "dma_unmap_page before 6.18"},
		{"dma_unmap_page", "unmap", "dma_unmap_phys since 6.18"},
		{"dma_unmap_resource", "unmap", "gone since 6.18, which unmaps resources with dma_unmap_phys"},
		{"dma_map_sg", "map_sg", ""},
		{"dma_map_sg_err", "map_sg_err", ""},
		{"dma_unmap_sg", "unmap_sg", ""},
		{"dma_alloc", "alloc", ""},
		{"dma_alloc_pages", "alloc", ""},
		{"dma_alloc_sgt_err", "alloc_err", ""},
		{"dma_alloc_sgt", "alloc_sgt", ""},
		{"dma_free", "free", ""},
		{"dma_free_pages", "free", ""},
		{"dma_free_sgt", "free_sgt", ""},
	}
}

// function is a DMA-API function the fexit family (and map latency)
// hooks; candidates for one role are tried in order.
type function struct {
	name  string
	prog  string // fexit program
	shape string // arguments as in class.shape, then '>' and the return value
}

// functionRoles lists, per role, the functions that can fill it. map and
// map_sg are where map latency is measured.
func functionRoles() []struct {
	role       string
	candidates []function
} {
	return []struct {
		role       string
		candidates []function
	}{
		// Since 6.18 dma_map_page_attrs calls dma_map_phys: hook only
		// the first that exists, or every mapping counts twice.
		{"map", []function{
			{"dma_map_phys", bpf.DmaProgHldmaFxMapPhys, "DIIII>I"},
			{"dma_map_page_attrs", bpf.DmaProgHldmaFxMapPage, "DPIIII>I"},
		}},
		{"unmap", []function{
			{"dma_unmap_phys", bpf.DmaProgHldmaFxUnmap, "DIIII>"},
			{"dma_unmap_page_attrs", bpf.DmaProgHldmaFxUnmap, "DIIII>"},
		}},
		// __dma_map_sg_attrs backs both dma_map_sg_attrs and
		// dma_map_sgtable; dma_map_sg_attrs alone misses the latter.
		{"map_sg", []function{
			{"__dma_map_sg_attrs", bpf.DmaProgHldmaFxMapSg, "DPIII>I"},
			{"dma_map_sg_attrs", bpf.DmaProgHldmaFxMapSg, "DPIII>I"},
		}},
		{"unmap_sg", []function{{"dma_unmap_sg_attrs", bpf.DmaProgHldmaFxUnmapSg, "DPIII>"}}},
		{"alloc", []function{{"dma_alloc_attrs", bpf.DmaProgHldmaFxAlloc, "DIPII>P"}}},
		{"free", []function{{"dma_free_attrs", bpf.DmaProgHldmaFxFree, "DIPII>"}}},
	}
}

// kernel is what the plan is made from: the running kernel's BTF and its
// tracefs. Tests build one from any kernel's BTF.
type kernel struct {
	release string
	btf     *btf.Spec // nil without kernel BTF
	btfErr  error
	// tracefs returns the tracefs directory that has events/, mounting
	// tracefs if needed; it is called only when a plan needs tracefs.
	tracefs func() (string, error)
}

// typeLetter classifies one argument or return type for a shape.
func typeLetter(t btf.Type) byte {
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Pointer:
		if s, ok := btf.UnderlyingType(u.Target).(*btf.Struct); ok && s.Name == "device" {
			return 'D'
		}
		return 'P'
	case *btf.Int, *btf.Enum:
		return 'I'
	case *btf.Void:
		return 'V'
	}
	return '?'
}

// tracepointShape returns the shape of a raw tracepoint's prototype from
// its btf_trace_<name> typedef, and whether the kernel has it.
func (k *kernel) tracepointShape(name string) (string, bool) {
	if k.btf == nil {
		return "", false
	}
	var td *btf.Typedef
	if err := k.btf.TypeByName("btf_trace_"+name, &td); err != nil {
		return "", false
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return "?", true
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok || len(proto.Params) == 0 {
		return "?", true
	}
	var b strings.Builder
	for _, p := range proto.Params[1:] { // the first is the tracepoint's void *data
		b.WriteByte(typeLetter(p.Type))
	}
	return b.String(), true
}

// functionShape returns the shape of a kernel function and whether BTF has
// it.
func (k *kernel) functionShape(name string) (string, bool) {
	if k.btf == nil {
		return "", false
	}
	var fn *btf.Func
	if err := k.btf.TypeByName(name, &fn); err != nil {
		return "", false
	}
	proto, ok := fn.Type.(*btf.FuncProto)
	if !ok {
		return "?", true
	}
	var b strings.Builder
	for _, p := range proto.Params {
		b.WriteByte(typeLetter(p.Type))
	}
	b.WriteByte('>')
	if l := typeLetter(proto.Return); l != 'V' {
		b.WriteByte(l)
	}
	return b.String(), true
}

// tracefsHas reports whether tracefs dir has the dma event name.
func tracefsHas(dir, name string) bool {
	if dir == "" {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, "events", "dma", name))
	return err == nil && fi.IsDir()
}

// attachment is one program instance and where it goes.
type attachment struct {
	kind   string // "tp_btf", "tracepoint", "fexit", "fentry"
	target string // tracepoint or function
	prog   string // program in the object
}

func (a attachment) String() string {
	if a.kind == "tracepoint" {
		return "tracepoint/dma/" + a.target
	}
	return a.kind + "/" + a.target
}

// plan is what one attempt loads and attaches.
type plan struct {
	family  string
	count   []attachment // the programs that count events
	latency []attachment // fexit, then fentry, on the map functions
	// fexitCounts: the fexit programs count (fentry family).
	fexitCounts bool
	notes       []string
	tracefs     string
}

// families returns the hook families to try, in order.
func families(opts Options) []string {
	switch opts.Hooks {
	case HooksTpBTF, HooksTracepoint, HooksFentry:
		return []string{opts.Hooks}
	}
	if len(opts.Events) > 0 {
		return []string{HooksTpBTF, HooksTracepoint}
	}
	return []string{HooksTpBTF, HooksTracepoint, HooksFentry}
}

// normalizeEvents checks the names in events against the tracepoints this
// code can read and returns them without a "dma:" prefix, deduplicated.
func normalizeEvents(events []string) ([]string, error) {
	var out []string
	for _, e := range events {
		for _, raw := range strings.Split(e, ",") {
			name := strings.TrimSpace(raw)
			name = strings.TrimPrefix(name, "dma:")
			name = strings.TrimPrefix(name, "dma/")
			if name == "" {
				continue
			}
			if !slices.Contains(KnownTracepoints(), name) {
				return nil, fmt.Errorf("%w: unknown DMA tracepoint %q; known: %s", ErrBadOptions, strings.TrimSpace(raw), strings.Join(KnownTracepoints(), ", "))
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out, nil
}

// existing lists the known dma:* tracepoints this kernel has, from BTF and,
// if given, tracefs.
func (k *kernel) existing(tracefs string) []string {
	var have []string
	for _, tp := range tracepoints() {
		if _, ok := k.tracepointShape(tp.name); ok || tracefsHas(tracefs, tp.name) {
			have = append(have, tp.name)
		}
	}
	return have
}

// missingError says that the tracepoint name does not exist here, what
// does, and what it is called elsewhere.
func (k *kernel) missingError(name, tracefs string) error {
	var renamed string
	for _, tp := range tracepoints() {
		if tp.name == name && tp.renamed != "" {
			renamed = "; it is " + tp.renamed
		}
	}
	have := k.existing(tracefs)
	list := "none"
	if len(have) > 0 {
		list = strings.Join(have, ", ")
	}
	return fmt.Errorf("%w: dma:%s does not exist on this kernel (%s%s); it has: %s",
		ErrMissingTracepoint, name, k.release, renamed, list)
}

// makePlan decides what family attaches where. events, if not empty, are
// the tracepoints to trace instead of every known one the kernel has.
func (k *kernel) makePlan(family string, events []string, latency string) (*plan, error) {
	p := &plan{family: family}
	switch family {
	case HooksTpBTF, HooksTracepoint:
		if err := k.planTracepoints(p, events); err != nil {
			return nil, err
		}
	case HooksFentry:
		if err := k.planFexit(p); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: hooks %q: use %s, %s, %s or %s", ErrBadOptions, family, HooksAuto, HooksTpBTF, HooksTracepoint, HooksFentry)
	}
	if latency != LatencyOff {
		if err := k.planLatency(p); err != nil {
			if latency == LatencyOn {
				return nil, fmt.Errorf("%w: %v", ErrNoLatency, err)
			}
			p.notes = append(p.notes, "map latency not measured: "+err.Error())
		}
	}
	return p, nil
}

func (k *kernel) planTracepoints(p *plan, events []string) error {
	if p.family == HooksTpBTF && k.btf == nil {
		return fmt.Errorf("%w: tp_btf needs kernel BTF: %v", ErrNoHooks, k.btfErr)
	}
	if p.family == HooksTracepoint {
		dir, err := k.tracefs()
		if err != nil {
			return fmt.Errorf("%w: classic tracepoints need tracefs: %v", ErrNoHooks, err)
		}
		p.tracefs = dir
	}
	has := func(name string) (bool, string) {
		if p.family == HooksTracepoint {
			return tracefsHas(p.tracefs, name), ""
		}
		shape, ok := k.tracepointShape(name)
		return ok, shape
	}
	explicit := len(events) > 0
	if !explicit {
		events = KnownTracepoints()
	}
	seen := map[string]bool{}
	for _, name := range events {
		var tp tracepoint
		for _, t := range tracepoints() {
			if t.name == name {
				tp = t
			}
		}
		c := classByName(tp.class)
		ok, shape := has(name)
		if !ok {
			if explicit {
				dir := p.tracefs
				if dir == "" && k.btf == nil {
					dir, _ = k.tracefs()
				}
				return k.missingError(name, dir)
			}
			continue
		}
		if p.family == HooksTpBTF && shape != c.shape {
			err := fmt.Errorf("tracepoint dma:%s has arguments %s on this kernel, this code reads %s", name, shape, c.shape)
			if explicit || c.required {
				return fmt.Errorf("%w: %v; use --hook tracepoint", ErrNoHooks, err)
			}
			p.notes = append(p.notes, err.Error()+": not traced")
			continue
		}
		a := attachment{kind: p.family, target: name, prog: c.tpb}
		if p.family == HooksTracepoint {
			a.prog = c.tp
		}
		p.count = append(p.count, a)
		seen[c.name] = true
	}
	if explicit {
		return nil
	}
	for _, c := range classes() {
		if c.required && !seen[c.name] {
			var names []string
			for _, tp := range tracepoints() {
				if tp.class == c.name {
					names = append(names, "dma:"+tp.name)
				}
			}
			where := "in kernel BTF"
			if p.family == HooksTracepoint {
				where = "in " + filepath.Join(p.tracefs, "events", "dma")
			}
			return fmt.Errorf("%w: none of %s is %s (kernel %s); the dma:* tracepoints appeared in 6.12: use --hook fentry",
				ErrMissingTracepoint, strings.Join(names, ", "), where, k.release)
		}
	}
	return nil
}

// pickFunction returns the first candidate the kernel has with the shape
// the program reads.
func (k *kernel) pickFunction(candidates []function) (function, error) {
	var problems []string
	for _, f := range candidates {
		shape, ok := k.functionShape(f.name)
		if !ok {
			problems = append(problems, f.name+" is not in kernel BTF")
			continue
		}
		if shape != f.shape {
			problems = append(problems, fmt.Sprintf("%s has prototype %s, this code reads %s", f.name, shape, f.shape))
			continue
		}
		return f, nil
	}
	return function{}, errors.New(strings.Join(problems, "; "))
}

func (k *kernel) planFexit(p *plan) error {
	if k.btf == nil {
		return fmt.Errorf("%w: fentry/fexit need kernel BTF: %v", ErrNoHooks, k.btfErr)
	}
	p.fexitCounts = true
	for _, r := range functionRoles() {
		f, err := k.pickFunction(r.candidates)
		if err != nil {
			if r.role == "map" || r.role == "unmap" {
				return fmt.Errorf("%w: %v", ErrNoHooks, err)
			}
			p.notes = append(p.notes, fmt.Sprintf("%s calls not counted: %v", r.role, err))
			continue
		}
		p.count = append(p.count, attachment{kind: "fexit", target: f.name, prog: f.prog})
	}
	return nil
}

// planLatency adds fentry (and, for tracepoint families, fexit) on the map
// functions.
func (k *kernel) planLatency(p *plan) error {
	if k.btf == nil {
		return fmt.Errorf("fentry needs kernel BTF: %v", k.btfErr)
	}
	var fexit, fentry []attachment
	for _, r := range functionRoles() {
		if r.role != "map" && r.role != "map_sg" {
			continue
		}
		f, err := k.pickFunction(r.candidates)
		if err != nil {
			if r.role == "map" {
				return err
			}
			continue
		}
		if p.family != HooksFentry {
			fexit = append(fexit, attachment{kind: "fexit", target: f.name, prog: f.prog})
		}
		fentry = append(fentry, attachment{kind: "fentry", target: f.name, prog: bpf.DmaProgHldmaFeMap})
	}
	// fexit first: a call that enters before its fexit is attached would
	// leave a start stamp that nothing pops.
	p.latency = append(fexit, fentry...)
	return nil
}
