// Package hookbench measures what a BPF program costs on each kind of hook
// of the running kernel (`hotlane bench hooks`), and what hotlane's own
// programs cost per run.
//
// One trivial body (bpf/hookbench.bpf.c) is attached in turn as fentry,
// fexit, tp_btf, raw_tp, classic tracepoint, kprobe, kretprobe,
// kprobe.multi and uprobe to the same event, a getpid(2) call that one
// thread makes in a tight loop. Each hook's cost is measured three ways,
// reported side by side because each sees a different part of it:
//
//   - added: the loop's time per call with the program attached minus
//     without it, in alternating rounds: everything the hook costs the
//     traced code (trampoline or trap, the program, the way back);
//   - stats: the kernel's run-time statistics (BPF_ENABLE_STATS): the
//     program's own run time, clocked by the code that calls it;
//   - outside: fentry and fexit on the program itself (bpf/progprof.bpf.c),
//     as `bpftool prog profile` does: the program's body, clocked from a
//     trampoline around it.
//
// A hook the kernel refuses is listed with the kernel's reason.
package hookbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/report"
)

// Kind is a way of attaching a BPF program to kernel or user code.
type Kind string

// The kinds the bench knows, in the order it measures them.
const (
	FEntry      Kind = "fentry"
	FExit       Kind = "fexit"
	TpBTF       Kind = "tp_btf"
	RawTp       Kind = "raw_tp"
	Tracepoint  Kind = "tracepoint"
	Kprobe      Kind = "kprobe"
	Kretprobe   Kind = "kretprobe"
	KprobeMulti Kind = "kprobe.multi"
	Uprobe      Kind = "uprobe"
)

// Kinds returns every kind, in the order the bench measures them.
func Kinds() []Kind {
	return []Kind{FEntry, FExit, TpBTF, RawTp, Tracepoint, Kprobe, Kretprobe, KprobeMulti, Uprobe}
}

// ErrUnknownKind is returned (wrapped) for a kind not in Kinds.
var ErrUnknownKind = errors.New("unknown hook kind")

