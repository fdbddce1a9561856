package loader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// Collection is a loaded collection whose programs were verified in
// parallel (NewCollectionParallel): the same maps and programs an
// ebpf.Collection would hold.
type Collection struct {
	Programs  map[string]*ebpf.Program
	Maps      map[string]*ebpf.Map
	Variables map[string]*ebpf.Variable
}

// Assign fills to, a pointer to a struct whose fields have `ebpf` tags
// (bpf2go's XxxMaps, XxxVariables and XxxPrograms, or one written by hand
// for several objects that share names), with the collection's programs,
// maps and variables, as ebpf.Collection.Assign does. Unlike that, it
// detaches nothing: what it assigns stays the collection's, so that Close
// still closes every program and map exactly once and the collection still
// lists every program (for their costs).
func (c *Collection) Assign(to any) error {
	view := ebpf.Collection{Programs: maps.Clone(c.Programs), Maps: maps.Clone(c.Maps), Variables: maps.Clone(c.Variables)}
	return view.Assign(to)
}

// Close closes every program and map.
func (c *Collection) Close() {
	for _, p := range c.Programs {
		p.Close()
	}
	for _, m := range c.Maps {
		m.Close()
	}
}

// loadPrograms creates spec's maps other than skipMaps, then loads its
// programs on up to workers goroutines. The kernel verifies each program
// in the thread that loads it, so on a machine with several CPUs the
// verifier's work, most of a scheduler's start, runs side by side.
// cilium/ebpf's own loader verifies one program after the other.
func loadPrograms(spec *ebpf.CollectionSpec, opts ebpf.CollectionOptions, workers int, skipMaps ...string) (*Collection, error) {
	shared := spec.Copy()
	shared.Programs = nil
	for _, name := range skipMaps {
		delete(shared.Maps, name)
	}
	base, err := ebpf.NewCollectionWithOptions(shared, opts)
	if err != nil {
		return nil, err
	}
	out := &Collection{Programs: map[string]*ebpf.Program{}, Maps: base.Maps, Variables: base.Variables}
	// Each program loads on the maps created above.
	progOpts := opts
	progOpts.MapReplacements = base.Maps

	names := slices.Sorted(maps.Keys(spec.Programs))
	// The largest first, so that a big program does not start last.
	slices.SortStableFunc(names, func(a, b string) int {
		return len(spec.Programs[b].Instructions) - len(spec.Programs[a].Instructions)
	})
	var (
		mu   sync.Mutex
		errs []error
		next = make(chan string)
		wg   sync.WaitGroup
	)
	for range max(workers, 1) {
		wg.Go(func() {
			for name := range next {
				prog, err := loadOne(shared.Maps, spec.Types, name, spec.Programs[name], progOpts)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					out.Programs[name] = prog
				}
				mu.Unlock()
			}
		})
	}
	for _, name := range names {
		if spec.Programs[name].Type == ebpf.UnspecifiedProgram {
			continue
		}
		next <- name
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		out.Close()
		return nil, err
	}
	return out, nil
}

// NewCollectionParallel loads spec as ebpf.NewCollectionWithOptions does,
// but verifies its programs on up to workers goroutines, and creates each
// struct_ops map last, from the kernel's BTF in opts.Cache, with the
// programs' descriptors in it. On error nothing stays loaded.
func NewCollectionParallel(spec *ebpf.CollectionSpec, opts ebpf.CollectionOptions, workers int) (*Collection, error) {
	if opts.Cache == nil {
		opts.Cache = btf.NewCache()
	}
	var structOps []string
	for name, ms := range spec.Maps {
		if ms.Type == ebpf.StructOpsMap {
			structOps = append(structOps, name)
		}
	}
	coll, err := loadPrograms(spec, opts, workers, structOps...)
	if err != nil {
		return nil, err
	}
	if len(structOps) == 0 {
		return coll, nil
	}
	kernel, err := opts.Cache.Kernel()
	if err != nil {
		coll.Close()
		return nil, fmt.Errorf("kernel BTF: %w", err)
	}
	for _, name := range structOps {
		m, err := newStructOpsMap(spec.Maps[name], kernel, spec.Programs, coll.Programs)
		if err != nil {
			coll.Close()
			return nil, fmt.Errorf("map %s: %w", name, err)
		}
		coll.Maps[name] = m
	}
	return coll, nil
}

// structOpsPrefix names the kernel's value type of a struct_ops map:
// bpf_struct_ops_ and the name of the ops struct.
const structOpsPrefix = "bpf_struct_ops_"

