package policy

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"github.com/google/go-cmp/cmp"
)

// cNames maps Go field names to the C member names of struct hl_rule and
// struct hl_class; blank Go fields are the C _pad members.
var cNames = map[string]string{
	"ClassID": "class_id", "Kinds": "kinds", "Comm": "comm", "Pcomm": "pcomm",
	"CommMask": "comm_mask", "PcommMask": "pcomm_mask", "PID": "pid", "TGID": "tgid",
	"CgroupID": "cgroup_id", "CgroupLevel": "cgroup_level", "DevSet": "devset", "_": "_pad",
	"Lo": "lo", "Hi": "hi", "Block": "block",
	"SliceNs": "slice_ns", "Weight": "weight", "HighPriority": "high_priority", "Preempt": "preempt",
}

type member struct {
	Name         string
	Offset, Size uintptr
}

func goLayout(typ reflect.Type) []member {
	var ms []member
	for i := range typ.NumField() {
		f := typ.Field(i)
		ms = append(ms, member{cNames[f.Name], f.Offset, f.Type.Size()})
	}
	return ms
}

func TestLayout(t *testing.T) {
	// struct hl_rule in bpf/include/classify.bpf.h.
	wantRule := []member{
		{"class_id", 0, 4}, {"kinds", 4, 4}, {"comm", 8, 16}, {"pcomm", 24, 16},
		{"comm_mask", 40, 16}, {"pcomm_mask", 56, 16}, {"pid", 72, 4}, {"tgid", 76, 4},
		{"cgroup_id", 80, 8}, {"cgroup_level", 88, 4}, {"devset", 92, 4},
	}
	if diff := cmp.Diff(wantRule, goLayout(reflect.TypeFor[Rule]())); diff != "" {
		t.Errorf("Rule layout (-want +got):\n%s", diff)
	}
	var r Rule
	if unsafe.Sizeof(r) != 96 || unsafe.Offsetof(r.CgroupID) != 80 || unsafe.Offsetof(r.CgroupLevel) != 88 {
		t.Errorf("Rule: size %d, cgroup_id at %d, cgroup_level at %d; want 96, 80, 88",
			unsafe.Sizeof(r), unsafe.Offsetof(r.CgroupID), unsafe.Offsetof(r.CgroupLevel))
	}

	// struct hl_class as the scheduler declares it.
	wantClass := []member{{"slice_ns", 0, 8}, {"weight", 8, 4}, {"high_priority", 12, 1}, {"preempt", 13, 1}, {"_pad", 14, 2}}
	if diff := cmp.Diff(wantClass, goLayout(reflect.TypeFor[ClassConfig]())); diff != "" {
		t.Errorf("ClassConfig layout (-want +got):\n%s", diff)
	}
	var c ClassConfig
	if unsafe.Sizeof(c) != 16 {
		t.Errorf("ClassConfig: size %d; want 16", unsafe.Sizeof(c))
	}

	// struct hl_dev_range in classify.bpf.h.
	wantRange := []member{{"lo", 0, 4}, {"hi", 4, 4}, {"devset", 8, 4}, {"block", 12, 4}}
	if diff := cmp.Diff(wantRange, goLayout(reflect.TypeFor[DeviceRange]())); diff != "" {
		t.Errorf("DeviceRange layout (-want +got):\n%s", diff)
	}

	// cilium/ebpf's Variable.Set encodes like encoding/binary, which must
	// see no implicit padding: its size must equal the memory size.
	for _, v := range []any{Rule{}, ClassConfig{}, DeviceRange{}, [MaxRules]Rule{}, [MaxClasses]ClassConfig{}, [MaxDeviceRanges]DeviceRange{}} {
		if got, want := binary.Size(v), int(reflect.TypeOf(v).Size()); got != want {
			t.Errorf("binary.Size(%T) = %d; want %d", v, got, want)
		}
	}
}

// TestRuleEncoding checks the bytes the loader writes into hl_rules.
func TestRuleEncoding(t *testing.T) {
	r := Rule{ClassID: 1, Kinds: MatchCommPrefix | MatchCgroup, Comm: comm("inf"), CommMask: mask(3), CgroupID: 0x1122334455667788, CgroupLevel: 2}
	b, err := binary.Append(nil, binary.NativeEndian, r)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 96)
	ne := binary.NativeEndian
	ne.PutUint32(want[0:], 1)
	ne.PutUint32(want[4:], 0x41)
	copy(want[8:], "inf")
	copy(want[40:], []byte{0xff, 0xff, 0xff})
	ne.PutUint64(want[80:], 0x1122334455667788)
	ne.PutUint32(want[88:], 2)
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("encoding (-want +got):\n%s", diff)
	}
}

