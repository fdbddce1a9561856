package loader

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// ScxEnums returns every enumerator whose name starts with "SCX_" (for
// example SCX_DSQ_LOCAL, SCX_ENQ_PREEMPT, SCX_KICK_PREEMPT, SCX_SLICE_DFL,
// SCX_OPS_SWITCH_PARTIAL), from all enums in spec, named or anonymous.
// These values change between kernels, so the scheduler reads them from
// the running kernel's BTF instead of hard-coding them. It returns an error
// wrapping ErrNoSchedExt when spec has none.
func ScxEnums(spec *btf.Spec) (map[string]uint64, error) {
	if spec == nil {
		return nil, ErrNoBTF
	}
	values := make(map[string]uint64)
	err := walkEnums(spec, func(name string, value uint64) bool {
		if !strings.HasPrefix(name, "SCX_") {
			return true
		}
		if _, dup := values[name]; dup {
			// Enumerator names are global in C; keep the first.
			return true
		}
		values[name] = value
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(values) == 0 {
		return nil, fmt.Errorf("no SCX_* enum values in BTF: %w", ErrNoSchedExt)
	}
	return values, nil
}

// EnumValue returns the value of the enumerator called name (for example
// "SCX_ENQ_WAKEUP"), searching every enum in spec. The error wraps
// ErrEnumNotFound when no enum has it.
func EnumValue(spec *btf.Spec, name string) (uint64, error) {
	if spec == nil {
		return 0, ErrNoBTF
	}
	var (
		found bool
		value uint64
	)
	err := walkEnums(spec, func(n string, v uint64) bool {
		if n == name {
			found, value = true, v
			return false
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s: %w", name, ErrEnumNotFound)
	}
	return value, nil
}

// walkEnums calls fn for each enumerator of each enum in spec until fn
// returns false. Enum values are stored as uint64 by cilium/ebpf (signed
// values sign-extended), which is how the BPF side uses them.
func walkEnums(spec *btf.Spec, fn func(name string, value uint64) bool) error {
	for typ, err := range spec.All() {
		if err != nil {
			return fmt.Errorf("iterate BTF types: %w", err)
		}
		enum, ok := typ.(*btf.Enum)
		if !ok {
			continue
		}
		for _, v := range enum.Values {
			if !fn(v.Name, v.Value) {
				return nil
			}
		}
	}
	return nil
}
