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
	load := map[string]func() (*ebpf.CollectionSpec, error){
		"612": bpf.LoadSched612,
		"613": bpf.LoadSched613,
		"700": bpf.LoadSched700,
	}[name]
	return object{name, load}, nil
}
