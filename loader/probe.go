package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/topology"
)

// adviceVM is the way out whenever this kernel cannot run sched_ext.
const adviceVM = "run `hotlane vm` or use a 6.12+ kernel built with it"

// ProbeOptions tunes Probe.
type ProbeOptions struct {
	// NoMount stops Probe from mounting tracefs at /sys/kernel/tracing
	// when no tracefs is mounted; the tracepoint check then reports it
	// missing instead.
	NoMount bool
}

// Probe finds out what the running kernel and this process support:
// kernel release, capabilities, BTF, sched_ext (state, running scheduler,
// kfunc generation) and which hook types load and attach. Hook checks load
// tiny test programs, attach them and close everything again, so nothing
// stays attached. If tracefs is not mounted Probe mounts it (unless
// opts.NoMount) and says so in Notes; it must run before anything else in
// the process looks for tracefs, because cilium/ebpf caches that lookup.
//
// Missing features are reported in the result, not as errors; the error is
// non-nil only when ctx ends or the kernel release cannot be read.
func Probe(ctx context.Context, opts ProbeOptions) (*Features, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return nil, fmt.Errorf("uname: %w", err)
	}
	started := time.Now()
	f := &Features{
		Header:  report.NewHeader("doctor", started),
		Machine: unix.ByteSliceToString(uts.Machine[:]),
		Euid:    os.Geteuid(),
	}
	f.Kernel = unix.ByteSliceToString(uts.Release[:]) // the release the config is read for
	f.Topology, _ = topology.Read(topology.SysfsRoot)
	kconf := readKconfig(f.Kernel)
	f.Kconfig = kconf.source

	env := &probeEnv{kconf: kconf}
	f.Checks = append(f.Checks, probeCaps(f, env))

	spec, btfCheck := probeBTF()
	env.spec = spec
	f.Checks = append(f.Checks, btfCheck)
	f.Checks = append(f.Checks, probeSchedExt(f, spec, kconf))
	f.Checks = append(f.Checks, probeScxKfuncs(f, spec))

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	// Mount tracefs before any hook check: cilium/ebpf looks for tracefs
	// once per process (kprobe falls back to it too).
	dir, mounted, err := EnsureTracefs(!opts.NoMount)
	env.tracefsDir, env.tracefsErr, env.mountedNow = dir, err, mounted && err == nil
	if mounted && err == nil {
		f.Notes = append(f.Notes, fmt.Sprintf("tracefs was not mounted; mounted it at %s (it stays mounted)", TracefsPath))
	}

	hooks := []func(*probeEnv) Feature{
		probeTpBTF, probeRawTP, probeTracepoint, probeFentry, probeKprobe, probeXDP,
	}
	for _, hook := range hooks {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("probe: %w", err)
		}
		f.Checks = append(f.Checks, hook(env))
	}
	f.Finish(time.Since(started), nil)
	return f, nil
}

// probeCaps fills f.Caps and returns the caps check.
func probeCaps(f *Features, env *probeEnv) Feature {
	c := Feature{Name: FeatureCaps}
	eff, err := effectiveCaps()
	if err != nil {
		c.Detail = "cannot read the effective capabilities"
		c.Error = err.Error()
		c.Advice = "run as root"
		f.Caps = CapsFromMask(0)
		env.caps = f.Caps
		return c
	}
	f.Caps = CapsFromMask(eff)
	env.caps = f.Caps
	if len(f.Caps.Missing) == 0 {
		c.Available = true
		c.Detail = strings.Join(f.Caps.Have, ", ")
		return c
	}
	c.Detail = "missing " + strings.Join(f.Caps.Missing, ", ")
	if len(f.Caps.Have) > 0 {
		c.Detail += " (have " + strings.Join(f.Caps.Have, ", ") + ")"
	}
	if f.Euid == 0 {
		c.Advice = "running as root but without these capabilities (a container's bounding set?): run privileged or add them"
	} else {
		c.Advice = "run as root (sudo), or grant them: setcap cap_bpf,cap_perfmon,cap_sys_admin,cap_net_admin+ep <hotlane binary>"
	}
	return c
}

// probeBTF loads the kernel's BTF.
func probeBTF() (*btf.Spec, Feature) {
	c := Feature{Name: FeatureBTF}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		c.Detail = "no kernel BTF"
		c.Error = fmt.Errorf("%w: %w", ErrNoBTF, err).Error()
		c.Advice = "this kernel lacks CONFIG_DEBUG_INFO_BTF (needed for tp_btf, fentry, kfuncs and sched_ext): run `hotlane vm` or use a kernel built with it"
		return nil, c
	}
	c.Available = true
	if fi, err := os.Stat(KernelBTFPath); err == nil {
		c.Detail = fmt.Sprintf("%s (%.1f MB)", KernelBTFPath, float64(fi.Size())/1e6)
	} else {
		c.Detail = "read from a vmlinux image (no " + KernelBTFPath + ")"
	}
	return spec, c
}

