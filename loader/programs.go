package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// LoadPrograms loads progs, programs of spec or copies of them (another
// AttachTo, say), each as a collection of its own on opts.MapReplacements:
// the maps that spec.LoadAndAssign created, by name (MapsByName). Programs
// picked at run time, a hook family's or one instance per attach point,
// then all run on the one set of maps, and none is looked up by name. A
// program that uses a map not shared fails to load rather than get a copy
// of its own. The kernel's BTF is read once per opts.Cache: a caller that
// loads in several calls passes the same one (nil: one for this call). It
// returns the programs in the order of progs; on error, which names the
// program, none stays loaded.
func LoadPrograms(spec *ebpf.CollectionSpec, opts ebpf.CollectionOptions, progs ...*ebpf.ProgramSpec) ([]*ebpf.Program, error) {
	instances := make([]Instance, len(progs))
	for i, ps := range progs {
		instances[i] = Instance{Name: ps.Name, Spec: ps}
	}
	return LoadInstances(spec, opts, instances...)
}

// An Instance is one of several copies of a program of an object, each
// with an AttachTo of its own, say, and the name errors give it: what
// tells it apart from the other copies.
type Instance struct {
	Name string
	Spec *ebpf.ProgramSpec
}

// LoadInstances is LoadPrograms for instances: an error names the
// instance that failed.
func LoadInstances(spec *ebpf.CollectionSpec, opts ebpf.CollectionOptions, instances ...Instance) ([]*ebpf.Program, error) {
	maps := make(map[string]*ebpf.MapSpec, len(opts.MapReplacements))
	for name := range opts.MapReplacements {
		ms := spec.Maps[name]
		if ms == nil {
			return nil, fmt.Errorf("map %s is not in the object", name)
		}
		maps[name] = ms
	}
	if opts.Cache == nil {
		opts.Cache = btf.NewCache()
	}
	var out []*ebpf.Program
	for _, in := range instances {
		prog, err := loadOne(maps, spec.Types, in.Name, in.Spec, opts)
		if err != nil {
			ClosePrograms(out...)
			return nil, err
		}
		out = append(out, prog)
	}
	return out, nil
}

// loadOne loads ps as name (which errors give it) in a collection of its
// own whose maps, specified by maps, are opts.MapReplacements: created
// already, not again.
func loadOne(maps map[string]*ebpf.MapSpec, types *btf.Spec, name string, ps *ebpf.ProgramSpec, opts ebpf.CollectionOptions) (*ebpf.Program, error) {
	one := &ebpf.CollectionSpec{
		Maps:     maps,
		Programs: map[string]*ebpf.ProgramSpec{name: ps},
		Types:    types,
	}
	coll, err := withoutPreemption(func() (*ebpf.Collection, error) { return ebpf.NewCollectionWithOptions(one, opts) })
	if err != nil {
		return nil, err
	}
	defer coll.Close()
	prog := coll.DetachProgram(name)
	if prog == nil {
		return nil, fmt.Errorf("program %s: not loaded", name)
	}
	return prog, nil
}

// ClosePrograms closes progs; nil ones are skipped.
func ClosePrograms(progs ...*ebpf.Program) error {
	var errs []error
	for _, p := range progs {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// SetVariables writes values into the globals of an object not loaded
// yet, each keyed by its spec (a field of bpf2go's XxxVariableSpecs, which
// CollectionSpec.Assign fills). The error names the global that refused
// its value.
func SetVariables(values map[*ebpf.VariableSpec]any) error {
	for vs, v := range values {
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("set %s: %w", vs.Name, err)
		}
	}
	return nil
}
