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
