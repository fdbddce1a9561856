package loader

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// probeEnv is what the hook checks share.
type probeEnv struct {
	caps       CapInfo
	kconf      kconfig
	spec       *btf.Spec // kernel BTF, nil if absent
	tracefsDir string    // mounted tracefs with events/, "" if none
	tracefsErr error     // why there is no tracefs
	mountedNow bool      // Probe mounted tracefs itself
}

// hookTracepoint is the event every hook check attaches to; it exists on
// every kernel hotlane supports and is what the tracer uses.
const hookTracepoint = "sched_switch"

// fentryTargets are functions that exist on every x86/arm64 kernel and are
// cheap to trace for an instant; the first one in kernel BTF is used.
func fentryTargets() []string {
	return []string{"do_nanosleep", "hrtimer_nanosleep", "ksys_read", "vfs_read"}
}

// kprobeTarget is the kernel symbol the kprobe check attaches to.
const kprobeTarget = "do_nanosleep"

// returns builds "r0 = v; exit".
func returns(v int32) asm.Instructions {
	return asm.Instructions{asm.Mov.Imm(asm.R0, v), asm.Return()}
}

// loadAndAttach loads spec, attaches it with attach (if not nil) and closes
// both again. what names the program for error messages.
func loadAndAttach(spec *ebpf.ProgramSpec, what string, attach func(*ebpf.Program) (link.Link, error)) error {
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		return fmt.Errorf("load %s: %w", what, err)
	}
	defer prog.Close()
	if attach == nil {
		return nil
	}
	l, err := attach(prog)
	if err != nil {
		return fmt.Errorf("attach %s: %w", what, err)
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("detach %s: %w", what, err)
	}
	return nil
}

func probeTpBTF(env *probeEnv) Feature {
	what := "tp_btf/" + hookTracepoint
	if env.spec == nil {
		return Feature{Name: FeatureTpBTF, Detail: "needs kernel BTF", Error: ErrNoBTF.Error(),
			Advice: "use a kernel with CONFIG_DEBUG_INFO_BTF; the tracer falls back to raw_tp"}
	}
	err := loadAndAttach(&ebpf.ProgramSpec{
		Name:         "hl_probe_tpbtf",
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceRawTp,
		AttachTo:     hookTracepoint,
		Instructions: returns(0),
		License:      "GPL",
	}, what, func(p *ebpf.Program) (link.Link, error) {
		return link.AttachTracing(link.TracingOptions{Program: p})
	})
	if err != nil {
		return env.failure(FeatureTpBTF, err, "the tracer falls back to raw_tp")
	}
	return Feature{Name: FeatureTpBTF, Available: true, Detail: "loaded and attached " + what}
}

func probeRawTP(env *probeEnv) Feature {
	what := "raw_tp/" + hookTracepoint
	err := loadAndAttach(&ebpf.ProgramSpec{
		Name:         "hl_probe_rawtp",
		Type:         ebpf.RawTracepoint,
		Instructions: returns(0),
		License:      "GPL",
	}, what, func(p *ebpf.Program) (link.Link, error) {
		return link.AttachRawTracepoint(link.RawTracepointOptions{Name: hookTracepoint, Program: p})
	})
	if err != nil {
		return env.failure(FeatureRawTP, err, "")
	}
	return Feature{Name: FeatureRawTP, Available: true, Detail: "loaded and attached " + what}
}

func probeTracepoint(env *probeEnv) Feature {
	what := "tracepoint/sched/" + hookTracepoint
	if env.tracefsDir == "" {
		f := Feature{Name: FeatureTracepoint, Detail: "tracefs is not mounted", Advice: "mount it: `mount -t tracefs nodev " + TracefsPath + "` (needs root)"}
		switch err := env.tracefsErr; {
		case errors.Is(err, os.ErrPermission) && !env.caps.canBPF():
			f.Detail = "tracefs is not accessible: permission denied"
			f.Advice = "run as root, or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN"
			f.Error = err.Error()
		case err != nil:
			f.Detail = "tracefs is not mounted and mounting it failed"
			f.Error = err.Error()
		}
		return f
	}
	err := loadAndAttach(&ebpf.ProgramSpec{
		Name:         "hl_probe_tp",
		Type:         ebpf.TracePoint,
		Instructions: returns(0),
		License:      "GPL",
	}, what, func(p *ebpf.Program) (link.Link, error) {
		return link.Tracepoint("sched", hookTracepoint, p, nil)
	})
	if err != nil {
		return env.failure(FeatureTracepoint, err, "")
	}
	where := "tracefs at " + env.tracefsDir
	if env.mountedNow {
		where = "tracefs mounted at " + env.tracefsDir + " by this probe"
	}
	return Feature{Name: FeatureTracepoint, Available: true, Detail: "loaded and attached " + what + " (" + where + ")"}
}

func probeFentry(env *probeEnv) Feature {
	if env.spec == nil {
		return Feature{Name: FeatureFentry, Detail: "needs kernel BTF", Error: ErrNoBTF.Error(),
			Advice: "fentry paths are exercised in the VM (`hotlane vm`)"}
	}
	target := ""
	for _, name := range fentryTargets() {
		if _, err := LookupKfunc(env.spec, name); err == nil {
			target = name
			break
		}
	}
	if target == "" {
		return Feature{Name: FeatureFentry, Detail: "none of " + strings.Join(fentryTargets(), ", ") + " is in kernel BTF",
			Advice: "fentry paths are exercised in the VM (`hotlane vm`)"}
	}
	what := "fentry/" + target
	err := loadAndAttach(&ebpf.ProgramSpec{
		Name:         "hl_probe_fentry",
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceFEntry,
		AttachTo:     target,
		Instructions: returns(0),
		License:      "GPL",
	}, what, func(p *ebpf.Program) (link.Link, error) {
		return link.AttachTracing(link.TracingOptions{Program: p})
	})
	if err != nil {
		return env.failure(FeatureFentry, err, "fentry paths (e.g. the DMA fallback) are exercised in the VM (`hotlane vm`)")
	}
	return Feature{Name: FeatureFentry, Available: true, Detail: "loaded and attached " + what}
}

