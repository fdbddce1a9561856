package sched

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/topology"
)

// kernelBTF builds a BTF blob holding sched_ext_ops and the named kfuncs,
// shaped like a kernel of one generation.
func kernelBTF(t *testing.T, funcs ...string) *btf.Spec {
	t.Helper()
	u64 := &btf.Int{Name: "u64", Size: 8}
	types := []btf.Type{
		&btf.Struct{Name: "sched_ext_ops", Size: 8, Members: []btf.Member{{Name: "flags", Type: u64}}},
		&btf.Enum{Name: "scx_ops_flags", Size: 8, Values: []btf.EnumValue{{Name: "SCX_OPS_ENQ_LAST", Value: 2}}},
	}
	for _, name := range funcs {
		proto := &btf.FuncProto{Return: (*btf.Void)(nil), Params: []btf.FuncParam{{Name: "dsq_id", Type: u64}}}
		types = append(types, &btf.Func{Name: name, Type: proto, Linkage: btf.GlobalFunc})
	}
	return btfSpec(t, types...)
}

// btfSpec marshals types into a BTF blob and loads it back.
func btfSpec(t *testing.T, types ...btf.Type) *btf.Spec {
	t.Helper()
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range types {
		if _, err := b.Add(typ); err != nil {
			t.Fatal(err)
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

func TestObjectForEachGeneration(t *testing.T) {
	for _, tc := range []struct {
		kernel string
		funcs  []string
		want   string
	}{
		{"6.12", []string{"scx_bpf_dispatch", "scx_bpf_dispatch_vtime", "scx_bpf_consume", "scx_bpf_dispatch_from_dsq", "scx_bpf_reenqueue_local"}, "612"},
		{"6.13", []string{"scx_bpf_dsq_insert", "scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local", "scx_bpf_dsq_move",
			// 6.13 kept the 6.12 names as deprecated aliases.
			"scx_bpf_dispatch", "scx_bpf_dispatch_vtime", "scx_bpf_consume", "scx_bpf_dispatch_from_dsq", "scx_bpf_reenqueue_local"}, "613"},
		{"7.3", []string{"scx_bpf_dsq_insert", "scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert___v2_impl",
			"scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local", "scx_bpf_dsq_move_to_local___v2",
			"scx_bpf_dsq_move_to_local___v2_impl", "scx_bpf_dsq_move", "scx_bpf_reenqueue_local", "scx_bpf_reenqueue_local___v2"}, "700"},
	} {
		k, err := loader.KfuncsFromBTF(kernelBTF(t, tc.funcs...))
		if err != nil {
			t.Fatalf("%s: %v", tc.kernel, err)
		}
		obj, err := objectFor(k)
		if err != nil {
			t.Fatalf("%s: %v", tc.kernel, err)
		}
		if obj.name != tc.want {
			t.Errorf("%s: object %s, want %s", tc.kernel, obj.name, tc.want)
		}
		// The object must load its own spec: the three are distinct.
		if _, err := obj.load(); err != nil {
			t.Errorf("%s: load spec: %v", tc.kernel, err)
		}
	}
}

// 6.19 and 7.0 have the ___v2 insert but the old move_to_local: no object
// names exactly that mix, and the error says what was found.
func TestObjectForRefusesMixedGeneration(t *testing.T) {
	k, err := loader.KfuncsFromBTF(kernelBTF(t, "scx_bpf_dsq_insert", "scx_bpf_dsq_insert___v2",
		"scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local", "scx_bpf_dsq_move", "scx_bpf_reenqueue_local", "scx_bpf_reenqueue_local___v2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := objectFor(k); !errors.Is(err, ErrUnsupportedKernel) {
		t.Fatalf("objectFor(6.19 mix) = %v, want ErrUnsupportedKernel", err)
	}
}

// Each object references exactly the kfuncs of its generation, so none can
// trip over the ambiguous names of another.
func TestObjectsNameOnlyTheirGenerationsKfuncs(t *testing.T) {
	for _, tc := range []struct {
		obj       object
		must, not []string
	}{
		{object{"612", nil}, []string{"scx_bpf_dispatch", "scx_bpf_dispatch_vtime", "scx_bpf_consume", "scx_bpf_reenqueue_local"}, []string{"scx_bpf_dsq_insert", "scx_bpf_dsq_insert___v2", "scx_bpf_dsq_move_to_local"}},
		{object{"613", nil}, []string{"scx_bpf_dsq_insert", "scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local", "scx_bpf_reenqueue_local"}, []string{"scx_bpf_dispatch", "scx_bpf_dsq_insert___v2", "scx_bpf_consume"}},
		{object{"700", nil}, []string{"scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert_vtime", "scx_bpf_dsq_move_to_local___v2", "scx_bpf_reenqueue_local___v2"}, []string{"scx_bpf_dsq_insert", "scx_bpf_consume", "scx_bpf_dsq_move_to_local", "scx_bpf_reenqueue_local"}},
	} {
		k := map[string]loader.Kfuncs{
			"612": {DsqInsert: "scx_bpf_dispatch", DsqInsertVtime: "scx_bpf_dispatch_vtime", DsqMoveToLocal: "scx_bpf_consume", DsqMove: "scx_bpf_dispatch_from_dsq", ReenqueueLocal: "scx_bpf_reenqueue_local"},
			"613": {DsqInsert: "scx_bpf_dsq_insert", DsqInsertVtime: "scx_bpf_dsq_insert_vtime", DsqMoveToLocal: "scx_bpf_dsq_move_to_local", DsqMove: "scx_bpf_dsq_move", ReenqueueLocal: "scx_bpf_reenqueue_local"},
			"700": {DsqInsert: "scx_bpf_dsq_insert___v2", DsqInsertVtime: "scx_bpf_dsq_insert_vtime", DsqMoveToLocal: "scx_bpf_dsq_move_to_local___v2", DsqMove: "scx_bpf_dsq_move", ReenqueueLocal: "scx_bpf_reenqueue_local___v2"},
		}[tc.obj.name]
		obj, err := objectFor(k)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := obj.load()
		if err != nil {
			t.Fatal(err)
		}
		called := map[string]bool{}
		for _, p := range spec.Programs {
			for _, ins := range p.Instructions {
				if ref := ins.Reference(); ins.IsKfuncCall() && ref != "" {
					called[ref] = true
				}
			}
		}
		for _, f := range tc.must {
			if !called[f] {
				t.Errorf("object %s does not call %s (calls %v)", obj.name, f, called)
			}
		}
		for _, f := range tc.not {
			if called[f] {
				t.Errorf("object %s calls %s, which belongs to another generation", obj.name, f)
			}
		}
	}
}

// The flags follow the kernel: ENQ_MIGRATION_DISABLED only where the enum
// has it (a kernel without it rejects unknown flags), SWITCH_PARTIAL and
// ENQ_LAST only when asked, all read from BTF.
func TestOpsFlagsFollowTheKernel(t *testing.T) {
	spec := func(values ...btf.EnumValue) *btf.Spec {
		return btfSpec(t, &btf.Enum{Name: "scx_ops_flags", Size: 8, Values: values})
	}
	k614 := spec(btf.EnumValue{Name: "SCX_OPS_ENQ_EXITING", Value: 4}, btf.EnumValue{Name: "SCX_OPS_SWITCH_PARTIAL", Value: 8})
	k617 := spec(btf.EnumValue{Name: "SCX_OPS_ENQ_LAST", Value: 2}, btf.EnumValue{Name: "SCX_OPS_SWITCH_PARTIAL", Value: 8}, btf.EnumValue{Name: "SCX_OPS_ENQ_MIGRATION_DISABLED", Value: 16})
	for _, tc := range []struct {
		name             string
		kernel           *btf.Spec
		partial, enqLast bool
		want             uint64
	}{
		{"6.14", k614, false, false, 0},
		{"6.14 partial", k614, true, false, 8},
		{"6.17", k617, false, false, 16},
		{"6.17 partial", k617, true, false, 24},
		{"7.x, cpu.max", k617, false, true, 18},
	} {
		got, err := opsFlags(tc.kernel, tc.partial, tc.enqLast)
		if err != nil || got != tc.want {
			t.Errorf("%s: opsFlags = %#x, %v; want %#x", tc.name, got, err, tc.want)
		}
	}
	if _, err := opsFlags(spec(btf.EnumValue{Name: "SCX_OPS_ENQ_EXITING", Value: 4}), true, false); !errors.Is(err, loader.ErrEnumNotFound) {
		t.Errorf("partial on a kernel without SWITCH_PARTIAL: %v, want ErrEnumNotFound", err)
	}
}

// Every compilation has what the Go side names in schedSpecs, schedObjects
// and deviceHooks, and configure writes the settings it names; without
// device matchers it takes the device hooks out of the object.
func TestEveryObjectHasTheTypedObjects(t *testing.T) {
	table, err := policy.Default("infer").Compile("")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Table: table, Timeout: DefaultTimeout, Starvation: 3 * time.Millisecond}
	for _, name := range []string{"612", "613", "700"} {
		spec, err := objectLoad(name)()
		if err != nil {
			t.Fatal(err)
		}
		// A stand-in for the loaded collection: something under each name.
		coll := &loader.Collection{Programs: map[string]*ebpf.Program{}, Maps: map[string]*ebpf.Map{}, Variables: map[string]*ebpf.Variable{}}
		for n := range spec.Programs {
			coll.Programs[n] = new(ebpf.Program)
		}
		for n := range spec.Maps {
			coll.Maps[n] = new(ebpf.Map)
		}
		for n := range spec.Variables {
			coll.Variables[n] = new(ebpf.Variable)
		}
		var objs schedObjects
		var hooks deviceHooks
		if err := errors.Join(coll.Assign(&objs), coll.Assign(&hooks)); err != nil {
			t.Errorf("object %s: %v", name, err)
		}

		if err := configure(spec, cfg, kernelBTF(t), topology.Uniform(4, 2)); err != nil {
			t.Fatalf("object %s: configure: %v", name, err)
		}
		var starvation uint64
		var nrCPUs uint32
		if err := errors.Join(spec.Variables["starvation_ns"].Get(&starvation), spec.Variables["nr_cpus"].Get(&nrCPUs)); err != nil {
			t.Fatal(err)
		}
		if starvation != uint64(cfg.Starvation) || nrCPUs != 4 {
			t.Errorf("object %s: starvation_ns %d, nr_cpus %d; want %d and 4", name, starvation, nrCPUs, cfg.Starvation)
		}
		var specs schedSpecs
		if err := spec.Assign(&specs); err == nil || !strings.Contains(err.Error(), "hl_device_open") {
			t.Errorf("object %s: the device hooks stayed in the object of a policy without device matchers (%v)", name, err)
		}
	}
}

// The quota table of the object that enforces cpu.max holds MaxQuotas
// cgroups, the figure the documentation and the table-full test use.
func TestQuotaTableHoldsMaxQuotas(t *testing.T) {
	spec, err := objectLoad("700")()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := spec.Maps["quotas"]
	if !ok {
		t.Fatal("object 700 has no quotas map")
	}
	if m.MaxEntries != MaxQuotas {
		t.Errorf("quotas holds %d cgroups, MaxQuotas says %d", m.MaxEntries, MaxQuotas)
	}
}

// A bench keeps a scheduler's last line of output as the reason it
// failed: a verifier rejection must end with the verifier's reason, not
// with its instruction count.
func TestLoadErrorEndsWithTheVerifiersReason(t *testing.T) {
	ve := &ebpf.VerifierError{Cause: errors.New("argument list too long"), Log: []string{
		"; for (cpu = 0; cpu < nr_cpus; cpu++) @ sched.bpf.c:312",
		"BPF program is too large. Processed 1000001 insn",
		"processed 1000001 insns (limit 1000000) max_states_per_insn 4 total_states 12345 peak_states 999 mark_read 12",
	}}
	err := explainLoadError(fmt.Errorf("program hotlane_enqueue: %w", ve))
	lines := strings.Split(err.Error(), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != ve.Log[1] {
		t.Errorf("last line = %q, want %q; whole error:\n%v", last, ve.Log[1], err)
	}
	if !strings.HasPrefix(lines[0], "the kernel's verifier rejected the scheduler (program hotlane_enqueue") {
		t.Errorf("first line = %q, want it to name the program", lines[0])
	}
}
