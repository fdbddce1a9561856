// Package topology reads the machine's CPU topology as Linux exposes it in
// sysfs: which CPUs exist, which share a core (SMT siblings), a last-level
// cache and a NUMA node. The scheduler places tasks and queues by it, and
// `hotlane doctor` and `hotlane run` print it, so a user sees what
// hotlane sees.
package topology

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// SysfsRoot is where the kernel exposes devices.
const SysfsRoot = "/sys/devices/system"

// ErrNoTopology is wrapped by Read's errors when sysfs does not describe
// the CPUs.
var ErrNoTopology = errors.New("no CPU topology in sysfs")

// CPU is one logical CPU and the groups it belongs to. Groups are numbered
// from 0 in the order of their lowest CPU, so they index slices densely.
type CPU struct {
	ID     int  `json:"id"`
	Online bool `json:"online"`
	// Core groups SMT siblings; LLC the CPUs sharing the last-level cache;
	// Node the NUMA node.
	Core int `json:"core"`
	LLC  int `json:"llc"`
	Node int `json:"node"`
}

// Topology is every possible CPU with its groups, and the groups' CPUs.
type Topology struct {
	CPUs []CPU `json:"cpus"` // indexed by CPU id; every possible CPU
	// Cores, LLCs and Nodes list each group's CPUs, ascending.
	Cores [][]int `json:"cores"`
	LLCs  [][]int `json:"llcs"`
	Nodes [][]int `json:"nodes"`
	// CacheLevel is the level of the cache that defines LLCs (3 on most
	// machines); 0 when sysfs lists no cache and each node is one LLC.
	CacheLevel int `json:"cache_level"`
}

// Read reads the topology under root (SysfsRoot on a real machine). An
// offline CPU has no cache or sibling entries: it is put in the LLC and
// node that list it, else alone in a group of its own, so that every
// possible CPU has groups when it comes online.
func Read(root string) (*Topology, error) {
	possible, err := readList(filepath.Join(root, "cpu", "possible"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoTopology, err)
	}
	online, err := readList(filepath.Join(root, "cpu", "online"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoTopology, err)
	}
	n := possible[len(possible)-1] + 1
	t := &Topology{CPUs: make([]CPU, n)}
	isOnline := make([]bool, n)
	for _, c := range online {
		if c < n {
			isOnline[c] = true
		}
	}

	// Each CPU's group, as the lowest CPU of that group's list, -1 unknown.
	core, llc, node := fill(n, -1), fill(n, -1), fill(n, -1)
	for _, c := range possible {
		dir := filepath.Join(root, "cpu", fmt.Sprintf("cpu%d", c))
		if sib, err := readList(filepath.Join(dir, "topology", "thread_siblings_list")); err == nil {
			assign(core, sib)
		}
		level, shared := lastLevelCache(dir)
		if level > t.CacheLevel {
			t.CacheLevel = level
		}
		if level > 0 && level == t.CacheLevel {
			assign(llc, shared)
		}
	}
	nodeDirs, _ := filepath.Glob(filepath.Join(root, "node", "node[0-9]*"))
	for _, d := range nodeDirs {
		if cpus, err := readList(filepath.Join(d, "cpulist")); err == nil && len(cpus) > 0 {
			assign(node, cpus)
		}
	}
	for _, c := range possible {
		if node[c] < 0 {
			node[c] = 0 // no NUMA: one node
		}
		if core[c] < 0 {
			core[c] = c
		}
		if llc[c] < 0 {
			// No cache listed (offline, or a VM without cache info):
			// the node is the nearest thing.
			llc[c] = -2 - node[c]
		}
	}
	t.Cores = groups(possible, core, func(c, g int) { t.CPUs[c].Core = g })
	t.LLCs = groups(possible, llc, func(c, g int) { t.CPUs[c].LLC = g })
	t.Nodes = groups(possible, node, func(c, g int) { t.CPUs[c].Node = g })
	for _, c := range possible {
		t.CPUs[c].ID = c
		t.CPUs[c].Online = isOnline[c]
	}
	return t, nil
}

