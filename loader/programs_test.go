package loader

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Collection.Assign fills the struct and detaches nothing: Close still
// finds every object in the collection.
func TestCollectionAssignKeepsWhatItAssigns(t *testing.T) {
	var stats, other ebpf.Map // never used as maps: only their addresses
	var prog ebpf.Program
	var exit ebpf.Variable
	coll := &Collection{
		Programs:  map[string]*ebpf.Program{"hl_enqueue": &prog},
		Maps:      map[string]*ebpf.Map{"stats": &stats, "other": &other},
		Variables: map[string]*ebpf.Variable{"exit_info": &exit},
	}
	var objs struct {
		Stats    *ebpf.Map      `ebpf:"stats"`
		Enqueue  *ebpf.Program  `ebpf:"hl_enqueue"`
		ExitInfo *ebpf.Variable `ebpf:"exit_info"`
	}
	if err := coll.Assign(&objs); err != nil {
		t.Fatal(err)
	}
	if objs.Stats != &stats || objs.Enqueue != &prog || objs.ExitInfo != &exit {
		t.Errorf("assigned %+v", objs)
	}
	if len(coll.Maps) != 2 || len(coll.Programs) != 1 || len(coll.Variables) != 1 {
		t.Errorf("the collection lost what it assigned: %d maps, %d programs, %d variables", len(coll.Maps), len(coll.Programs), len(coll.Variables))
	}
	var missing struct {
		Gone *ebpf.Map `ebpf:"gone"`
	}
	if err := coll.Assign(&missing); err == nil || !strings.Contains(err.Error(), `missing map "gone"`) {
		t.Errorf("a missing map: %v", err)
	}
}

func TestSetVariablesNamesTheRefusedGlobal(t *testing.T) {
	nr := &ebpf.VariableSpec{Name: "nr_cpus", Value: make([]byte, 4)}
	if err := SetVariables(map[*ebpf.VariableSpec]any{nr: uint32(7)}); err != nil {
		t.Fatal(err)
	}
	var got uint32
	if err := nr.Get(&got); err != nil || got != 7 {
		t.Errorf("nr_cpus = %d, %v; want 7", got, err)
	}
	err := SetVariables(map[*ebpf.VariableSpec]any{nr: uint64(7)})
	if err == nil || !strings.HasPrefix(err.Error(), "set nr_cpus: ") {
		t.Errorf("a value of the wrong size: %v, want an error naming nr_cpus", err)
	}
}

// countingSpec is an object with one map and a socket filter that uses it,
// and another that uses a map it does not share.
func countingSpec() *ebpf.CollectionSpec {
	use := func(name, m string) *ebpf.ProgramSpec {
		return &ebpf.ProgramSpec{Name: name, Type: ebpf.SocketFilter, License: "MIT", Instructions: asm.Instructions{
			asm.LoadMapPtr(asm.R1, 0).WithReference(m),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		}}
	}
	array := func(name string) *ebpf.MapSpec {
		return &ebpf.MapSpec{Name: name, Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}
	}
	return &ebpf.CollectionSpec{
		Maps:     map[string]*ebpf.MapSpec{"counts": array("counts"), "private": array("private")},
		Programs: map[string]*ebpf.ProgramSpec{"count": use("count", "counts"), "own": use("own", "private")},
	}
}

// LoadPrograms loads two copies of one program on the map LoadAndAssign
// created; an instance whose map is not shared is refused, by its name.
func TestLoadProgramsSharesTheMaps(t *testing.T) {
	requireRoot(t)
	spec := countingSpec()
	var objs struct {
		Counts *ebpf.Map `ebpf:"counts"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer CloseMaps(&objs)
	shared := MapsByName(&objs)
	count := spec.Programs["count"]
	progs, err := LoadPrograms(spec, ebpf.CollectionOptions{MapReplacements: shared}, count, count.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer ClosePrograms(progs...)
	info, err := objs.Counts.Info()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := info.ID()
	for i, p := range progs {
		pi, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		ids, _ := pi.MapIDs()
		if len(ids) != 1 || ids[0] != want {
			t.Errorf("instance %d uses maps %v, want the shared %d", i, ids, want)
		}
	}
	_, err = LoadInstances(spec, ebpf.CollectionOptions{MapReplacements: shared}, Instance{Name: "own/copy", Spec: spec.Programs["own"]})
	if err == nil || !strings.Contains(err.Error(), "private") || !strings.Contains(err.Error(), "own/copy") {
		t.Errorf("a program on a map not shared: %v, want an error naming the map and the instance", err)
	}
}
