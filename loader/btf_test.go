package loader

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// buildSpec marshals types into raw BTF and loads it back, so the tests
// see a Spec shaped exactly like one read from a kernel.
func buildSpec(t *testing.T, types ...btf.Type) *btf.Spec {
	t.Helper()
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range types {
		if _, err := b.Add(typ); err != nil {
			t.Fatalf("add %v: %v", typ, err)
		}
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

var (
	u64Type  = &btf.Int{Name: "u64", Size: 8}
	boolType = &btf.Int{Name: "bool", Size: 1, Encoding: btf.Bool}
)

// kfunc returns a global function called name taking nargs u64 arguments.
func kfunc(name string, nargs int, ret btf.Type) *btf.Func {
	params := make([]btf.FuncParam, nargs)
	for i := range params {
		params[i] = btf.FuncParam{Name: "a", Type: u64Type}
	}
	return &btf.Func{Name: name, Type: &btf.FuncProto{Return: ret, Params: params}, Linkage: btf.GlobalFunc}
}

func schedExtOps() *btf.Struct {
	return &btf.Struct{Name: "sched_ext_ops", Size: 8, Members: []btf.Member{{Name: "flags", Type: u64Type}}}
}

func kfuncs612() []btf.Type {
	return []btf.Type{
		schedExtOps(),
		kfunc("scx_bpf_dispatch", 4, (*btf.Void)(nil)),
		kfunc("scx_bpf_dispatch_vtime", 5, (*btf.Void)(nil)),
		kfunc("scx_bpf_consume", 1, boolType),
		kfunc("scx_bpf_dispatch_from_dsq", 4, boolType),
		kfunc("scx_bpf_kick_cpu", 2, (*btf.Void)(nil)),
		kfunc("scx_bpf_reenqueue_local", 0, u64Type),
	}
}

func kfuncs613() []btf.Type {
	return append(kfuncs612(), // 6.13 keeps the old names as deprecated aliases
		kfunc("scx_bpf_dsq_insert", 4, (*btf.Void)(nil)),
		kfunc("scx_bpf_dsq_insert_vtime", 5, (*btf.Void)(nil)),
		kfunc("scx_bpf_dsq_move_to_local", 1, boolType),
		kfunc("scx_bpf_dsq_move", 4, boolType),
	)
}

func kfuncs619() []btf.Type {
	return []btf.Type{
		schedExtOps(),
		kfunc("scx_bpf_dsq_insert", 4, (*btf.Void)(nil)),
		kfunc("scx_bpf_dsq_insert___v2", 4, boolType),
		kfunc("scx_bpf_dsq_insert_vtime", 5, (*btf.Void)(nil)),
		kfunc("__scx_bpf_dsq_insert_vtime", 2, boolType),
		kfunc("scx_bpf_dsq_move_to_local", 1, boolType),
		kfunc("scx_bpf_dsq_move", 4, boolType),
		kfunc("scx_bpf_reenqueue_local", 0, u64Type),
		kfunc("scx_bpf_reenqueue_local___v2", 0, (*btf.Void)(nil)),
	}
}

// kfuncs7x is shaped like 7.3: plain, ___v2 and ___v2_impl (plus _impl)
// names side by side, which makes the plain names ambiguous for
// cilium/ebpf.
func kfuncs7x() []btf.Type {
	return []btf.Type{
		schedExtOps(),
		kfunc("scx_bpf_dsq_insert", 4, (*btf.Void)(nil)),
		kfunc("scx_bpf_dsq_insert___v2", 4, boolType),
		kfunc("scx_bpf_dsq_insert___v2_impl", 5, boolType),
		kfunc("scx_bpf_dsq_insert_impl", 5, (*btf.Void)(nil)),
		kfunc("scx_bpf_dsq_insert_vtime", 5, (*btf.Void)(nil)),
		kfunc("__scx_bpf_dsq_insert_vtime", 2, boolType),
		kfunc("__scx_bpf_dsq_insert_vtime_impl", 3, boolType),
		kfunc("scx_bpf_dsq_move_to_local", 1, boolType),
		kfunc("scx_bpf_dsq_move_to_local___v2", 2, boolType),
		kfunc("scx_bpf_dsq_move_to_local___v2_impl", 3, boolType),
		kfunc("scx_bpf_dsq_move_to_local_impl", 2, boolType),
		kfunc("scx_bpf_dsq_move", 4, boolType),
		kfunc("scx_bpf_reenqueue_local", 0, u64Type),
		kfunc("scx_bpf_reenqueue_local___v2", 0, (*btf.Void)(nil)),
	}
}

func noScx() []btf.Type {
	return []btf.Type{
		&btf.Struct{Name: "task_struct", Size: 8, Members: []btf.Member{{Name: "pid", Type: u64Type}}},
		kfunc("do_nanosleep", 2, u64Type),
		kfunc("bpf_task_acquire", 1, u64Type),
	}
}

func TestKfuncsFromBTF(t *testing.T) {
	for _, tc := range []struct {
		name  string
		types []btf.Type
		want  Kfuncs
	}{
		{"6.12", kfuncs612(), Kfuncs{
			API:            KfuncAPI612,
			DsqInsert:      "scx_bpf_dispatch",
			DsqInsertVtime: "scx_bpf_dispatch_vtime",
			DsqMoveToLocal: "scx_bpf_consume",
			DsqMove:        "scx_bpf_dispatch_from_dsq",
			ReenqueueLocal: "scx_bpf_reenqueue_local",
		}},
		{"6.13", kfuncs613(), Kfuncs{
			API:            KfuncAPI613,
			DsqInsert:      "scx_bpf_dsq_insert",
			DsqInsertVtime: "scx_bpf_dsq_insert_vtime",
			DsqMoveToLocal: "scx_bpf_dsq_move_to_local",
			DsqMove:        "scx_bpf_dsq_move",
			ReenqueueLocal: "scx_bpf_reenqueue_local",
		}},
		{"6.19", kfuncs619(), Kfuncs{
			API:                KfuncAPIV2,
			DsqInsert:          "scx_bpf_dsq_insert___v2",
			DsqInsertVtime:     "scx_bpf_dsq_insert_vtime",
			DsqInsertVtimeArgs: "__scx_bpf_dsq_insert_vtime",
			DsqMoveToLocal:     "scx_bpf_dsq_move_to_local",
			DsqMove:            "scx_bpf_dsq_move",
			ReenqueueLocal:     "scx_bpf_reenqueue_local___v2",
		}},
		{"7.x", kfuncs7x(), Kfuncs{
			API:                KfuncAPIV2,
			DsqInsert:          "scx_bpf_dsq_insert___v2",
			DsqInsertVtime:     "scx_bpf_dsq_insert_vtime",
			DsqInsertVtimeArgs: "__scx_bpf_dsq_insert_vtime",
			DsqMoveToLocal:     "scx_bpf_dsq_move_to_local___v2",
			DsqMove:            "scx_bpf_dsq_move",
			ReenqueueLocal:     "scx_bpf_reenqueue_local___v2",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := buildSpec(t, tc.types...)
			api, err := KfuncGenerationFromBTF(spec)
			if err != nil {
				t.Fatalf("KfuncGenerationFromBTF: %v", err)
			}
			if api != tc.want.API {
				t.Errorf("KfuncGenerationFromBTF = %v, want %v", api, tc.want.API)
			}
			if !HasSchedExtOps(spec) {
				t.Error("HasSchedExtOps = false, want true")
			}
			got, err := KfuncsFromBTF(spec)
			if err != nil {
				t.Fatalf("KfuncsFromBTF: %v", err)
			}
			if got != tc.want {
				t.Errorf("KfuncsFromBTF =\n %+v\nwant\n %+v", got, tc.want)
			}
			for _, name := range []string{got.DsqInsert, got.DsqInsertVtime, got.DsqMoveToLocal, got.DsqMove} {
				if _, err := LookupKfunc(spec, name); err != nil {
					t.Errorf("chosen name does not resolve: %v", err)
				}
			}
		})
	}
}

func TestKfuncGenerationNoSchedExt(t *testing.T) {
	spec := buildSpec(t, noScx()...)
	if HasSchedExtOps(spec) {
		t.Error("HasSchedExtOps = true on a spec without sched_ext_ops")
	}
	if api, err := KfuncGenerationFromBTF(spec); !errors.Is(err, ErrNoSchedExt) {
		t.Errorf("KfuncGenerationFromBTF = %v, %v; want ErrNoSchedExt", api, err)
	}
	if _, err := KfuncsFromBTF(spec); !errors.Is(err, ErrNoSchedExt) {
		t.Errorf("KfuncsFromBTF error = %v, want ErrNoSchedExt", err)
	}
	if _, err := KfuncGenerationFromBTF(nil); !errors.Is(err, ErrNoBTF) {
		t.Errorf("KfuncGenerationFromBTF(nil) error = %v, want ErrNoBTF", err)
	}
}

func TestKfuncGenerationUnknown(t *testing.T) {
	// sched_ext_ops without any kfunc name we know: a future kernel.
	spec := buildSpec(t, schedExtOps(), kfunc("scx_bpf_kick_cpu", 2, (*btf.Void)(nil)))
	if _, err := KfuncGenerationFromBTF(spec); !errors.Is(err, ErrUnknownKfuncAPI) {
		t.Errorf("error = %v, want ErrUnknownKfuncAPI", err)
	}
	// A known generation whose vtime kfunc is missing is reported too.
	spec = buildSpec(t, schedExtOps(),
		kfunc("scx_bpf_dsq_insert", 4, (*btf.Void)(nil)),
		kfunc("scx_bpf_dsq_move_to_local", 1, boolType))
	k, err := KfuncsFromBTF(spec)
	if !errors.Is(err, ErrUnknownKfuncAPI) {
		t.Fatalf("error = %v, want ErrUnknownKfuncAPI", err)
	}
	if k.API != KfuncAPI613 || k.DsqInsert != "scx_bpf_dsq_insert" || k.DsqInsertVtime != "" {
		t.Errorf("partial result = %+v", k)
	}
}

func TestLookupKfunc(t *testing.T) {
	spec := buildSpec(t, kfuncs7x()...)
	fn, err := LookupKfunc(spec, "scx_bpf_dsq_insert___v2")
	if err != nil {
		t.Fatal(err)
	}
	if fn.Name != "scx_bpf_dsq_insert___v2" {
		t.Errorf("LookupKfunc returned %q", fn.Name)
	}
	if _, err := LookupKfunc(spec, "scx_bpf_dispatch"); !errors.Is(err, ErrKfuncNotFound) {
		t.Errorf("LookupKfunc(missing) error = %v, want ErrKfuncNotFound", err)
	}
	// The plain name exists; whether cilium/ebpf resolves it depends on
	// its ___ handling, which is why KfuncsFromBTF prefers ___v2.
	if !hasFunc(spec, "scx_bpf_dsq_insert") {
		t.Error("hasFunc(scx_bpf_dsq_insert) = false")
	}
	_, err = LookupKfunc(spec, "scx_bpf_dsq_insert")
	t.Logf("LookupKfunc(plain scx_bpf_dsq_insert) on 7.x-shaped BTF: %v", err)
}

// TestCiliumFlavourLookupSkips pins a cilium/ebpf bug the kfunc
// generations work around. btf.Spec.AnyTypesByName takes every type of the
// same essential name (the name before a "___" flavour suffix) and deletes
// the ones whose full name differs, but after each slices.Delete it moves
// on past the element that slid into the deleted one's place. With the
// plain name first and two flavours after it, one flavour survives, so the
// plain name resolves to two functions: TypeByName reports
// ErrMultipleMatches, and the kfunc fixup fails the load even for a __weak
// kfunc (only ErrNotFound makes a weak kfunc optional). That is why
// hotlane cannot ship one object with weak kfuncs guarded by
// bpf_ksym_exists: on 7.x the plain scx_bpf_dsq_insert it would carry for
// 6.13-6.18 fails the load. Three objects, each naming one generation's
// kfuncs only, never look a plain name up where flavours exist.
//
// When this test fails, cilium/ebpf has fixed the lookup: one object with
// weak kfuncs becomes possible (see sched/object.go).
func TestCiliumFlavourLookupSkips(t *testing.T) {
	spec := buildSpec(t,
		kfunc("scx_bpf_dsq_insert", 4, (*btf.Void)(nil)),
		kfunc("scx_bpf_dsq_insert___v2", 4, boolType),
		kfunc("scx_bpf_dsq_insert___v2_impl", 5, boolType),
	)
	types, err := spec.AnyTypesByName("scx_bpf_dsq_insert")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, typ := range types {
		names = append(names, typ.TypeName())
	}
	if len(names) == 1 {
		t.Fatalf("cilium/ebpf now finds only %v: its flavour lookup is fixed; consider one scheduler object with weak kfuncs", names)
	}
	t.Logf("AnyTypesByName(scx_bpf_dsq_insert) = %v: the element after each deleted one is skipped", names)
	var fn *btf.Func
	if err := spec.TypeByName("scx_bpf_dsq_insert", &fn); !errors.Is(err, btf.ErrMultipleMatches) {
		t.Errorf("TypeByName(plain name) error = %v, want ErrMultipleMatches (what the kfunc fixup turns into a failed load)", err)
	}
	// The same three types in another order show it is the skip, not
	// the data: with the plain name between the flavours, the one skipped
	// is the plain name itself, and the lookup comes out right.
	spec = buildSpec(t,
		kfunc("scx_bpf_dsq_insert___v2", 4, boolType),
		kfunc("scx_bpf_dsq_insert", 4, (*btf.Void)(nil)),
		kfunc("scx_bpf_dsq_insert___v2_impl", 5, boolType),
	)
	if err := spec.TypeByName("scx_bpf_dsq_insert", &fn); err != nil {
		t.Errorf("TypeByName(plain name between the flavours) = %v, want it found", err)
	}
}

func TestKfuncAPIText(t *testing.T) {
	for _, a := range []KfuncAPI{KfuncAPIUnknown, KfuncAPI612, KfuncAPI613, KfuncAPIV2} {
		text, err := a.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back KfuncAPI
		if err := back.UnmarshalText(text); err != nil || back != a {
			t.Errorf("round trip of %v: got %v, %v", a, back, err)
		}
	}
	if KfuncAPIV2.String() != "v2" || KfuncAPI612.String() != "6.12" {
		t.Errorf("String: %v %v", KfuncAPIV2, KfuncAPI612)
	}
}

func TestEnumValue(t *testing.T) {
	spec := buildSpec(t,
		&btf.Enum{Name: "scx_kick_flags", Size: 4, Values: []btf.EnumValue{
			{Name: "SCX_KICK_IDLE", Value: 1}, {Name: "SCX_KICK_PREEMPT", Value: 2}}},
		&btf.Enum{Name: "scx_dsq_id_flags", Size: 8, Values: []btf.EnumValue{
			{Name: "SCX_DSQ_GLOBAL", Value: 1<<63 | 1}, {Name: "SCX_DSQ_LOCAL", Value: 1<<63 | 2}}},
		&btf.Enum{Name: "bpf_map_update_flags", Size: 4, Values: []btf.EnumValue{
			{Name: "BPF_ANY", Value: 0}}},
	)
	for _, tc := range []struct {
		enum, name string
		want       uint64
	}{
		{"scx_kick_flags", "SCX_KICK_PREEMPT", 2},
		{"scx_dsq_id_flags", "SCX_DSQ_LOCAL", 1<<63 | 2},
		{"bpf_map_update_flags", "BPF_ANY", 0},
	} {
		if v, err := EnumValue(spec, tc.enum, tc.name); err != nil || v != tc.want {
			t.Errorf("EnumValue(%s, %s) = %#x, %v; want %#x", tc.enum, tc.name, v, err, tc.want)
		}
	}
	for _, tc := range [][2]string{
		{"scx_kick_flags", "SCX_NOT_A_THING"},
		{"scx_kick_flags", "SCX_DSQ_LOCAL"}, // another enum's
		{"no_such_enum", "SCX_KICK_IDLE"},
	} {
		if _, err := EnumValue(spec, tc[0], tc[1]); !errors.Is(err, ErrEnumNotFound) {
			t.Errorf("EnumValue(%s, %s) error = %v, want ErrEnumNotFound", tc[0], tc[1], err)
		}
	}
}

// TestRealSchedExtBTF checks the detection against a real sched_ext
// kernel's BTF (raw or ELF vmlinux) named by HOTLANE_TEST_VMLINUX.
func TestRealSchedExtBTF(t *testing.T) {
	path := os.Getenv("HOTLANE_TEST_VMLINUX")
	if path == "" {
		t.Skip("HOTLANE_TEST_VMLINUX is not set: no sched_ext kernel BTF to test against (e.g. the VM kernel's vmlinux.btf)")
	}
	spec, err := LoadBTF(path)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	if !HasSchedExtOps(spec) {
		t.Fatalf("%s has no sched_ext_ops", path)
	}
	k, err := KfuncsFromBTF(spec)
	if err != nil {
		t.Fatalf("KfuncsFromBTF: %v", err)
	}
	t.Logf("%s: %+v", path, k)
	for _, name := range []string{k.DsqInsert, k.DsqInsertVtime, k.DsqMoveToLocal} {
		if _, err := LookupKfunc(spec, name); err != nil {
			t.Errorf("chosen kfunc does not resolve: %v", err)
		}
	}
	// A ___v2 name in BTF must win over the plain one next to it.
	if hasFunc(spec, "scx_bpf_dsq_insert___v2") {
		if k.API != KfuncAPIV2 || k.DsqInsert != "scx_bpf_dsq_insert___v2" {
			t.Errorf("BTF has scx_bpf_dsq_insert___v2 but got %+v", k)
		}
	}
	if hasFunc(spec, "scx_bpf_dsq_move_to_local___v2") && k.DsqMoveToLocal != "scx_bpf_dsq_move_to_local___v2" {
		t.Errorf("BTF has scx_bpf_dsq_move_to_local___v2 but got %q", k.DsqMoveToLocal)
	}
	if _, err := LookupKfunc(spec, "scx_bpf_dsq_insert"); err != nil {
		t.Logf("as DESIGN.md says, the plain name does not resolve: %v", err)
	}

	// Values that have not changed since 6.12.
	for _, tc := range []struct {
		enum, name string
		want       uint64
	}{
		{"scx_dsq_id_flags", "SCX_DSQ_GLOBAL", 1<<63 | 1},
		{"scx_dsq_id_flags", "SCX_DSQ_LOCAL", 1<<63 | 2},
		{"scx_kick_flags", "SCX_KICK_PREEMPT", 2},
		{"scx_enq_flags", "SCX_ENQ_WAKEUP", 1},
		{"scx_ops_flags", "SCX_OPS_SWITCH_PARTIAL", 8},
	} {
		if got, err := EnumValue(spec, tc.enum, tc.name); err != nil || got != tc.want {
			t.Errorf("%s = %#x, %v; want %#x", tc.name, got, err, tc.want)
		}
	}
	if v, err := EnumValue(spec, "scx_enq_flags", "SCX_ENQ_PREEMPT"); err != nil {
		t.Error(err)
	} else {
		t.Logf("SCX_ENQ_PREEMPT = %#x", v)
	}
}

// TestHostKernelBTF runs the pure functions on the running kernel's BTF.
func TestHostKernelBTF(t *testing.T) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Skipf("no kernel BTF on this machine: %v", err)
	}
	api, err := KfuncGenerationFromBTF(spec)
	if HasSchedExtOps(spec) {
		if err != nil {
			t.Fatalf("kernel has sched_ext_ops but: %v", err)
		}
		t.Logf("host kfunc API: %v", api)
		return
	}
	if !errors.Is(err, ErrNoSchedExt) {
		t.Errorf("kernel without sched_ext_ops: KfuncGenerationFromBTF = %v, %v; want ErrNoSchedExt", api, err)
	}
}