// lastLevelCache returns the level and the CPUs of the highest-level
// unified or data cache listed for a CPU, or 0 if none is.
func lastLevelCache(cpuDir string) (int, []int) {
	indexes, _ := filepath.Glob(filepath.Join(cpuDir, "cache", "index[0-9]*"))
	best, cpus := 0, []int(nil)
	for _, idx := range indexes {
		typ, _ := os.ReadFile(filepath.Join(idx, "type"))
		if strings.TrimSpace(string(typ)) == "Instruction" {
			continue
		}
		lb, err := os.ReadFile(filepath.Join(idx, "level"))
		if err != nil {
			continue
		}
		level, err := strconv.Atoi(strings.TrimSpace(string(lb)))
		if err != nil || level <= best {
			continue
		}
		shared, err := readList(filepath.Join(idx, "shared_cpu_list"))
		if err != nil || len(shared) == 0 {
			continue
		}
		best, cpus = level, shared
	}
	return best, cpus
}

func fill(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// assign records, for each CPU of a group's list, the group's key: its
// lowest CPU.
func assign(key []int, cpus []int) {
	for _, c := range cpus {
		if c < len(key) && key[c] < 0 {
			key[c] = cpus[0]
		}
	}
}

// groups numbers the distinct keys in the order of their lowest CPU and
// returns each group's CPUs; set is told each CPU's group number.
func groups(cpus []int, key []int, set func(cpu, group int)) [][]int {
	index := map[int]int{}
	var out [][]int
	for _, c := range cpus { // ascending, so groups come in order of their lowest CPU
		g, ok := index[key[c]]
		if !ok {
			g = len(out)
			index[key[c]] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], c)
		set(c, g)
	}
	return out
}

// readList reads a file in the kernel's CPU list format ("0-3,8,10-11").
func readList(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cpus, err := ParseList(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cpus, nil
}

// ParseList reads the kernel's CPU list format ("0-3,8,10-11"), the
// format of cpulist files and of taskset -c; the result is ascending and
// without duplicates. An empty list is empty.
func ParseList(s string) ([]int, error) {
	var cpus []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q is not a CPU list", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a CPU list", s)
			}
		}
		if b-a > 1<<16 {
			return nil, fmt.Errorf("%q: range %d-%d is too large", s, a, b)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// FormatList writes CPUs in the kernel's list format.
func FormatList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// SMT reports whether some core has more than one CPU.
func (t *Topology) SMT() bool {
	for _, c := range t.Cores {
		if len(c) > 1 {
			return true
		}
	}
	return false
}

// String is one line: CPUs, LLCs and nodes with their CPU lists, SMT.
func (t *Topology) String() string {
	online := 0
	for _, c := range t.CPUs {
		if c.Online {
			online++
		}
	}
	list := func(gs [][]int) string {
		var s []string
		for _, g := range gs {
			s = append(s, FormatList(g))
		}
		return strings.Join(s, " | ")
	}
	smt := "no SMT"
	if t.SMT() {
		smt = fmt.Sprintf("SMT (%d cores)", len(t.Cores))
	}
	cache := "LLC"
	if t.CacheLevel > 0 {
		cache = fmt.Sprintf("L%d", t.CacheLevel)
	}
	return fmt.Sprintf("%d CPUs (%d online), %d %s domains [%s], %d NUMA nodes [%s], %s",
		len(t.CPUs), online, len(t.LLCs), cache, list(t.LLCs), len(t.Nodes), list(t.Nodes), smt)
}

// Uniform is a made-up topology of n online CPUs in LLCs of llcSize (one
// node, no SMT): the shape the scheduler is checked against for a machine
// it does not run on.
func Uniform(n, llcSize int) *Topology {
	t := &Topology{CPUs: make([]CPU, n), CacheLevel: 3}
	for c := 0; c < n; c++ {
		t.CPUs[c] = CPU{ID: c, Online: true, Core: c, LLC: c / llcSize}
		t.Cores = append(t.Cores, []int{c})
		if c%llcSize == 0 {
			t.LLCs = append(t.LLCs, nil)
		}
		t.LLCs[len(t.LLCs)-1] = append(t.LLCs[len(t.LLCs)-1], c)
	}
	t.Nodes = [][]int{t.LLCs[0][:0:0]}
	for c := 0; c < n; c++ {
		t.Nodes[0] = append(t.Nodes[0], c)
	}
	return t
}
