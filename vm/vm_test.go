package vm_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotlane/hotlane/vm"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// TestVM boots the pinned sched_ext kernel once and runs the TestGuest*
// tests below inside it.
func TestVM(t *testing.T) {
	vmtest.RunGuestTests(t, vmtest.Options{Run: "^TestGuest", ScxSimple: true})
}

func TestVMTimeoutKillsHungGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("VM tests boot qemu; skipped with -short")
	}
	res, err := vm.Run(context.Background(), vm.Config{
		Kernel:      vmtest.Kernel(t, ""),
		Init:        vmtest.Hotlane(t),
		Args:        []string{"/bin/sleep", "600"},
		Executables: map[string]string{"/bin/sleep": "/bin/sleep"},
		Timeout:     45 * time.Second, // past a boot of a loaded host (13 s seen in CI)
	})
	if !errors.Is(err, vm.ErrTimeout) {
		t.Fatalf("Run = %v, want ErrTimeout", err)
	}
	if !strings.Contains(res.Console, "running /bin/sleep") {
		t.Errorf("console lacks the command start:\n%s", res.Console)
	}
}

func TestVMReportsKernelPanic(t *testing.T) {
	if testing.Short() {
		t.Skip("VM tests boot qemu; skipped with -short")
	}
	_, err := vm.Run(context.Background(), vm.Config{
		Kernel:      vmtest.Kernel(t, ""),
		Init:        vmtest.Hotlane(t),
		Args:        []string{"/bin/sh", "-c", "echo c > /proc/sysrq-trigger"},
		Executables: map[string]string{"/bin/sh": "/bin/sh"},
		Timeout:     2 * time.Minute,
	})
	if !errors.Is(err, vm.ErrKernelPanic) {
		t.Fatalf("Run = %v, want ErrKernelPanic", err)
	}
}

func TestGuestDoctorSeesSchedExt(t *testing.T) {
	vmtest.RequireGuest(t)
	out, err := exec.Command(vmtest.HotlaneGuestPath, "doctor", "--json", "--require", "sched_ext,scx_kfuncs").Output()
	if err != nil {
		t.Fatalf("hotlane doctor --require sched_ext,scx_kfuncs: %v\n%s", err, out)
	}
	var report struct {
		SchedExt struct {
			InBTF  bool   `json:"in_btf"`
			Sysfs  bool   `json:"sysfs"`
			State  string `json:"state"`
			Kfuncs struct {
				API            string `json:"api"`
				DsqInsert      string `json:"dsq_insert"`
				DsqMoveToLocal string `json:"dsq_move_to_local"`
			} `json:"kfuncs"`
		} `json:"sched_ext"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	se := report.SchedExt
	if !se.InBTF || !se.Sysfs || se.State != "disabled" {
		t.Errorf("sched_ext = %+v, want in BTF, in sysfs, disabled", se)
	}
	// The pinned 7.3.4 kernel has the 7.x kfunc generation.
	if se.Kfuncs.API != "v2" || se.Kfuncs.DsqInsert != "scx_bpf_dsq_insert___v2" || se.Kfuncs.DsqMoveToLocal != "scx_bpf_dsq_move_to_local___v2" {
		t.Errorf("kfuncs = %+v, want the v2 generation", se.Kfuncs)
	}
}

// TestGuestScxSimple runs the real upstream scx_simple and watches the
// kernel switch to it and back.
func TestGuestScxSimple(t *testing.T) {
	vmtest.RequireGuest(t)
	if got := schedExtState(t); got != "disabled" {
		t.Fatalf("before: state = %q, want disabled", got)
	}
	cmd := exec.Command(vm.ScxSimpleGuestPath)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitState(t, "enabled")
	ops, _ := os.ReadFile("/sys/kernel/sched_ext/root/ops")
	if strings.TrimSpace(string(ops)) != "simple" {
		t.Errorf("root/ops = %q, want simple", ops)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("scx_simple exited with %v", err)
	}
	waitState(t, "disabled")
}

func schedExtState(t *testing.T) string {
	b, err := os.ReadFile("/sys/kernel/sched_ext/state")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func waitState(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for schedExtState(t) != want {
		if time.Now().After(deadline) {
			t.Fatalf("sched_ext state = %q, want %q", schedExtState(t), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