func probeKprobe(env *probeEnv) Feature {
	what := "kprobe/" + kprobeTarget
	err := loadAndAttach(&ebpf.ProgramSpec{
		Name:         "hl_probe_kprobe",
		Type:         ebpf.Kprobe,
		Instructions: returns(0),
		License:      "GPL",
	}, what, func(p *ebpf.Program) (link.Link, error) {
		return link.Kprobe(kprobeTarget, p, nil)
	})
	if err == nil {
		return Feature{Name: FeatureKprobe, Available: true, Detail: "loaded and attached " + what}
	}
	const vm = "kprobe paths are exercised in the VM (`hotlane vm`)"
	_, pmuErr := os.Stat("/sys/bus/event_source/devices/kprobe")
	kp, known := env.kconf.value("CONFIG_KPROBES")
	if (known && kp == "n") || (!known && pmuErr != nil) {
		f := Feature{Name: FeatureKprobe, Error: err.Error()}
		if known {
			f.Detail = "this kernel has no kprobes (CONFIG_KPROBES is not set)"
		} else {
			f.Detail = "this kernel has no kprobe PMU (/sys/bus/event_source/devices/kprobe); CONFIG_KPROBES is probably off"
		}
		f.Advice = "this kernel lacks CONFIG_KPROBES: use a kernel built with it; " + vm
		return f
	}
	return env.failure(FeatureKprobe, err, vm)
}

func probeXDP(env *probeEnv) Feature {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "hl_probe_xdp",
		Type:         ebpf.XDP,
		Instructions: returns(2), // XDP_PASS
		License:      "GPL",
	})
	if err != nil {
		return env.failure(FeatureXDP, fmt.Errorf("load xdp: %w", err), "")
	}
	defer prog.Close()
	f := Feature{Name: FeatureXDP, Available: true, Detail: "loaded an XDP program"}
	// BPF_PROG_RUN proves it runs; 64 bytes is more than the 14-byte
	// Ethernet header the kernel insists on.
	ret, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)})
	switch {
	case err != nil:
		f.Detail += fmt.Sprintf(" (BPF_PROG_RUN failed: %s)", CleanError(err))
	case ret != 2:
		f.Detail += fmt.Sprintf(" (BPF_PROG_RUN returned %d, want XDP_PASS)", ret)
	default:
		f.Detail += "; BPF_PROG_RUN returned XDP_PASS"
	}
	return f
}

// enotsupp is the kernel-internal ENOTSUPP (524) that the bpf syscall
// leaks, e.g. for fentry without ftrace direct calls.
const enotsupp = syscall.Errno(524)

// failure turns a failed hook check into a Feature that says what happened
// and what to do. fallback is advice to use when the kernel, not the
// process's privileges, is at fault ("" for generic advice).
func (env *probeEnv) failure(name string, err error, fallback string) Feature {
	f := Feature{Name: name, Error: err.Error()}
	if fallback == "" {
		fallback = "run `hotlane vm` for a kernel where it works"
	}
	var verr *ebpf.VerifierError
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		if !env.caps.canBPF() {
			f.Detail = "permission denied"
			f.Advice = "run as root, or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN"
			return f
		}
		f.Detail = firstClause(err) + ": EPERM although we hold CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (lockdown, an LSM or kernel policy)"
		f.Advice = "this kernel does not allow " + name + "; " + fallback
	case errors.As(err, &verr):
		f.Detail = firstClause(err) + ": verifier rejected the test program: " + LastVerifierLine(verr.Log)
		f.Advice = fallback
	case errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, enotsupp) || errors.Is(err, unix.EOPNOTSUPP):
		f.Detail = firstClause(err) + ": not supported by this kernel"
		f.Advice = fallback
	case errors.Is(err, os.ErrNotExist):
		f.Detail = firstClause(err) + ": attach point not found"
		f.Advice = fallback
	default:
		f.Detail = CleanError(err)
		f.Advice = fallback
	}
	return f
}

// firstClause returns "load fentry/do_nanosleep" from
// "load fentry/do_nanosleep: operation not permitted ...".
func firstClause(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": "); i > 0 {
		return s[:i]
	}
	return s
}

// CleanError is err's first line without cilium/ebpf's memlock hint,
// which is wrong on the memcg-accounted kernels hotlane supports.
func CleanError(err error) string {
	s := err.Error()
	if i := strings.Index(s, " (MEMLOCK may be too low"); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// LastVerifierLine is the verifier log's last line that says something
// (not the "processed N insns" summary): usually why it refused.
func LastVerifierLine(log []string) string {
	if l := VerifierExcerpt(log, 1); len(l) == 1 {
		return l[0]
	}
	return "(no verifier log)"
}

// VerifierExcerpt is the last n lines of a verifier log before its
// closing statistics ("processed N insns ...", "verification time",
// "stack depth"), so that it ends with the line that says why the program
// was refused. Printed last, that line is what a reader (or a bench that
// keeps a scheduler's last line) sees.
func VerifierExcerpt(log []string, n int) []string {
	end := len(log)
	for end > 0 {
		l := strings.TrimSpace(log[end-1])
		if l != "" && !strings.HasPrefix(l, "processed ") && !strings.HasPrefix(l, "verification time ") && !strings.HasPrefix(l, "stack depth ") {
			break
		}
		end--
	}
	return log[max(end-n, 0):end]
}
