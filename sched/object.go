package sched

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/hotlane/hotlane/bpf"
	"github.com/hotlane/hotlane/loader"
)

// object is one compilation of bpf/sched.bpf.c (see bpf/include/scx_api.h).
type object struct {
	name string // the HL_SCX_API it was built for
	load func() (*ebpf.CollectionSpec, error)
}

// objectFor picks the compilation loader.Kfuncs.SchedObject names.
func objectFor(k loader.Kfuncs) (object, error) {
	name, err := k.SchedObject()
	if err != nil {
		return object{}, fmt.Errorf("%w: %w", ErrUnsupportedKernel, err)
	}
	return object{name, objectLoad(name)}, nil
}

// newestObject is the compilation current kernels load.
const newestObject = "700"

// objectLoad returns the reader of the compilation called name.
func objectLoad(name string) func() (*ebpf.CollectionSpec, error) {
	switch name {
	case "612":
		return bpf.LoadSched612
	case "613":
		return bpf.LoadSched613
	default:
		return bpf.LoadSched700
	}
}

// The scheduler's objects are found by the names in these structs' `ebpf`
// tags, which all three compilations share (bpf.Sched612Specs and the
// others differ only in their type names; bpf2go generates them with
// -no-global-types, so one hand-written struct serves them all).

// schedSpecs are what configure writes into the object before load.
type schedSpecs struct {
	layoutSpecs
	Ops             *ebpf.MapSpec      `ebpf:"hotlane_ops"`
	Classes         *ebpf.VariableSpec `ebpf:"hl_classes"`
	StarvationNs    *ebpf.VariableSpec `ebpf:"starvation_ns"`
	MinSliceNs      *ebpf.VariableSpec `ebpf:"min_slice_ns"`
	DebtBudgetNs    *ebpf.VariableSpec `ebpf:"debt_budget_ns"`
	NiceWeight      *ebpf.VariableSpec `ebpf:"nice_weight"`
	DebugErrorAfter *ebpf.VariableSpec `ebpf:"debug_error_after"`
	// The device hooks, removed from the object for a policy without
	// device matchers.
	DeviceOpen  *ebpf.ProgramSpec `ebpf:"hl_device_open"`
	DeviceIoctl *ebpf.ProgramSpec `ebpf:"hl_device_ioctl"`
}

// schedObjects are what the Go side uses of a loaded scheduler
// (loader.Collection.Assign): they stay the collection's, which closes them.
type schedObjects struct {
	Ops   *ebpf.Map `ebpf:"hotlane_ops"` // the struct_ops map, which enables it
	Stats *ebpf.Map `ebpf:"stats"`
	Tasks *ebpf.Map `ebpf:"hl_tasks"` // task storage: each task's class
	// Counters in .bss, and why the scheduler ended.
	ClassifyStorageFailures *ebpf.Variable `ebpf:"hl_classify_storage_failures"`
	DevUseFailures          *ebpf.Variable `ebpf:"hl_dev_use_failures"`
	QuotaFailures           *ebpf.Variable `ebpf:"hl_quota_failures"`
	ExitInfo                *ebpf.Variable `ebpf:"exit_info"`
}

// deviceHooks are the programs that note device opens and ioctls for the
// policy's device matchers (sched.bpf.c), loaded only for a policy that
// has some; the collection closes them too.
type deviceHooks struct {
	Open  *ebpf.Program `ebpf:"hl_device_open"`
	Ioctl *ebpf.Program `ebpf:"hl_device_ioctl"`
}
