package vm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Topology is the shape of the guest's CPUs: sockets, cores per socket,
// threads per core, and NUMA nodes. qemu numbers CPUs socket by socket,
// core by core, thread by thread, and gives each socket its own L3 cache,
// so a guest of two sockets has two LLCs. Nodes split the CPUs into equal
// runs of whole cores that never straddle a socket: one node per socket,
// several sockets a node, or several nodes a socket (as AMD's NPS modes).
type Topology struct {
	Sockets, Cores, Threads, Nodes int
}

// ErrTopology is wrapped by every error ParseTopology and Check return.
var ErrTopology = errors.New("bad topology")

// ParseTopology reads SPEC as comma-separated name=N pairs, e.g.
// "sockets=2,cores=8" or "sockets=2,cores=4,threads=2,nodes=2"; fields not
// given are 1.
func ParseTopology(spec string) (Topology, error) {
	t := Topology{Sockets: 1, Cores: 1, Threads: 1, Nodes: 1}
	seen := map[string]bool{}
	for _, field := range strings.Split(spec, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return t, fmt.Errorf("%w: %q is not name=N; write e.g. sockets=2,cores=8,nodes=2", ErrTopology, field)
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return t, fmt.Errorf("%w: %s=%s is not a whole number above 0", ErrTopology, name, value)
		}
		var p *int
		switch name {
		case "sockets":
			p = &t.Sockets
		case "cores":
			p = &t.Cores
		case "threads":
			p = &t.Threads
		case "nodes":
			p = &t.Nodes
		default:
			return t, fmt.Errorf("%w: unknown field %q; the fields are sockets, cores, threads and nodes", ErrTopology, name)
		}
		if seen[name] {
			return t, fmt.Errorf("%w: %s is given twice", ErrTopology, name)
		}
		seen[name] = true
		*p = n
	}
	return t, t.Check()
}

// CPUs is the number of logical CPUs.
func (t Topology) CPUs() int { return t.Sockets * t.Cores * t.Threads }

// MaxCPUs is the most CPUs a guest may have: qemu's q35 limit is higher,
// but on a 2-core host TCG boots 64 vCPUs in minutes, more not usefully.
const MaxCPUs = 256

// Check says whether qemu can build the topology and the nodes split it
// into equal runs of whole cores within sockets.
func (t Topology) Check() error {
	if t.Sockets < 1 || t.Cores < 1 || t.Threads < 1 || t.Nodes < 1 {
		return fmt.Errorf("%w: every field must be at least 1 (%s)", ErrTopology, t)
	}
	if t.CPUs() > MaxCPUs {
		return fmt.Errorf("%w: %s is %d CPUs, more than %d", ErrTopology, t, t.CPUs(), MaxCPUs)
	}
	perSocket := t.Cores * t.Threads
	if t.CPUs()%t.Nodes != 0 {
		return fmt.Errorf("%w: %d CPUs do not split into %d equal nodes", ErrTopology, t.CPUs(), t.Nodes)
	}
	perNode := t.CPUs() / t.Nodes
	switch {
	case perNode%t.Threads != 0:
		return fmt.Errorf("%w: a node of %d CPUs would split a core of %d threads", ErrTopology, perNode, t.Threads)
	case perNode%perSocket != 0 && perSocket%perNode != 0:
		return fmt.Errorf("%w: a node of %d CPUs would straddle sockets of %d", ErrTopology, perNode, perSocket)
	}
	return nil
}

func (t Topology) String() string {
	return fmt.Sprintf("sockets=%d,cores=%d,threads=%d,nodes=%d", t.Sockets, t.Cores, t.Threads, t.Nodes)
}

// memoryMiB reads a qemu -m size (a number of MiB, or with an M, G or T
// suffix) as MiB.
func memoryMiB(size string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(size, "M"):
		size = strings.TrimSuffix(size, "M")
	case strings.HasSuffix(size, "G"):
		size, mult = strings.TrimSuffix(size, "G"), 1024
	case strings.HasSuffix(size, "T"):
		size, mult = strings.TrimSuffix(size, "T"), 1024*1024
	}
	n, err := strconv.Atoi(size)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("memory %q is not a size; write e.g. 512M or 2G", size)
	}
	return n * mult, nil
}

// qemuArgs are the -smp, -object and -numa arguments for t with memory
// (a qemu -m size) split evenly between the nodes.
func (t Topology) qemuArgs(memory string) ([]string, error) {
	args := []string{"-smp", fmt.Sprintf("%d,sockets=%d,cores=%d,threads=%d", t.CPUs(), t.Sockets, t.Cores, t.Threads)}
	if t.Nodes == 1 {
		return args, nil
	}
	mib, err := memoryMiB(memory)
	if err != nil {
		return nil, err
	}
	if mib%t.Nodes != 0 {
		return nil, fmt.Errorf("%w: %d MiB of memory do not split into %d equal nodes", ErrTopology, mib, t.Nodes)
	}
	perNode := t.CPUs() / t.Nodes
	for n := 0; n < t.Nodes; n++ {
		args = append(args,
			"-object", fmt.Sprintf("memory-backend-ram,id=mem%d,size=%dM", n, mib/t.Nodes),
			"-numa", fmt.Sprintf("node,nodeid=%d,cpus=%d-%d,memdev=mem%d", n, n*perNode, (n+1)*perNode-1, n))
	}
	return args, nil
}
