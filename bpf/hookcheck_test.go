//go:build linux && (386 || amd64)

package bpf

import (
	"encoding/binary"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// nanosleepTarget is the kernel function the fentry and kprobe programs hook.
// It must stay in sync with hookcheck.bpf.c; the VM tests call nanosleep(2)
// to trigger it.
const nanosleepTarget = "hrtimer_nanosleep"

// TestHookcheckSpec checks the compiled object itself: one program of the
// expected type per hook family, attached where the C code says, with BTF and
// a GPL license. It needs no privileges.
func TestHookcheckSpec(t *testing.T) {
	spec, err := LoadHookcheck()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Types == nil {
		t.Fatal("object has no BTF; was .BTF stripped?")
	}

	want := []struct {
		name     string
		typ      ebpf.ProgramType
		attachTo string
	}{
		{HookcheckProgTpBtfSwitch, ebpf.Tracing, "sched_switch"},
		{HookcheckProgRawTpSwitch, ebpf.RawTracepoint, "sched_switch"},
		{HookcheckProgTpSwitch, ebpf.TracePoint, "sched/sched_switch"},
		{HookcheckProgFentryNanosleep, ebpf.Tracing, nanosleepTarget},
		{HookcheckProgKprobeNanosleep, ebpf.Kprobe, nanosleepTarget},
		{HookcheckProgXdpPass, ebpf.XDP, ""},
	}
	if len(spec.Programs) != len(want) {
		t.Errorf("object has %d programs, want %d", len(spec.Programs), len(want))
	}
	for _, w := range want {
		p := spec.Programs[w.name]
		if p == nil {
			t.Errorf("program %s missing", w.name)
			continue
		}
		if p.Type != w.typ {
			t.Errorf("%s: type %v, want %v", w.name, p.Type, w.typ)
		}
		if p.AttachTo != w.attachTo {
			t.Errorf("%s: attaches to %q, want %q", w.name, p.AttachTo, w.attachTo)
		}
		if p.License != "GPL" {
			t.Errorf("%s: license %q, want GPL", w.name, p.License)
		}
	}
}

// hostObjects is the part of HookcheckObjects that works on the build host.
// fentry loads fail there with EPERM and the kernel has no CONFIG_KPROBES
// (DESIGN.md §2), so those two programs are left out: LoadAndAssign loads
// only the programs a struct names. The VM tests cover them.
type hostObjects struct {
	TpBtfSwitch *ebpf.Program `ebpf:"tp_btf_switch"`
	RawTpSwitch *ebpf.Program `ebpf:"raw_tp_switch"`
	TpSwitch    *ebpf.Program `ebpf:"tp_switch"`
	XdpPass     *ebpf.Program `ebpf:"xdp_pass"`
	HookcheckVariables
}

func (o *hostObjects) Close() error {
	return _HookcheckClose(o.TpBtfSwitch, o.RawTpSwitch, o.TpSwitch, o.XdpPass)
}

// TestHookcheckHost loads the host-capable hookcheck programs into the running
// kernel and checks that each one is really called.
func TestHookcheckHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF programs into the running kernel")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}

	spec, err := LoadHookcheck()
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Variables[HookcheckVarOwnTgid].Set(uint32(os.Getpid())); err != nil {
		t.Fatal(err)
	}
	var objs hostObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("verifier rejected hookcheck: %+v", ve)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })

	// The sched_switch programs count every switch, and separately switches
	// to one of this process's threads; the latter proves they read
	// next->tgid at the right offset (directly for tp_btf, through a CO-RE
	// probe read for raw_tp).
	t.Run("tp_btf", func(t *testing.T) {
		l, err := link.AttachTracing(link.TracingOptions{Program: objs.TpBtfSwitch})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		sleepUntilCounted(t, objs.TpBtfHits, objs.TpBtfOwnHits)
	})

	t.Run("raw_tp", func(t *testing.T) {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{
			Name: "sched_switch", Program: objs.RawTpSwitch,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		sleepUntilCounted(t, objs.RawTpHits, objs.RawTpOwnHits)
	})

	t.Run("tracepoint", func(t *testing.T) {
		ensureTracefs(t)
		l, err := link.Tracepoint("sched", "sched_switch", objs.TpSwitch, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		sleepUntilCounted(t, objs.TracepointHits)
	})

	t.Run("xdp", func(t *testing.T) {
		// BPF_PROG_RUN needs no interface: the kernel hands the program a
		// copy of the frame, so the exact number of runs is known.
		const runs = 3
		frame := ethernetFrame(64)
		ret, err := objs.XdpPass.Run(&ebpf.RunOptions{Data: frame, Repeat: runs})
		if err != nil {
			t.Fatal(err)
		}
		const xdpPass = 2 // enum xdp_action XDP_PASS
		if ret != xdpPass {
			t.Errorf("xdp_pass returned %d, want XDP_PASS (%d)", ret, xdpPass)
		}
		if got := readCounter(t, objs.XdpHits); got != runs {
			t.Errorf("xdp_hits = %d after %d runs", got, runs)
		}
		if got := readCounter(t, objs.XdpLastLen); got != uint64(len(frame)) {
			t.Errorf("xdp_last_len = %d, want the frame length %d", got, len(frame))
		}
	})
}

// sleepUntilCounted blocks this test's thread in nanosleep(2) until every
// counter has grown, failing after a fixed number of attempts. Each sleep is
// a switch away from this thread and, when it wakes, a switch back to it.
func sleepUntilCounted(t *testing.T, counters ...*ebpf.Variable) {
	t.Helper()
	start := make([]uint64, len(counters))
	for i, c := range counters {
		start[i] = readCounter(t, c)
	}
	const attempts = 1000
	for range attempts {
		ts := syscall.Timespec{Nsec: 1_000_000}
		if err := syscall.Nanosleep(&ts, nil); err != nil && err != syscall.EINTR {
			t.Fatal(err)
		}
		grown := true
		for i, c := range counters {
			if readCounter(t, c) <= start[i] {
				grown = false
			}
		}
		if grown {
			return
		}
	}
	for i, c := range counters {
		if got := readCounter(t, c); got <= start[i] {
			t.Errorf("counter %s stayed at %d over %d sleeps: the program never ran (or never matched)",
				c, got, attempts)
		}
	}
}

func readCounter(t *testing.T, v *ebpf.Variable) uint64 {
	t.Helper()
	var n uint64
	if err := v.Get(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ensureTracefs mounts tracefs at its usual place when nothing is mounted
// there yet; classic tracepoints are attached through it. The mount is left
// in place: other tests may be using it by the time this one ends.
func ensureTracefs(t *testing.T) {
	t.Helper()
	const dir = "/sys/kernel/tracing"
	mounted := func() bool {
		ents, err := os.ReadDir(dir + "/events")
		return err == nil && len(ents) > 0
	}
	if mounted() {
		return
	}
	err := syscall.Mount("nodev", dir, "tracefs", 0, "")
	if err != nil && !mounted() {
		t.Fatalf("mount tracefs on %s: %v", dir, err)
	}
}

// ethernetFrame returns a broadcast Ethernet frame of n bytes with a zero
// payload and the local-experimental EtherType, which nothing will act on.
func ethernetFrame(n int) []byte {
	f := make([]byte, n)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // dst
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 0x01})            // src, locally administered
	binary.BigEndian.PutUint16(f[12:14], 0x88b5)
	return f
}
