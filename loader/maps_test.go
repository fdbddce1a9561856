package loader

import (
	"maps"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// MapsByName finds tagged maps in embedded structs too, as bpf2go's
// XxxObjects embeds XxxMaps, and ignores everything else.
func TestMapsByName(t *testing.T) {
	type inner struct {
		Counters *ebpf.Map `ebpf:"counters"`
		Unset    *ebpf.Map `ebpf:"unset"`
	}
	var counters, bss ebpf.Map // never used as maps: only their addresses
	objs := struct {
		inner
		Bss      *ebpf.Map     `ebpf:".bss"`
		Prog     *ebpf.Program `ebpf:"prog"`
		Untagged *ebpf.Map
		Other    int `ebpf:"other"`
	}{inner: inner{Counters: &counters}, Bss: &bss}

	got := MapsByName(&objs)
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{".bss", "counters"}) {
		t.Fatalf("maps %v, want .bss and counters", names)
	}
	if got["counters"] != &counters || got[".bss"] != &bss {
		t.Error("a name maps to the wrong map")
	}
}