// newStructOpsMap creates the struct_ops map ms describes and fills its
// one value: ms's members copied into the kernel's layout of the ops
// struct, each function pointer replaced by the descriptor of the program
// attached to it (ProgramSpec.AttachTo "ops:member").
func newStructOpsMap(ms *ebpf.MapSpec, kernel *btf.Spec, specs map[string]*ebpf.ProgramSpec, progs map[string]*ebpf.Program) (*ebpf.Map, error) {
	user, ok := ms.Value.(*btf.Struct)
	if !ok || len(ms.Contents) != 1 {
		return nil, fmt.Errorf("struct_ops map: want a struct value and one entry, have %T and %d", ms.Value, len(ms.Contents))
	}
	data, ok := ms.Contents[0].Value.([]byte)
	if !ok || len(data) < int(user.Size) {
		return nil, fmt.Errorf("struct_ops map: contents %T shorter than struct %s", ms.Contents[0].Value, user.Name)
	}
	var value *btf.Struct
	if err := kernel.TypeByName(structOpsPrefix+user.Name, &value); err != nil {
		return nil, fmt.Errorf("the kernel has no struct_ops type %s%s: %w", structOpsPrefix, user.Name, err)
	}
	valueID, err := kernel.TypeID(value)
	if err != nil {
		return nil, err
	}
	kern := make([]byte, value.Size)
	if err := fillStructOps(kern, value, user, data, specs, progs); err != nil {
		return nil, err
	}
	m, err := createStructOpsMap(ms, value.Size, valueID)
	if err != nil {
		return nil, err
	}
	if err := m.Put(uint32(0), kern); err != nil {
		m.Close()
		return nil, fmt.Errorf("write the ops: %w", err)
	}
	return m, nil
}

// fillStructOps writes user's members (their bytes in data) into kern,
// the kernel's value struct, whose member of type user.Name is the ops.
func fillStructOps(kern []byte, value, user *btf.Struct, data []byte, specs map[string]*ebpf.ProgramSpec, progs map[string]*ebpf.Program) error {
	var ops *btf.Struct
	var opsOff int
	for _, m := range value.Members {
		if s, ok := btf.UnderlyingType(m.Type).(*btf.Struct); ok && s.Name == user.Name {
			ops, opsOff = s, int(m.Offset.Bytes())
		}
	}
	if ops == nil {
		return fmt.Errorf("kernel type %s has no member of type %s", value.Name, user.Name)
	}
	attached := map[string]string{} // member → program
	for name, ps := range specs {
		if member, ok := strings.CutPrefix(ps.AttachTo, user.Name+":"); ok && ps.Type == ebpf.StructOps {
			attached[member] = name
		}
	}
	for _, m := range user.Members {
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
		off := int(m.Offset.Bytes())
		if m.BitfieldSize != 0 || off+size > len(data) {
			return fmt.Errorf("member %s: bit field or out of the value", m.Name)
		}
		src := data[off : off+size]
		i := slices.IndexFunc(ops.Members, func(km btf.Member) bool { return km.Name == m.Name })
		prog, isProg := attached[m.Name]
		switch {
		case i < 0 && (isProg || !zero(src)):
			return fmt.Errorf("member %s is set but the kernel's %s lacks it", m.Name, ops.Name)
		case i < 0:
			continue
		}
		km := ops.Members[i]
		dst := opsOff + int(km.Offset.Bytes())
		if isProg {
			p := progs[prog]
			if p == nil || dst+8 > len(kern) {
				return fmt.Errorf("member %s: program %s not loaded", m.Name, prog)
			}
			binary.NativeEndian.PutUint64(kern[dst:], uint64(p.FD()))
			continue
		}
		ksize, err := btf.Sizeof(km.Type)
		if err != nil {
			return fmt.Errorf("kernel member %s: %w", km.Name, err)
		}
		_, nested := btf.UnderlyingType(m.Type).(*btf.Struct)
		switch {
		case zero(src):
		case ksize != size || km.BitfieldSize != 0 || nested || dst+size > len(kern):
			return fmt.Errorf("member %s: %d bytes here, %d in the kernel's %s", m.Name, size, ksize, ops.Name)
		default:
			copy(kern[dst:], src)
		}
	}
	return nil
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// mapCreateAttr is the BPF_MAP_CREATE part of union bpf_attr, up to
// map_token_fd.
type mapCreateAttr struct {
	mapType, keySize, valueSize, maxEntries, mapFlags, innerMapFD, numaNode uint32
	mapName                                                                 [unix.BPF_OBJ_NAME_LEN]byte
	mapIfindex, btfFD, btfKeyTypeID, btfValueTypeID, btfVmlinuxValueTypeID  uint32
	mapExtra                                                                uint64
	valueTypeBTFObjFD, mapTokenFD                                           int32
}

// createStructOpsMap creates an empty struct_ops map whose value is the
// kernel's type valueID. cilium/ebpf creates one only inside a collection
// whose programs it loads itself, one after the other.
func createStructOpsMap(ms *ebpf.MapSpec, valueSize uint32, valueID btf.TypeID) (*ebpf.Map, error) {
	// The kernel wants some BTF beside the vmlinux type: one int.
	b, err := btf.NewBuilder([]btf.Type{&btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}}, nil)
	if err != nil {
		return nil, err
	}
	h, err := btf.NewHandle(b)
	if err != nil {
		return nil, fmt.Errorf("load BTF for the struct_ops map: %w", err)
	}
	defer h.Close()
	attr := mapCreateAttr{
		mapType:               uint32(ebpf.StructOpsMap),
		keySize:               4,
		valueSize:             valueSize,
		maxEntries:            1,
		mapFlags:              ms.Flags,
		btfFD:                 uint32(h.FD()),
		btfVmlinuxValueTypeID: uint32(valueID),
	}
	copy(attr.mapName[:unix.BPF_OBJ_NAME_LEN-1], ms.Name)
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return nil, fmt.Errorf("create struct_ops map: %w", errno)
	}
	m, err := ebpf.NewMapFromFD(int(fd))
	if err != nil {
		unix.Close(int(fd))
		return nil, err
	}
	return m, nil
}
