package sched

import (
	"fmt"
	"math"

	"github.com/cilium/ebpf"

	"github.com/hotlane/hotlane/topology"
)

// Limits of the machines the scheduler handles (sched_ctx.bpf.h).
const (
	MaxCPUs = 512 // HL_MAX_CPUS
	MaxLLCs = 128 // HL_MAX_LLCS
)

// cpuLayout is the topology as the scheduler's read-only data holds it:
// each CPU's LLC, and the CPUs grouped by LLC.
type cpuLayout struct {
	nrCPUs, nrLLCs uint32
	cpuLLC         [MaxCPUs]uint32
	llcCPUs        [MaxCPUs]uint32
	llcFirst       [MaxLLCs]uint32
	llcSize        [MaxLLCs]uint32
	llcNode        [MaxLLCs]uint32
}

// newCPULayout lays the topology out for the scheduler, or says why the
// machine is too large for it.
func newCPULayout(t *topology.Topology) (*cpuLayout, error) {
	if len(t.CPUs) > MaxCPUs {
		return nil, fmt.Errorf("%d possible CPUs: hotlane is built for at most %d", len(t.CPUs), MaxCPUs)
	}
	if len(t.LLCs) > MaxLLCs {
		return nil, fmt.Errorf("%d last-level caches: hotlane is built for at most %d", len(t.LLCs), MaxLLCs)
	}
	l := &cpuLayout{nrCPUs: uint32(len(t.CPUs)), nrLLCs: uint32(len(t.LLCs))}
	next := uint32(0)
	for i, cpus := range t.LLCs {
		l.llcFirst[i] = next
		l.llcSize[i] = uint32(len(cpus))
		if len(cpus) > 0 {
			l.llcNode[i] = uint32(t.CPUs[cpus[0]].Node)
		}
		for _, c := range cpus {
			l.cpuLLC[c] = uint32(i)
			l.llcCPUs[next] = uint32(c)
			next++
		}
	}
	return l, nil
}

// layoutSpecs are the object's read-only globals that hold the layout.
type layoutSpecs struct {
	NrCpus   *ebpf.VariableSpec `ebpf:"nr_cpus"`
	NrLlcs   *ebpf.VariableSpec `ebpf:"nr_llcs"`
	CpuLlc   *ebpf.VariableSpec `ebpf:"cpu_llc"`
	LlcCpus  *ebpf.VariableSpec `ebpf:"llc_cpus"`
	LlcFirst *ebpf.VariableSpec `ebpf:"llc_first"`
	LlcSize  *ebpf.VariableSpec `ebpf:"llc_size"`
	LlcNode  *ebpf.VariableSpec `ebpf:"llc_node"`
}

// variables adds the layout to vars, the values configure writes into
// the object's read-only globals.
func (l *cpuLayout) variables(v *layoutSpecs, vars map[*ebpf.VariableSpec]any) {
	vars[v.NrCpus] = l.nrCPUs
	vars[v.NrLlcs] = l.nrLLCs
	vars[v.CpuLlc] = l.cpuLLC
	vars[v.LlcCpus] = l.llcCPUs
	vars[v.LlcFirst] = l.llcFirst
	vars[v.LlcSize] = l.llcSize
	vars[v.LlcNode] = l.llcNode
}

// niceWeights is the weight of each nice level from -20 to 19, the
// kernel's ratio of 1.25 a level with nice 0 at 1024 (nice_weight in
// sched_fair.bpf.h).
func niceWeights() [40]uint32 {
	var w [40]uint32
	for i := range w {
		w[i] = uint32(math.Round(NiceWeight(i - 20)))
	}
	return w
}
