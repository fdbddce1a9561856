package loader

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: hook checks load and attach BPF programs (run the tests as root)")
	}
}

func TestProbeHost(t *testing.T) {
	requireRoot(t)
	f, err := Probe(context.Background(), ProbeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := f.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("doctor report:\n%s", text.String())

	if f.Kernel == "" || f.Machine == "" {
		t.Errorf("kernel release/machine empty: %+v", f)
	}
	var names []string
	for _, c := range f.Checks {
		names = append(names, c.Name)
		if c.Detail == "" {
			t.Errorf("%s has no detail", c.Name)
		}
		if !c.Available && c.Advice == "" {
			t.Errorf("%s is missing but has no advice: %+v", c.Name, c)
		}
	}
	if strings.Join(names, ",") != strings.Join(FeatureNames(), ",") {
		t.Errorf("checks %v, want %v", names, FeatureNames())
	}

	// What every machine hotlane runs on (and the CI host) provides.
	for _, name := range []string{FeatureCaps, FeatureBTF, FeatureTpBTF, FeatureRawTP, FeatureXDP} {
		if c, _ := f.Get(name); !c.Available {
			t.Errorf("%s should be available here: %+v", name, c)
		}
	}

	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	se, _ := f.Get(FeatureSchedExt)
	kf, _ := f.Get(FeatureScxKfuncs)
	if HasSchedExtOps(spec) {
		if !se.Available || !kf.Available || f.SchedExt.Kfuncs == nil {
			t.Errorf("kernel has sched_ext but: %+v / %+v", se, kf)
		}
	} else {
		if se.Available || kf.Available {
			t.Errorf("kernel without sched_ext_ops reports sched_ext available: %+v / %+v", se, kf)
		}
		if !strings.Contains(se.Advice, "hotlane vm") || !strings.Contains(se.Advice, "CONFIG_SCHED_CLASS_EXT") {
			t.Errorf("sched_ext advice should name CONFIG_SCHED_CLASS_EXT and `hotlane vm`: %q", se.Advice)
		}
		if f.SchedExt.InBTF || f.SchedExt.Kfuncs != nil {
			t.Errorf("SchedExt = %+v", f.SchedExt)
		}
	}
	if got := f.Missing([]string{FeatureSchedExt}); (len(got) == 0) != se.Available {
		t.Errorf("Missing(sched_ext) = %v, but available = %v", got, se.Available)
	}

	// The classic tracepoint works once tracefs is (or was made) mounted.
	if tp, _ := f.Get(FeatureTracepoint); !tp.Available {
		t.Errorf("tracepoint should be available as root (tracefs mountable): %+v", tp)
	}
	// This host's fentry and kprobe are known not to work; whatever the
	// machine, a missing one must point somewhere useful.
	for _, name := range []string{FeatureFentry, FeatureKprobe} {
		c, _ := f.Get(name)
		if !c.Available && !strings.Contains(c.Advice, "hotlane vm") {
			t.Errorf("%s missing without pointing at the VM: %+v", name, c)
		}
	}

	assertNoProbeProgramsLeft(t)
}

// assertNoProbeProgramsLeft fails if any hl_probe_* program is still
// loaded, i.e. something Probe attached was not closed. The kernel frees
// programs after their last reference goes, which may lag the close
// slightly, so it waits for them to go.
func assertNoProbeProgramsLeft(t *testing.T) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = left[:0]
		for id := ebpf.ProgramID(0); ; {
			next, err := ebpf.ProgramGetNextID(id)
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if err != nil {
				t.Fatalf("list programs: %v", err)
			}
			id = next
			p, err := ebpf.NewProgramFromID(id)
			if err != nil {
				continue // freed meanwhile
			}
			if info, err := p.Info(); err == nil && strings.HasPrefix(info.Name, "hl_probe_") {
				left = append(left, info.Name)
			}
			p.Close()
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("probe programs still loaded after Probe returned: %v", left)
	}
}

func TestProbeCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Probe(ctx, ProbeOptions{NoMount: true}); !errors.Is(err, context.Canceled) {
		t.Errorf("Probe with a cancelled context: %v, want context.Canceled", err)
	}
}
