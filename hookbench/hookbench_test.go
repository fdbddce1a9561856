package hookbench_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/hookbench"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/vm/vmtest"
	"github.com/hotlane/hotlane/workloads"
)

// TestVM runs the TestGuest* tests inside the sched_ext VM, whose kernel
// allows fentry and kprobes (this host's refuses both).
func TestVM(t *testing.T) {
	vmtest.RunGuestTests(t, vmtest.Options{Run: "^TestGuest", Timeout: 5 * time.Minute})
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loads BPF programs into the running kernel: run as root")
	}
}

func TestParseKinds(t *testing.T) {
	all, err := hookbench.ParseKinds(nil)
	if err != nil || len(all) != len(hookbench.Kinds()) {
		t.Errorf("ParseKinds(nil) = %v, %v; want every kind", all, err)
	}
	got, err := hookbench.ParseKinds([]string{"kprobe", "tp_btf", "kprobe"})
	if err != nil || len(got) != 2 || got[0] != hookbench.Kprobe || got[1] != hookbench.TpBTF {
		t.Errorf("ParseKinds(kprobe,tp_btf,kprobe) = %v, %v", got, err)
	}
	if _, err := hookbench.ParseKinds([]string{"kprobes"}); !errors.Is(err, hookbench.ErrUnknownKind) || !strings.Contains(err.Error(), `"kprobes"`) {
		t.Errorf("ParseKinds(kprobes) = %v, want ErrUnknownKind naming it", err)
	}
}

func TestWriteText(t *testing.T) {
	rep := &hookbench.Report{Header: report.Header{Kernel: "6.18.0"}, Calls: 1000, Rounds: 3, Hooks: []hookbench.HookCost{
		{Kind: hookbench.TpBTF, Event: "raw_syscalls:sys_enter", Driven: 3000, Counted: 3000,
			Without: 100 * time.Nanosecond, With: 140 * time.Nanosecond, Noise: 5 * time.Nanosecond,
			Stats:   report.ProgramCost{Runs: 1000, Total: 20 * time.Microsecond},
			Outside: report.ProgramCost{}, OutsideRefused: "attach prof_enter: permission denied"},
		{Kind: hookbench.RawTp, Event: "raw_syscalls:sys_enter", Driven: 3000, Counted: 3000,
			Without: 100 * time.Nanosecond, With: 120 * time.Nanosecond, Noise: 5 * time.Nanosecond},
		{Kind: hookbench.Kprobe, Event: "__x64_sys_getpid", Refused: "attach hb_kprobe: permission denied"},
	}}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"tp_btf", "+40ns", "±5ns", "20ns", "3000/3000",
		"tp_btf        ######################################## +40ns",
		"raw_tp        ####################                     +20ns",
		"refused by this kernel:\n  kprobe        attach hb_kprobe: permission denied",
		"tp_btf: attach prof_enter: permission denied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

// checkHooks asserts what any run must show for the kinds that ran, and
// that the kinds in must ran.
func checkHooks(t *testing.T, rep *hookbench.Report, must ...hookbench.Kind) {
	t.Helper()
	var text strings.Builder
	rep.WriteText(&text)
	t.Logf("report:\n%s", text.String())
	ran := map[hookbench.Kind]bool{}
	for _, h := range rep.Hooks {
		if h.Refused != "" {
			continue
		}
		ran[h.Kind] = true
		// Exact: the program counts only the driving thread's getpid calls.
		if h.Driven != uint64(rep.Calls*rep.Rounds) || h.Counted != h.Driven {
			t.Errorf("%s: counted %d of %d calls driven, want %d and all", h.Kind, h.Counted, h.Driven, rep.Calls*rep.Rounds)
		}
		if h.Added() < -h.Noise {
			t.Errorf("%s: with %s per call is cheaper than without %s beyond the noise %s", h.Kind, h.With, h.Without, h.Noise)
		}
		if h.Stats.Runs < uint64(rep.Calls) || h.Stats.Total <= 0 {
			t.Errorf("%s: run-time statistics %+v over a round of %d calls", h.Kind, h.Stats, rep.Calls)
		}
		if h.OutsideRefused == "" && (h.Outside.Runs < uint64(rep.Calls) || h.Outside.Total <= 0) {
			t.Errorf("%s: fentry/fexit on the program saw %+v over a round of %d calls", h.Kind, h.Outside, rep.Calls)
		}
	}
	for _, k := range must {
		if !ran[k] {
			t.Errorf("%s was not measured on this kernel", k)
		}
	}
}

// The hooks this host allows: tp_btf and raw_tp (it refuses fentry and
// kprobes with EPERM; those are measured in the VM).
func TestHooksOnHost(t *testing.T) {
	requireRoot(t)
	if vm.InGuest() {
		t.Skip("TestGuestHooks covers the VM")
	}
	rep, err := hookbench.Run(context.Background(), hookbench.Config{Calls: 20000, Rounds: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Hooks) != len(hookbench.Kinds()) {
		t.Errorf("%d hooks in the report, want one per kind (%d)", len(rep.Hooks), len(hookbench.Kinds()))
	}
	checkHooks(t, rep, hookbench.TpBTF, hookbench.RawTp)
}

func TestGuestHooks(t *testing.T) {
	vmtest.RequireGuest(t)
	rep, err := hookbench.Run(context.Background(), hookbench.Config{Calls: 5000, Rounds: 3})
	if err != nil {
		t.Fatal(err)
	}
	checkHooks(t, rep, hookbench.FEntry, hookbench.FExit, hookbench.TpBTF, hookbench.RawTp, hookbench.Kprobe, hookbench.Kretprobe)
	for _, h := range rep.Hooks {
		if h.Kind == hookbench.FEntry && h.OutsideRefused != "" {
			t.Errorf("fentry on the fentry program refused on %s: %s", rep.Kernel, h.OutsideRefused)
		}
	}
}

// The tracer's programs, profiled while threads bounce a byte over pipes:
// both measures see them run.
func testProfileTracer(t *testing.T, wantOutside bool) {
	table, err := policy.Default("hb-ping").Compile("")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := verify.Attach(verify.TracerConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	drive := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := workloads.Messaging{Comm: "hb-ping", Pairs: 1}.Run(ctx)
		return err
	}
	costs, err := hookbench.Profile(context.Background(), tr.Programs(), drive)
	if err != nil {
		t.Fatal(err)
	}
	switched := false
	for _, c := range costs {
		t.Logf("%s: stats %d runs %s/run; outside %d runs %s/run %s", c.Program, c.Stats.Runs, c.Stats.PerRun(), c.Outside.Runs, c.Outside.PerRun(), c.OutsideRefused)
		if strings.Contains(c.Program, "switch") && c.Stats.Runs > 0 {
			switched = true
			if wantOutside && (c.OutsideRefused != "" || c.Outside.Runs == 0) {
				t.Errorf("%s: fentry/fexit on it saw %d runs (%s)", c.Program, c.Outside.Runs, c.OutsideRefused)
			}
		}
	}
	if !switched {
		t.Errorf("no sched_switch program of the tracer ran: %+v", costs)
	}
}

func TestProfileTracerOnHost(t *testing.T) {
	requireRoot(t)
	if vm.InGuest() {
		t.Skip("TestGuestProfileTracer covers the VM")
	}
	testProfileTracer(t, false)
}

func TestGuestProfileTracer(t *testing.T) {
	vmtest.RequireGuest(t)
	testProfileTracer(t, true)
}
