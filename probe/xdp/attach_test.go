package xdp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// oneLine fails unless err is a non-empty single line matching want.
func oneLine(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %q", want)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
		t.Errorf("error %q: want one line containing %q", msg, want)
	}
}

// TestRunBadInput: the errors a user meets first need no privileges and
// leave nothing behind.
func TestRunBadInput(t *testing.T) {
	ctx := context.Background()
	_, err := Run(ctx, Config{Interface: "hltest-nope0"}, Options{})
	oneLine(t, err, "no interface hltest-nope0; see `ip link`")
	if !errors.Is(err, ErrNoInterface) {
		t.Errorf("%v does not match ErrNoInterface", err)
	}
	_, err = Run(ctx, Config{}, Options{})
	oneLine(t, err, "--iface")

	_, err = Run(ctx, Config{Interface: "lo", Policy: Policy{Drop: setOf(IPv6UDP), AllowUDPPorts: []PortRange{{53, 53}}}}, Options{})
	oneLine(t, err, "contradict each other")

	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"drop": ["icmp", "smtp"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = PolicyFromFlags("", "", "", bad)
	oneLine(t, err, bad+`:1:19: unknown protocol "smtp"`)
}

// TestNothingLeftAttached checks that failures after the interface is found
// leave no XDP program on it, and that a program another tool attached is
// refused politely, kept, or with Replace detached for good.
func TestNothingLeftAttached(t *testing.T) {
	tp := newTopology(t)
	idx := ifindexIn(t, tp.nsB, ifB)
	none := func(when string) {
		t.Helper()
		if got := attachedIn(t, tp.nsB, ifB); len(got) != 0 {
			t.Errorf("%s: %s has %v", when, ifB, got)
		}
	}
	runB := func(cfg Config) (*Report, error) {
		// A context that is already done: Run attaches, then stops at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var rep *Report
		err := inNetns(tp.nsB, func() (err error) { rep, err = Run(ctx, cfg, Options{}); return err })
		return rep, err
	}

	t.Run("bad policy", func(t *testing.T) {
		_, err := runB(Config{Interface: ifB, Policy: Policy{Drop: setOf(IPv4UDP), AllowUDPPorts: []PortRange{{1, 2}}}})
		oneLine(t, err, "contradict")
		none("after a bad policy")
	})

	t.Run("a clean run", func(t *testing.T) {
		rep, err := runB(Config{Interface: ifB})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Mode != ModeDriver || len(rep.Replaced) != 0 {
			t.Errorf("report: mode %s, replaced %v", rep.Mode, rep.Replaced)
		}
		none("after a run")
	})

	// Another tool's program, held by a bpf_link (how hotlane attaches).
	t.Run("bpf_link held by someone else", func(t *testing.T) {
		other := loadProgram(t, Policy{})
		var first *Attachment
		if err := inNetns(tp.nsB, func() (err error) {
			first, err = Attach(other, ifB, AttachOptions{Mode: ModeGeneric})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		info, err := other.BPF().Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		want := []Attached{{ModeGeneric, uint32(id)}}
		if got := attachedIn(t, tp.nsB, ifB); len(got) != 1 || got[0] != want[0] {
			t.Fatalf("after attaching: %v, want %v", got, want)
		}

		_, err = runB(Config{Interface: ifB})
		oneLine(t, err, fmt.Sprintf("hlvb already has XDP program id %d in generic mode", id)+"; hotlane leaves it alone unless you pass --replace")
		if !errors.Is(err, ErrBusy) {
			t.Errorf("%v does not match ErrBusy", err)
		}
		if got := attachedIn(t, tp.nsB, ifB); len(got) != 1 || got[0] != want[0] {
			t.Errorf("the refusal touched the other program: %v", got)
		}

		rep, err := runB(Config{Interface: ifB, Replace: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Replaced) != 1 || rep.Replaced[0] != want[0] {
			t.Errorf("replaced %v, want %v", rep.Replaced, want)
		}
		none("after replacing")
		if err := first.Close(); err != nil {
			t.Errorf("closing a link someone else detached: %v", err)
		}
	})

	// A program attached the old way, through netlink (ip link set xdp).
	t.Run("netlink program", func(t *testing.T) {
		other := loadProgram(t, Policy{})
		if err := inNetns(tp.nsB, func() error {
			return setNetlinkXDP(idx, other.BPF().FD(), unix.XDP_FLAGS_DRV_MODE)
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { inNetns(tp.nsB, func() error { return detachNetlinkXDP(idx, ModeDriver) }) })
		got := attachedIn(t, tp.nsB, ifB)
		if len(got) != 1 || got[0].Mode != ModeDriver {
			t.Fatalf("after a netlink attach: %v", got)
		}
		_, err := runB(Config{Interface: ifB, Mode: ModeGeneric})
		oneLine(t, err, "in driver mode; hotlane leaves it alone unless you pass --replace")
		if again := attachedIn(t, tp.nsB, ifB); len(again) != 1 || again[0] != got[0] {
			t.Errorf("the refusal touched the other program: %v", again)
		}
		rep, err := runB(Config{Interface: ifB, Mode: ModeGeneric, Replace: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Replaced) != 1 || rep.Replaced[0] != got[0] || rep.Mode != ModeGeneric {
			t.Errorf("replaced %v in %s mode, want %v replaced, generic mode", rep.Replaced, rep.Mode, got)
		}
		none("after replacing a netlink program")
	})
}

// addNoXDPLink adds an interface whose driver has no native XDP: dummy,
// or where the kernel lacks it, ifb or a bridge.
func addNoXDPLink(t *testing.T, ns, name string) {
	t.Helper()
	for _, typ := range []string{"dummy", "ifb", "bridge"} {
		if exec.Command("ip", "-n", ns, "link", "add", name, "type", typ).Run() == nil {
			ip(t, "-n", ns, "link", "set", name, "up")
			return
		}
	}
	t.Skip("this kernel has none of dummy, ifb or bridge interfaces")
}

// TestModes attaches to an interface whose driver has no native XDP:
// driver mode fails cleanly, auto mode falls back to generic and says why.
func TestModes(t *testing.T) {
	tp := newTopology(t)
	const dummy = "hlnoxdp"
	addNoXDPLink(t, tp.nsB, dummy)
	prog := loadProgram(t, Policy{})
	attach := func(mode Mode) (*Attachment, error) {
		var a *Attachment
		err := inNetns(tp.nsB, func() (err error) { a, err = Attach(prog, dummy, AttachOptions{Mode: mode}); return err })
		return a, err
	}

	_, err := attach(ModeDriver)
	oneLine(t, err, "driver mode XDP not available on hlnoxdp: the driver has no native XDP support; try --mode generic")
	if !errors.Is(err, ErrDriverMode) {
		t.Errorf("%v does not match ErrDriverMode", err)
	}
	if got := attachedIn(t, tp.nsB, dummy); len(got) != 0 {
		t.Errorf("after a failed driver-mode attach: %v", got)
	}

	a, err := attach(ModeAuto)
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != ModeGeneric || a.DriverModeError == nil || !strings.Contains(a.DriverModeError.Error(), "no native XDP") {
		t.Errorf("auto on a dummy interface: %s mode, driver error %v", a.Mode, a.DriverModeError)
	}
	if got := attachedIn(t, tp.nsB, dummy); len(got) != 1 || got[0].Mode != ModeGeneric {
		t.Errorf("netlink says %v", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := attachedIn(t, tp.nsB, dummy); len(got) != 0 {
		t.Errorf("after Close: %v", got)
	}
}

// TestInterfaceGone: when the interface disappears mid-run, Run says so.
func TestInterfaceGone(t *testing.T) {
	tp := newTopology(t)
	const dummy = "hlgone"
	addNoXDPLink(t, tp.nsB, dummy)
	attached := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- inNetns(tp.nsB, func() error {
			_, err := Run(context.Background(), Config{Interface: dummy}, Options{
				Progress: &strings.Builder{}, Interval: 50 * time.Millisecond,
				Attached: func(*Attachment) { close(attached) },
			})
			return err
		})
	}()
	select {
	case <-attached:
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	}
	ip(t, "-n", tp.nsB, "link", "delete", dummy)
	select {
	case err := <-errc:
		oneLine(t, err, "hlgone went away while hotlane was counting")
	case <-time.After(5 * time.Second):
		t.Fatal("Run kept going after its interface was deleted")
	}
}
