package loader

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// A program this process loaded is found through its fdinfo, under the
// name the kernel keeps; a process holding none is told apart.
func TestProcessPrograms(t *testing.T) {
	requireRoot(t)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "hl_fdinfo_probe", Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, 0, asm.DWord), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	want, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	wantID, _ := want.ID()

	progs, err := ProcessPrograms(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := progs["hl_fdinfo_probe"]
	if !ok {
		t.Fatalf("programs of this process: %v, want hl_fdinfo_probe", progs)
	}
	info, err := got.Info()
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := info.ID(); id != wantID {
		t.Errorf("hl_fdinfo_probe has id %d, want %d", id, wantID)
	}
	if _, err := got.Stats(); err != nil {
		t.Errorf("run-time statistics of the found program: %v", err)
	}
	for _, p := range progs {
		p.Close()
	}

	sleeper := exec.Command("sleep", "10")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if _, err := ProcessPrograms(sleeper.Process.Pid); !errors.Is(err, ErrNoPrograms) {
		t.Errorf("a process with no BPF program: %v, want ErrNoPrograms", err)
	}
}
