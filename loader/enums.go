package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/btf"
)

// EnumValue returns the value of the enumerator name (for example
// "SCX_OPS_SWITCH_PARTIAL") of the enum called enumType ("scx_ops_flags")
// in spec. These values change between kernels, so the scheduler reads
// them from the running kernel's BTF instead of hard-coding them. The enum
// is found by its name, through BTF's name index: walking every type of a
// kernel's BTF to find an enumerator took 0.3 s on a real CPU and seconds
// under emulation, on every start. The error wraps ErrEnumNotFound when
// the kernel has no such enumerator.
func EnumValue(spec *btf.Spec, enumType, name string) (uint64, error) {
	if spec == nil {
		return 0, ErrNoBTF
	}
	types, err := spec.AnyTypesByName(enumType)
	if err != nil && !errors.Is(err, btf.ErrNotFound) {
		return 0, fmt.Errorf("enum %s: %w", enumType, err)
	}
	for _, typ := range types {
		enum, ok := typ.(*btf.Enum)
		if !ok {
			continue
		}
		for _, v := range enum.Values {
			if v.Name == name {
				return v.Value, nil
			}
		}
	}
	return 0, fmt.Errorf("%s in enum %s: %w", name, enumType, ErrEnumNotFound)
}
