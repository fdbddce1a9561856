package topology

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeSysfs writes a sysfs tree for sockets x cores x threads CPUs,
// numbered as Linux numbers them under qemu (socket, core, thread), one L3
// per socket and one node per socket; offline CPUs have no cache or
// topology directories, as on a real machine.
func fakeSysfs(t *testing.T, sockets, cores, threads int, offline map[int]bool) string {
	t.Helper()
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := sockets * cores * threads
	perSocket := cores * threads
	var online []int
	for c := 0; c < n; c++ {
		if offline[c] {
			continue
		}
		online = append(online, c)
		s, core := c/perSocket, c/threads
		dir := fmt.Sprintf("cpu/cpu%d", c)
		write(dir+"/topology/thread_siblings_list", fmt.Sprintf("%d-%d", core*threads, core*threads+threads-1))
		write(dir+"/cache/index0/level", "1")
		write(dir+"/cache/index0/type", "Data")
		write(dir+"/cache/index0/shared_cpu_list", fmt.Sprintf("%d-%d", core*threads, core*threads+threads-1))
		write(dir+"/cache/index1/level", "1")
		write(dir+"/cache/index1/type", "Instruction")
		write(dir+"/cache/index1/shared_cpu_list", fmt.Sprintf("%d", c))
		write(dir+"/cache/index3/level", "3")
		write(dir+"/cache/index3/type", "Unified")
		write(dir+"/cache/index3/shared_cpu_list", fmt.Sprintf("%d-%d", s*perSocket, s*perSocket+perSocket-1))
	}
	write("cpu/possible", fmt.Sprintf("0-%d", n-1))
	write("cpu/online", FormatList(online))
	for s := 0; s < sockets; s++ {
		write(fmt.Sprintf("node/node%d/cpulist", s), fmt.Sprintf("%d-%d", s*perSocket, s*perSocket+perSocket-1))
	}
	return root
}

func TestReadTwoSocketsWithSMT(t *testing.T) {
	topo, err := Read(fakeSysfs(t, 2, 2, 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, topo.LLCs); diff != "" {
		t.Errorf("LLCs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, topo.Cores); diff != "" {
		t.Errorf("cores (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, topo.Nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if got := topo.CPUs[5]; got != (CPU{ID: 5, Online: true, Core: 2, LLC: 1, Node: 1}) {
		t.Errorf("CPU 5 = %+v", got)
	}
	if !topo.SMT() || topo.CacheLevel != 3 {
		t.Errorf("SMT %v, cache level %d", topo.SMT(), topo.CacheLevel)
	}
	want := "8 CPUs (8 online), 2 L3 domains [0-3 | 4-7], 2 NUMA nodes [0-3 | 4-7], SMT (4 cores)"
	if got := topo.String(); got != want {
		t.Errorf("String() = %q\nwant        %q", got, want)
	}
}

// An offline CPU has no cache entries of its own, but keeps the LLC and
// the node that list it: it must have groups when it comes online.
func TestReadOfflineCPU(t *testing.T) {
	topo, err := Read(fakeSysfs(t, 2, 2, 1, map[int]bool{3: true}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{0, 1}, {2, 3}}, topo.LLCs); diff != "" {
		t.Errorf("LLCs (-want +got):\n%s", diff)
	}
	if c := topo.CPUs[3]; c.Online || c.Node != 1 || c.Core != 3 {
		t.Errorf("CPU 3 = %+v", c)
	}
}

func TestReadWithoutSysfs(t *testing.T) {
	if _, err := Read(t.TempDir()); !errors.Is(err, ErrNoTopology) {
		t.Errorf("error = %v; want ErrNoTopology", err)
	}
}

// The host's own topology reads, whatever it is.
func TestReadHost(t *testing.T) {
	topo, err := Read(SysfsRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(topo)
	if len(topo.LLCs) == 0 || len(topo.Nodes) == 0 {
		t.Errorf("no groups: %s", topo)
	}
}

func TestParseList(t *testing.T) {
	for s, want := range map[string][]int{
		"":            nil,
		"0":           {0},
		"0-3,8,10-11": {0, 1, 2, 3, 8, 10, 11},
		"3,1,1-2":     {1, 2, 3},
	} {
		got, err := ParseList(s)
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("ParseList(%q) = %v, %v; want %v", s, got, err, want)
		}
		if want != nil && FormatList(got) != FormatList(want) {
			t.Errorf("FormatList round trip of %q", s)
		}
	}
	for _, s := range []string{"a", "1-", "3-1", "-1", "0-99999999"} {
		if _, err := ParseList(s); err == nil {
			t.Errorf("ParseList(%q) accepted", s)
		}
	}
	if got := FormatList([]int{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("FormatList = %q", got)
	}
}