// ParseKinds reads a list of kind names; none means all.
func ParseKinds(names []string) ([]Kind, error) {
	if len(names) == 0 {
		return Kinds(), nil
	}
	var out []Kind
	for _, n := range names {
		k := Kind(n)
		if !slices.Contains(Kinds(), k) {
			return nil, fmt.Errorf("%w %q: want one of %v", ErrUnknownKind, n, Kinds())
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// The event every kind attaches to. getpid is the cheapest system call
// there is, so the hook's share of its time is as large as it gets. The
// function hooks take the function it calls out of line for its work
// (kernel/pid.c), which is in BTF on every kernel, where the syscall's
// entry __x64_sys_getpid is not (fentry needs BTF). Other callers of it
// run too, but only the driving thread's calls count.
const (
	syscallFunc     = "__task_pid_nr_ns" // getpid's work; __x64_sys_getpid has no BTF
	syscallTpGroup  = "raw_syscalls"
	syscallTpName   = "sys_enter"
	uprobeFuncLabel = "hookbench.getpidCall"
)

// programs returns the hookbench.bpf.c program of each kind, out of the
// object's programs p.
func programs(p *bpf.HookbenchProgramSpecs) map[Kind]*ebpf.ProgramSpec {
	return map[Kind]*ebpf.ProgramSpec{
		FEntry: p.HbFentry, FExit: p.HbFexit,
		TpBTF: p.HbTpBtf, RawTp: p.HbRawTp, Tracepoint: p.HbTracepoint,
		Kprobe: p.HbKprobe, Kretprobe: p.HbKretprobe,
		KprobeMulti: p.HbKprobeMulti, Uprobe: p.HbUprobe,
	}
}

// event names what kind k attaches to, for the report.
func (k Kind) event() string {
	switch k {
	case TpBTF, RawTp, Tracepoint:
		return syscallTpGroup + ":" + syscallTpName
	case Uprobe:
		return uprobeFuncLabel
	}
	return syscallFunc
}

// getpidCall is the call the bench drives, a function of its own so that a
// uprobe has a place to sit in this binary. nosplit: a Go function's
// stack check can send it through the scheduler (a preemption request)
// and restart it from its first instruction, where the uprobe would fire
// a second time for one call.
//
//go:noinline
//go:nosplit
func getpidCall() { unix.Getpid() }

// loop makes n calls and returns the time per call.
func loop(n int) time.Duration {
	start := time.Now()
	for range n {
		getpidCall()
	}
	return time.Since(start) / time.Duration(n)
}

// Config says what to measure.
type Config struct {
	// Kinds to measure; empty means all.
	Kinds []Kind
	// Calls per round (default 100000) and rounds per kind (default 5).
	// Each round times the loop once without the program and once with it.
	Calls, Rounds int
	// Progress, if set, gets a line per kind as the bench goes.
	Progress io.Writer
}

func (c Config) withDefaults() Config {
	if len(c.Kinds) == 0 {
		c.Kinds = Kinds()
	}
	if c.Calls <= 0 {
		c.Calls = 100000
	}
	if c.Rounds <= 0 {
		c.Rounds = 5
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// HookCost is what one kind of hook cost per call of the event.
type HookCost struct {
	Kind  Kind   `json:"hook"`
	Event string `json:"event"`
	// Refused is why the kernel would not load or attach the program; the
	// figures are zero then.
	Refused string `json:"refused,omitempty"`
	// Driven is the calls made while the program was attached in the
	// timing rounds, Counted how many of them the program counted.
	Driven  uint64 `json:"calls_driven"`
	Counted uint64 `json:"calls_counted"`
	// Without and With are the median time per call over the rounds;
	// Noise is the widest spread of either set of rounds, the margin
	// within which a difference says nothing.
	Without time.Duration `json:"without_ns_per_call"`
	With    time.Duration `json:"with_ns_per_call"`
	Noise   time.Duration `json:"noise_ns_per_call"`
	// Stats is the program's run time from the kernel's statistics, and
	// Outside the same from fentry/fexit on the program, over one round
	// each (runs can exceed the calls: sys_enter runs for every system
	// call of every task).
	Stats          report.ProgramCost `json:"stats"`
	Outside        report.ProgramCost `json:"outside"`
	OutsideRefused string             `json:"outside_refused,omitempty"`
}

// Added is the time the hook added to each call.
func (h HookCost) Added() time.Duration { return h.With - h.Without }

// Report is the bench's result.
type Report struct {
	report.Header
	Calls    int           `json:"calls_per_round"`
	Rounds   int           `json:"rounds"`
	Hooks    []HookCost    `json:"hooks"`
	Programs []ProgramCost `json:"programs,omitempty"`
	// ProgramsLoad says what drove hotlane's programs while they were
	// measured.
	ProgramsLoad string `json:"programs_load,omitempty"`
}

// Run measures every kind in cfg on this kernel. A kind the kernel refuses
// is reported, not an error; the error is for the bench itself failing
// (ctx ended, the object did not parse, a map could not be read).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	started := time.Now()
	rep := &Report{Header: report.NewHeader("bench hooks", started), Calls: cfg.Calls, Rounds: cfg.Rounds}
	spec, err := bpf.LoadHookbench()
	if err != nil {
		return nil, fmt.Errorf("hook bench object: %w", err)
	}
	var specs bpf.HookbenchSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("hook bench object: %w", err)
	}
	if err := loader.SetVariables(map[*ebpf.VariableSpec]any{specs.GetpidNr: int64(unix.SYS_GETPID)}); err != nil {
		return nil, fmt.Errorf("hook bench object: %w", err)
	}
	progs := programs(&specs.HookbenchProgramSpecs)

	// Every figure comes from this one thread: the program counts only its
	// calls, and the Go scheduler must not move the loop between threads.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()

	for i, k := range cfg.Kinds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Progress, "hooks: %d/%d %s on %s\n", i+1, len(cfg.Kinds), k, k.event())
		h, err := measureKind(ctx, spec, progs[k], k, tid, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		rep.Hooks = append(rep.Hooks, h)
	}
	rep.Finish(time.Since(started), nil)
	return rep, nil
}

// kindProgram is one kind's program, loaded on its own so that a kind the
// kernel refuses does not stop the others, and how to attach it.
type kindProgram struct {
	objs   kindObjects
	name   string // the program's function name, for the report
	prog   *ebpf.Program
	attach func() (link.Link, error)
}

// kindObjects are one kind's maps and globals: each kind counts on its own.
// The .rodata and .bss maps hold the globals, which its program must share.
type kindObjects struct {
	bpf.HookbenchMaps
	bpf.HookbenchVariables
	Rodata *ebpf.Map `ebpf:".rodata"`
	Bss    *ebpf.Map `ebpf:".bss"`
}

func (kp *kindProgram) Close() error {
	return errors.Join(kp.prog.Close(), loader.CloseMaps(&kp.objs))
}

// loadKind loads ps, the program of kind k, on maps and globals of its own,
// counting the calls of the thread tid.
func loadKind(spec *ebpf.CollectionSpec, ps *ebpf.ProgramSpec, k Kind, tid int) (_ *kindProgram, err error) {
	kp := &kindProgram{name: ps.Name}
	defer func() {
		if err != nil {
			kp.Close()
		}
	}()
	if err := spec.LoadAndAssign(&kp.objs, nil); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	progs, err := loader.LoadPrograms(spec, ebpf.CollectionOptions{MapReplacements: loader.MapsByName(&kp.objs)}, ps)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	kp.prog = progs[0]
	if err := kp.objs.DriverTid.Set(uint32(tid)); err != nil {
		return nil, fmt.Errorf("set driver_tid: %w", err)
	}
	p := kp.prog
	switch k {
	case FEntry, FExit, TpBTF:
		kp.attach = func() (link.Link, error) { return link.AttachTracing(link.TracingOptions{Program: p}) }
	case RawTp:
		kp.attach = func() (link.Link, error) {
			return link.AttachRawTracepoint(link.RawTracepointOptions{Name: syscallTpName, Program: p})
		}
	case Tracepoint:
		kp.attach = func() (link.Link, error) { return link.Tracepoint(syscallTpGroup, syscallTpName, p, nil) }
	case Kprobe:
		kp.attach = func() (link.Link, error) { return link.Kprobe(syscallFunc, p, nil) }
	case Kretprobe:
		kp.attach = func() (link.Link, error) { return link.Kretprobe(syscallFunc, p, nil) }
	case KprobeMulti:
		kp.attach = func() (link.Link, error) {
			return link.KprobeMulti(p, link.KprobeMultiOptions{Symbols: []string{syscallFunc}})
		}
	case Uprobe:
		kp.attach = func() (link.Link, error) { return attachUprobe(p) }
	}
	return kp, nil
}

// attachUprobe puts the uprobe on getpidCall in this executable. The
// place is found from the function's address in memory and the mapping
// of the executable that holds it, not from the symbol table, which go
// test and release builds (-ldflags=-s) leave out.
func attachUprobe(p *ebpf.Program) (link.Link, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable: %w", err)
	}
	pc := uint64(reflect.ValueOf(getpidCall).Pointer())
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	off, err := fileOffset(string(maps), pc)
	if err != nil {
		return nil, err
	}
	ex, err := link.OpenExecutable(exe)
	if err != nil {
		return nil, err
	}
	return ex.Uprobe(uprobeFuncLabel, p, &link.UprobeOptions{Address: off})
}

// fileOffset finds the file offset of the code at pc from /proc/self/maps
// ("start-end perms offset dev inode path").
func fileOffset(maps string, pc uint64) (uint64, error) {
	for line := range strings.Lines(maps) {
		var start, end, off uint64
		var perms string
		if _, err := fmt.Sscanf(line, "%x-%x %s %x", &start, &end, &perms, &off); err != nil {
			continue
		}
		if start <= pc && pc < end {
			if !strings.Contains(perms, "x") {
				return 0, fmt.Errorf("address %#x is in a mapping without execute permission (%s)", pc, perms)
			}
			return pc - start + off, nil
		}
	}
	return 0, fmt.Errorf("address %#x of the traced function is in no mapping of /proc/self/maps", pc)
}

// refusal says why the kernel refused a hook, in one line. EPERM to root
// is the kernel's choice, not a missing privilege (the bench checks those
// first).
func refusal(err error) string {
	msg := loader.CleanError(err)
	if errors.Is(err, unix.EPERM) {
		msg += " (as root: lockdown, an LSM or kernel policy forbids it)"
	}
	return msg
}

// count is the calls the program counted so far, over all CPUs.
func (kp *kindProgram) count() (uint64, error) {
	var perCPU []bpf.HookbenchHit
	if err := kp.objs.Hits.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("read hits: %w", err)
	}
	var n uint64
	for _, h := range perCPU {
		n += h.Count
	}
	return n, nil
}

