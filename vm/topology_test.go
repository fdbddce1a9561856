package vm

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTopology(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Topology
	}{
		{"sockets=2,cores=8", Topology{2, 8, 1, 1}},
		{"sockets=2,cores=4,threads=2,nodes=2", Topology{2, 4, 2, 2}},
		{"cores=16", Topology{1, 16, 1, 1}},
		{"sockets=4,cores=4,nodes=2", Topology{4, 4, 1, 2}},   // two sockets a node
		{"sockets=1,cores=16,nodes=4", Topology{1, 16, 1, 4}}, // four nodes a socket
	} {
		got, err := ParseTopology(tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("ParseTopology(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, spec := range []string{
		"", "sockets", "sockets=0", "sockets=-1", "sockets=x", "cpus=4", "sockets=2,sockets=2",
		"sockets=3,cores=2,nodes=2",     // a node would straddle sockets
		"cores=4,threads=2,nodes=8",     // a node would split a core
		"cores=5,nodes=2",               // unequal nodes
		"sockets=16,cores=16,threads=2", // too many CPUs
	} {
		if _, err := ParseTopology(spec); !errors.Is(err, ErrTopology) {
			t.Errorf("ParseTopology(%q) error = %v; want ErrTopology", spec, err)
		}
	}
}

func TestTopologyQemuArgs(t *testing.T) {
	got, err := Topology{Sockets: 2, Cores: 4, Threads: 1, Nodes: 2}.qemuArgs("2G")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"-smp", "8,sockets=2,cores=4,threads=1",
		"-object", "memory-backend-ram,id=mem0,size=1024M", "-numa", "node,nodeid=0,cpus=0-3,memdev=mem0",
		"-object", "memory-backend-ram,id=mem1,size=1024M", "-numa", "node,nodeid=1,cpus=4-7,memdev=mem1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("qemuArgs (-want +got):\n%s", diff)
	}
	if got, _ := (Topology{Sockets: 1, Cores: 2, Threads: 1, Nodes: 1}).qemuArgs("2G"); !cmp.Equal(got, []string{"-smp", "2,sockets=1,cores=2,threads=1"}) {
		t.Errorf("one node: %q", got)
	}
	if _, err := (Topology{Sockets: 3, Cores: 1, Threads: 1, Nodes: 3}).qemuArgs("1G"); !errors.Is(err, ErrTopology) {
		t.Errorf("1024 MiB in 3 nodes: error = %v; want ErrTopology", err)
	}
}

func TestValidateChecksTopology(t *testing.T) {
	cfg := Config{Args: []string{"doctor"}, Init: "/nonexistent", CPUs: 4, Topology: &Topology{2, 8, 1, 1}}
	if err := cfg.Validate(); !errors.Is(err, ErrTopology) {
		t.Errorf("4 CPUs with a 16-CPU topology: error = %v; want ErrTopology", err)
	}
}