// TestLayoutMatchesBTF compares Rule and ClassConfig with the C types as
// clang lays them out: struct hl_rule and enum hl_match_kind from a small
// object compiled from classify.bpf.h (when clang is installed), and any
// hl_rule or hl_class in the committed BPF objects.
func TestLayoutMatchesBTF(t *testing.T) {
	var objs []string
	if clang := findClang(); clang != "" {
		objs = append(objs, compileHeader(t, clang))
	} else {
		t.Log("clang not found: not compiling classify.bpf.h")
	}
	committed, _ := filepath.Glob(filepath.Join("..", "bpf", "*.o"))
	objs = append(objs, committed...)

	checked := 0
	for _, obj := range objs {
		spec, err := btf.LoadSpec(obj)
		if err != nil {
			t.Errorf("%s: %v", obj, err)
			continue
		}
		for name, goType := range map[string]reflect.Type{"hl_rule": reflect.TypeFor[Rule](), "hl_class": reflect.TypeFor[ClassConfig](), "hl_dev_range": reflect.TypeFor[DeviceRange]()} {
			var s *btf.Struct
			if err := spec.TypeByName(name, &s); err != nil {
				continue // this object does not use it
			}
			checked++
			t.Logf("%s: comparing struct %s with %v", filepath.Base(obj), name, goType)
			var got []member
			for _, m := range s.Members {
				size, err := btf.Sizeof(m.Type)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, member{m.Name, uintptr(m.Offset.Bytes()), uintptr(size)})
			}
			if diff := cmp.Diff(goLayout(goType), got); diff != "" {
				t.Errorf("%s: struct %s differs from %v (-go +C):\n%s", obj, name, goType, diff)
			}
			if uintptr(s.Size) != goType.Size() {
				t.Errorf("%s: struct %s is %d bytes, %v %d", obj, name, s.Size, goType, goType.Size())
			}
		}
		var e *btf.Enum
		if err := spec.TypeByName("hl_match_kind", &e); err == nil {
			checked++
			want := map[string]MatchKind{
				"HL_MATCH_COMM_PREFIX": MatchCommPrefix, "HL_MATCH_COMM_EXACT": MatchCommExact,
				"HL_MATCH_PCOMM_PREFIX": MatchPcommPrefix, "HL_MATCH_PCOMM_EXACT": MatchPcommExact,
				"HL_MATCH_PID": MatchPID, "HL_MATCH_TGID": MatchTGID,
				"HL_MATCH_CGROUP": MatchCgroup, "HL_MATCH_SCHED_EXT": MatchSchedExt,
				"HL_MATCH_DEVICE": MatchDevice, "HL_MATCH_DEVICE_PROCESS": MatchDeviceProcess,
			}
			got := map[string]MatchKind{}
			for _, v := range e.Values {
				got[v.Name] = MatchKind(v.Value)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: enum hl_match_kind (-go +C):\n%s", obj, diff)
			}
		}
		var v *btf.Var
		for name, n := range map[string]uint32{"hl_rules": MaxRules, "hl_dev_ranges": MaxDeviceRanges, "hl_devset_idle_ns": MaxDeviceSets} {
			if err := spec.TypeByName(name, &v); err == nil {
				if a, ok := btf.UnderlyingType(v.Type).(*btf.Array); !ok || a.Nelems != n {
					t.Errorf("%s: %s is %v; want an array of %d", obj, name, v.Type, n)
				}
			}
		}
	}
	if checked == 0 {
		t.Skip("no BTF to compare with: install clang to compile classify.bpf.h")
	}
}

func findClang() string {
	for _, name := range []string{"clang", "clang-19", "clang-18", "clang-17", "clang-16"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// compileHeader builds an object with BTF for the types of classify.bpf.h.
func compileHeader(t *testing.T, clang string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "layout.bpf.c")
	code := `#include "vmlinux.h"
#include "hotlane_bpf.h"
#include "classify.bpf.h"
enum hl_match_kind hl_layout_kind; /* emit the enum into BTF */
LICENSE("GPL");
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "layout.bpf.o")
	bpfDir, err := filepath.Abs(filepath.Join("..", "bpf"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(clang, "-target", "bpf", "-O2", "-g", "-w",
		"-I"+bpfDir, "-I"+filepath.Join(bpfDir, "include"), "-c", src, "-o", obj)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compile classify.bpf.h: %v\n%s", err, out)
	}
	return obj
}