// attached runs fn with the program attached and returns the calls it
// counted meanwhile.
func (kp *kindProgram) attached(fn func()) (uint64, error) {
	l, err := kp.attach()
	if err != nil {
		return 0, fmt.Errorf("attach: %w", err)
	}
	before, err := kp.count()
	if err != nil {
		l.Close()
		return 0, err
	}
	fn()
	after, err := kp.count()
	if cerr := l.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("detach: %w", cerr)
	}
	return after - before, err
}

func measureKind(ctx context.Context, spec *ebpf.CollectionSpec, ps *ebpf.ProgramSpec, k Kind, tid int, cfg Config) (HookCost, error) {
	h := HookCost{Kind: k, Event: k.event()}
	kp, err := loadKind(spec, ps, k, tid)
	if err != nil {
		h.Refused = refusal(err)
		return h, nil
	}
	defer kp.Close()
	// The first attach says whether the kernel takes this kind at all.
	if l, err := kp.attach(); err != nil {
		h.Refused = refusal(fmt.Errorf("attach to %s: %w", k.event(), err))
		return h, nil
	} else if err := l.Close(); err != nil {
		return h, fmt.Errorf("detach: %w", err)
	}

	loop(cfg.Calls / 10) // warm the loop up
	var without, with []time.Duration
	for range cfg.Rounds {
		if err := ctx.Err(); err != nil {
			return h, err
		}
		without = append(without, loop(cfg.Calls))
		var per time.Duration
		n, err := kp.attached(func() { per = loop(cfg.Calls) })
		if err != nil {
			return h, err
		}
		with = append(with, per)
		h.Driven += uint64(cfg.Calls)
		h.Counted += n
	}
	h.Without, h.With = median(without), median(with)
	h.Noise = max(spread(without), spread(with))

	// The per-run measures, one round each, as for any program.
	costs, err := Profile(ctx, map[string]*ebpf.Program{kp.name: kp.prog}, func(context.Context) error {
		_, err := kp.attached(func() { loop(cfg.Calls) })
		return err
	})
	if err != nil {
		return h, err
	}
	h.Stats, h.Outside, h.OutsideRefused = costs[0].Stats, costs[0].Outside, costs[0].OutsideRefused
	return h, nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func spread(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds) - slices.Min(ds)
}