// doctor's scx_kfuncs check and run decide by the same SchedObject: a
// kernel whose kfuncs no scheduler object calls (6.19 and 7.0) fails the
// check, the others pass it and name the object.
func TestScxKfuncsCheckAgreesWithRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		types  []btf.Type
		object string // "": refused
	}{
		{"6.12", kfuncs612(), "612"},
		{"6.13", kfuncs613(), "613"},
		{"6.19", kfuncs619(), ""},
		{"7.x", kfuncs7x(), "700"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := buildSpec(t, tc.types...)
			var f Features
			c := probeScxKfuncs(&f, spec)
			k, err := KfuncsFromBTF(spec)
			if err != nil {
				t.Fatal(err)
			}
			object, objErr := k.SchedObject()
			if c.Available != (objErr == nil) {
				t.Errorf("doctor says available %v, SchedObject (what run loads) says %q, %v", c.Available, object, objErr)
			}
			if tc.object == "" {
				if !errors.Is(objErr, ErrNoSchedObject) || !strings.Contains(c.Error, "no scheduler object") || c.Advice == "" {
					t.Errorf("check %+v, SchedObject error %v: want it refused with the reason and advice", c, objErr)
				}
				return
			}
			if object != tc.object || !strings.Contains(c.Detail, "scheduler object "+tc.object) {
				t.Errorf("object %q, detail %q; want %s named", object, c.Detail, tc.object)
			}
		})
	}
}
