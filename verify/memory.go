package verify

import (
	"fmt"
	"runtime"

	"github.com/hotlane/hotlane/bpf"
)

// htabElemOverhead is what the kernel's hash map adds to each element
// beside its key and value (struct htab_elem, 6.x, rounded up).
const htabElemOverhead = 48

// TaskTableBytes is about how much kernel memory the per-task table of
// maxTasks entries takes (TracerConfig.PerTask): it is a preallocated hash
// map, so all of it is taken when the tracer loads, used or not, plus an
// element per CPU the kernel keeps spare.
func TaskTableBytes(maxTasks int) (int64, error) {
	spec, err := bpf.LoadRunqlat()
	if err != nil {
		return 0, fmt.Errorf("load the tracer's object: %w", err)
	}
	var maps bpf.RunqlatMapSpecs
	if err := spec.Assign(&maps); err != nil {
		return 0, fmt.Errorf("the tracer's object: %w", err)
	}
	round8 := func(n uint32) int64 { return int64(n+7) &^ 7 }
	elem := htabElemOverhead + round8(maps.Tasks.KeySize) + round8(maps.Tasks.ValueSize)
	return int64(maxTasks+runtime.NumCPU()) * elem, nil
}
