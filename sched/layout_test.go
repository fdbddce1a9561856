package sched

import (
	"reflect"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/topology"
)

// The Go mirrors of the scheduler's records are as large as the C structs
// in every committed object: a field added on one side only shifts what
// the other reads.
func TestRecordsMatchBTF(t *testing.T) {
	for name, load := range map[string]func() (*ebpf.CollectionSpec, error){
		"612": bpf.LoadSched612, "613": bpf.LoadSched613, "700": bpf.LoadSched700,
	} {
		coll, err := load()
		if err != nil {
			t.Fatalf("object %s: %v", name, err)
		}
		spec := coll.Types
		for cName, goType := range map[string]reflect.Type{
			"hl_stats": reflect.TypeFor[statsRecord](), "hl_task": reflect.TypeFor[taskRecord](), "hl_exit_info": reflect.TypeFor[exitRecord](),
		} {
			var s *btf.Struct
			if err := spec.TypeByName(cName, &s); err != nil {
				t.Errorf("object %s: struct %s: %v", name, cName, err)
				continue
			}
			if uintptr(s.Size) != goType.Size() {
				t.Errorf("object %s: struct %s is %d bytes, %v %d", name, cName, s.Size, goType, goType.Size())
			}
		}
	}
}

// The layout groups CPUs by LLC, each LLC's CPUs in a run that starts at
// llc_first and names each CPU's LLC and each LLC's node.
func TestCPULayout(t *testing.T) {
	topo := &topology.Topology{
		CPUs: []topology.CPU{
			{ID: 0, LLC: 0, Node: 0}, {ID: 1, LLC: 1, Node: 1}, {ID: 2, LLC: 0, Node: 0}, {ID: 3, LLC: 1, Node: 1},
		},
		LLCs:  [][]int{{0, 2}, {1, 3}},
		Nodes: [][]int{{0, 2}, {1, 3}},
	}
	l, err := newCPULayout(topo)
	if err != nil {
		t.Fatal(err)
	}
	if l.nrCPUs != 4 || l.nrLLCs != 2 {
		t.Fatalf("%d CPUs, %d LLCs", l.nrCPUs, l.nrLLCs)
	}
	if got := l.llcCPUs[:4]; !reflect.DeepEqual(got, []uint32{0, 2, 1, 3}) {
		t.Errorf("llc_cpus %v", got)
	}
	if l.llcFirst[1] != 2 || l.llcSize[0] != 2 || l.llcSize[1] != 2 || l.llcNode[1] != 1 || l.cpuLLC[3] != 1 || l.cpuLLC[2] != 0 {
		t.Errorf("layout %+v", l)
	}
	if _, err := newCPULayout(topology.Uniform(MaxCPUs+1, 4)); err == nil {
		t.Error("more CPUs than the scheduler handles were accepted")
	}
	if _, err := newCPULayout(topology.Uniform(MaxCPUs, 1)); err == nil {
		t.Error("more LLCs than the scheduler handles were accepted")
	}
	if l, err := newCPULayout(topology.Uniform(MaxCPUs, MaxCPUs/MaxLLCs)); err != nil || l.nrLLCs != MaxLLCs {
		t.Errorf("the largest machine: %v", err)
	}
}

func TestNiceWeights(t *testing.T) {
	w := niceWeights()
	if w[20] != 1024 || w[0] < 88000 || w[39] != 15 {
		t.Errorf("nice -20 %d, 0 %d, 19 %d", w[0], w[20], w[39])
	}
}
