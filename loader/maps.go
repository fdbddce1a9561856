package loader

import (
	"errors"
	"reflect"

	"github.com/cilium/ebpf"
)

// MapsByName returns the maps of objs, a pointer to a struct that
// ebpf.CollectionSpec.LoadAndAssign filled (bpf2go's XxxMaps, or a
// struct embedding it), keyed by the names in their `ebpf` tags: what
// ebpf.CollectionOptions.MapReplacements takes. Programs loaded later, as
// collections of their own, then share these maps instead of creating
// copies. Nil maps are left out.
func MapsByName(objs any) map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	collectMaps(reflect.ValueOf(objs), out)
	return out
}

// CloseMaps closes the maps of objs, as MapsByName finds them: the Close
// of a struct that holds a bpf2go XxxMaps and the data sections' maps
// (".rodata", ".bss"), which bpf2go's own Close does not know.
func CloseMaps(objs any) error {
	var errs []error
	for _, m := range MapsByName(objs) {
		errs = append(errs, m.Close())
	}
	return errors.Join(errs...)
}

func collectMaps(v reflect.Value, out map[string]*ebpf.Map) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	mapType := reflect.TypeFor[*ebpf.Map]()
	for i := range v.NumField() {
		f, field := v.Type().Field(i), v.Field(i)
		name, tagged := f.Tag.Lookup("ebpf")
		switch {
		case tagged && f.Type == mapType:
			if m := field.Interface().(*ebpf.Map); m != nil {
				out[name] = m
			}
		case f.Anonymous:
			collectMaps(field, out)
		}
	}
}
