package dma

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/hotlane/hotlane/vm"
)

// requireRoot skips host tests that load BPF when not root; inside the VM
// the TestGuest* tests cover the same ground with real DMA.
func requireRoot(t *testing.T) {
	t.Helper()
	if vm.InGuest() {
		t.Skip("host test")
	}
	if os.Geteuid() != 0 {
		t.Skip("loads BPF programs: run as root")
	}
}

// ourPrograms lists the loaded BPF programs of this probe (names start
// with hldma_; the kernel keeps 15 characters).
func ourPrograms(t *testing.T) []string {
	t.Helper()
	var names []string
	id := ebpf.ProgramID(0)
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return names
		}
		if err != nil {
			t.Fatalf("list BPF programs: %v", err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err == nil && strings.HasPrefix(info.Name, "hldma_") {
			names = append(names, info.Name)
		}
	}
}

// requireNothingAttached waits for the kernel to free our programs (it
// does so after the last link and descriptor are gone, a little later).
func requireNothingAttached(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := ourPrograms(t)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("BPF programs still loaded: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func requireOneLine(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line:\n%s", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// The host's virtio devices do no DMA-API mapping, so the host checks
// attach, a clean zero report and detach for each family that works here.
func TestHostAttachDetach(t *testing.T) {
	requireRoot(t)
	requireNothingAttached(t)
	for _, hooks := range []string{HooksAuto, HooksTracepoint} {
		t.Run(hooks, func(t *testing.T) {
			pr, err := Start(Options{Hooks: hooks})
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			if len(ourPrograms(t)) == 0 {
				t.Error("no hldma_ programs loaded while attached")
			}
			want := map[string]string{HooksAuto: "tp_btf/dma_map_phys", HooksTracepoint: "tracepoint/dma/dma_map_phys"}[hooks]
			if hooks == HooksAuto && pr.Family() != HooksTpBTF {
				t.Logf("auto picked %s here (notes %v)", pr.Family(), pr.Notes())
				want = ""
			}
			if want != "" && !strings.Contains(strings.Join(pr.Hooks(), " "), want) {
				t.Errorf("hooks %v lack %s", pr.Hooks(), want)
			}
			if len(pr.LatencyHooks()) == 0 && len(pr.Notes()) == 0 {
				t.Error("latency not measured and no note says why")
			}
			time.Sleep(200 * time.Millisecond)
			res, err := pr.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := res.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if err := res.WriteJSON(&b); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", b.String())
			if len(res.Losses) != len(lossNames())+1 {
				t.Errorf("losses %v: every kind must be listed", res.Losses)
			}
			if err := pr.Close(); err != nil {
				t.Fatal(err)
			}
			if err := pr.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := pr.Snapshot(); err == nil {
				t.Error("Snapshot after Close succeeded")
			}
			requireNothingAttached(t)
		})
	}
}

// A tracepoint this kernel does not have (6.18 renamed dma_map_page) is one
// clear line and nothing is loaded.
func TestHostMissingTracepoint(t *testing.T) {
	requireRoot(t)
	for _, hooks := range []string{HooksAuto, HooksTpBTF, HooksTracepoint} {
		_, err := Start(Options{Hooks: hooks, Events: []string{"dma_map_phys", "dma_map_page"}})
		if !errors.Is(err, ErrMissingTracepoint) {
			t.Fatalf("%s: %v, want ErrMissingTracepoint", hooks, err)
		}
		requireOneLine(t, err, "dma:dma_map_page does not exist on this kernel", "it has: dma_map_phys")
		requireNothingAttached(t)
	}
}

// When attaching fails half-way (here: the last tracepoint does not
// exist), what was attached is detached again.
func TestHostAttachFailureDetachesEverything(t *testing.T) {
	requireRoot(t)
	_, err := Start(Options{Hooks: HooksTracepoint, Latency: LatencyOff, failAttach: "dma_no_such_event"})
	if !errors.Is(err, ErrMissingTracepoint) {
		t.Fatalf("%v, want ErrMissingTracepoint", err)
	}
	requireOneLine(t, err, "dma:dma_no_such_event does not exist")
	requireNothingAttached(t)
}

// Options Start refuses before touching the kernel, and fentry on the host
// (EPERM there): one line each, nothing attached.
func TestHostBadOptions(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Hooks: "kprobe"}, `hooks "kprobe"`},
		{Options{Latency: "maybe"}, `latency "maybe"`},
		{Options{Events: []string{"dma_map_bogus"}}, `unknown DMA tracepoint "dma_map_bogus"`},
		{Options{Hooks: HooksFentry, Events: []string{"dma_map_phys"}}, "do not apply to --hook fentry"},
	} {
		_, err := Start(tc.opts)
		if !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: %v, want ErrBadOptions", tc.opts, err)
			continue
		}
		requireOneLine(t, err, tc.want)
	}
	requireNothingAttached(t)

	// fentry fails on the build host (DESIGN.md §2); elsewhere it works.
	pr, err := Start(Options{Hooks: HooksFentry})
	if err == nil {
		t.Logf("fentry works here: %v", pr.Hooks())
		pr.Close()
	} else {
		requireOneLine(t, err, "fentry")
		t.Log(err)
	}
	if pr, err := Start(Options{Latency: LatencyOn}); err == nil {
		t.Logf("map latency measurable here: %v", pr.LatencyHooks())
		pr.Close()
	} else {
		if !errors.Is(err, ErrNoLatency) {
			t.Errorf("latency on: %v, want ErrNoLatency", err)
		}
		requireOneLine(t, err, "map latency cannot be measured")
	}
	requireNothingAttached(t)
}