// probeSchedExt fills f.SchedExt (except Kfuncs) and returns its check.
func probeSchedExt(f *Features, spec *btf.Spec, kconf kconfig) Feature {
	c := Feature{Name: FeatureSchedExt}
	se := &f.SchedExt
	se.InBTF = spec != nil && HasSchedExtOps(spec)
	if v, ok := kconf.value("CONFIG_SCHED_CLASS_EXT"); ok {
		se.Kconfig = v
	}
	sys, err := ReadSchedExtStatus(SchedExtSysfs)
	se.Sysfs, se.State, se.Ops, se.SwitchAll = sys.Present, sys.State, sys.Ops, sys.SwitchAll
	if err != nil {
		c.Error = err.Error()
	}
	switch {
	case se.InBTF && se.Sysfs:
		c.Available = true
		c.Detail = "state " + orDash(se.State)
		if se.Ops != "" {
			mode := "partial: SCHED_EXT tasks only"
			if se.SwitchAll {
				mode = "all tasks"
			}
			c.Detail += fmt.Sprintf(", BPF scheduler %q running (%s); hotlane cannot load until it exits", se.Ops, mode)
		} else {
			c.Detail += ", no BPF scheduler running"
		}
	case se.InBTF:
		c.Detail = "sched_ext_ops is in kernel BTF but " + SchedExtSysfs + " is missing"
		c.Advice = "mount sysfs (mount -t sysfs sysfs /sys) and check again"
	case spec == nil && se.Sysfs:
		c.Detail = SchedExtSysfs + " exists but there is no kernel BTF to load a scheduler against"
		c.Advice = "use a kernel built with CONFIG_DEBUG_INFO_BTF, or " + adviceVM
	default:
		c.Detail = "no sched_ext_ops in kernel BTF, no " + SchedExtSysfs
		if spec == nil {
			c.Detail = "no " + SchedExtSysfs + " (and no kernel BTF)"
		}
		if se.Kconfig == "n" {
			c.Detail += "; CONFIG_SCHED_CLASS_EXT is not set"
		}
		c.Advice = "this kernel lacks CONFIG_SCHED_CLASS_EXT: " + adviceVM
		if c.Error == "" {
			c.Error = ErrNoSchedExt.Error()
		}
	}
	return c
}

// probeScxKfuncs fills f.SchedExt.Kfuncs and returns the scx_kfuncs check.
func probeScxKfuncs(f *Features, spec *btf.Spec) Feature {
	c := Feature{Name: FeatureScxKfuncs}
	if spec == nil {
		c.Detail = "no kernel BTF to read the scx kfuncs from"
		c.Error = ErrNoBTF.Error()
		c.Advice = "needs kernel BTF and sched_ext: " + adviceVM
		return c
	}
	k, err := KfuncsFromBTF(spec)
	var object string
	if err == nil {
		object, err = k.SchedObject()
	}
	switch {
	case err == nil:
		f.SchedExt.Kfuncs = &k
		c.Available = true
		c.Detail = fmt.Sprintf("API %s: %s, %s, %s, %s (scheduler object %s)", k.API, k.DsqInsert, k.DsqMoveToLocal, k.DsqInsertVtime, k.DsqMove, object)
	case errors.Is(err, ErrNoSchedObject):
		f.SchedExt.Kfuncs = &k
		c.Detail = "sched_ext is here, but its kfuncs are a mix no build of hotlane's scheduler calls"
		c.Error = err.Error()
		c.Advice = "`hotlane run` refuses this kernel (6.19 and 7.0 have this mix); use 6.12, 6.13-6.18 or 7.1+, or `hotlane vm`"
	case errors.Is(err, ErrNoSchedExt):
		c.Detail = "no scx kfuncs in kernel BTF"
		c.Error = err.Error()
		c.Advice = "they come with CONFIG_SCHED_CLASS_EXT: " + adviceVM
	default:
		if k.API != KfuncAPIUnknown {
			f.SchedExt.Kfuncs = &k
		}
		c.Detail = "sched_ext is here but its kfuncs are not ones hotlane knows how to call"
		c.Error = err.Error()
		c.Advice = "this kernel's scx kfunc API is newer or older than hotlane supports: update hotlane, or run `hotlane vm`"
	}
	return c
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
