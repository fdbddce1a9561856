package loader

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// Callback is one callback of a loaded sched_ext scheduler: a struct_ops
// program, and the name of its function in its BTF, which fentry/fexit on
// it must name (the kernel keeps only 15 bytes of a program's name).
type Callback struct {
	Program *ebpf.Program
	Func    string
}

// SchedExtCallbacks opens every loaded struct_ops program: on a sched_ext
// machine, the callbacks of the scheduler that runs (or of one loaded and
// not yet attached), whoever loaded it.
// The caller closes the programs. None loaded is not an error.
func SchedExtCallbacks() ([]Callback, error) {
	var out []Callback
	fail := func(err error) ([]Callback, error) {
		for _, c := range out {
			c.Program.Close()
		}
		return nil, err
	}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return fail(fmt.Errorf("list BPF programs: %w", err))
		}
		id = next
		prog, err := ebpf.NewProgramFromID(id)
		if errors.Is(err, os.ErrNotExist) {
			continue // unloaded meanwhile
		}
		if err != nil {
			return fail(fmt.Errorf("open BPF program %d: %w", id, err))
		}
		fn, ok := schedExtCallbackFunc(prog)
		if !ok {
			prog.Close()
			continue
		}
		out = append(out, Callback{Program: prog, Func: fn})
	}
}

// schedExtCallbackFunc is prog's function name if it is a struct_ops
// program. Its BTF names the function; the kernel's name for the program
// is that name cut to 15 bytes, which picks it out. Other struct_ops users
// (HID-BPF, TCP congestion control) are not told apart: they are rare
// beside a sched_ext scheduler, and their callbacks do not run on the
// scheduler's paths.
func schedExtCallbackFunc(prog *ebpf.Program) (string, bool) {
	if prog.Type() != ebpf.StructOps {
		return "", false
	}
	info, err := prog.Info()
	if err != nil || info.Name == "" {
		return "", false
	}
	h, err := prog.Handle()
	if err != nil {
		return "", false
	}
	defer h.Close()
	spec, err := h.Spec(nil)
	if err != nil {
		return "", false
	}
	found := ""
	for typ := range spec.All() {
		f, ok := typ.(*btf.Func)
		if !ok || (f.Name != info.Name && (len(info.Name) < 15 || !strings.HasPrefix(f.Name, info.Name))) {
			continue
		}
		if found != "" && found != f.Name {
			return "", false // two functions fit the cut name
		}
		found = f.Name
	}
	return found, found != ""
}
