package loader

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/google/go-cmp/cmp"
)

// opsTypes returns an ops struct as an object declares it and the
// kernel's value type around its own, different, layout of the same ops.
func opsTypes() (user, value *btf.Struct) {
	u64 := &btf.Int{Name: "u64", Size: 8}
	u32 := &btf.Int{Name: "u32", Size: 4}
	fn := &btf.Pointer{Target: &btf.FuncProto{Return: u32}}
	name := &btf.Array{Type: &btf.Int{Name: "char", Size: 1}, Nelems: 8}
	user = &btf.Struct{Name: "ops", Size: 32, Members: []btf.Member{
		{Name: "enqueue", Type: fn, Offset: 0},
		{Name: "flags", Type: u64, Offset: 64},
		{Name: "timeout_ms", Type: u32, Offset: 128},
		{Name: "name", Type: name, Offset: 192},
	}}
	kernOps := &btf.Struct{Name: "ops", Size: 40, Members: []btf.Member{
		{Name: "name", Type: name, Offset: 0},
		{Name: "reserved", Type: u64, Offset: 64},
		{Name: "timeout_ms", Type: u32, Offset: 128},
		{Name: "flags", Type: u64, Offset: 192},
		{Name: "enqueue", Type: fn, Offset: 256},
	}}
	value = &btf.Struct{Name: structOpsPrefix + "ops", Size: 48, Members: []btf.Member{
		{Name: "common", Type: u64, Offset: 0},
		{Name: "data", Type: kernOps, Offset: 64},
	}}
	return user, value
}

func TestFillStructOpsMovesMembersToTheKernelLayout(t *testing.T) {
	user, value := opsTypes()
	data := make([]byte, user.Size)
	binary.NativeEndian.PutUint64(data[8:], 0x4000)
	binary.NativeEndian.PutUint32(data[16:], 5000)
	copy(data[24:], "hotlane")
	kern := make([]byte, value.Size)
	// No program is attached to enqueue: its pointer stays zero.
	if err := fillStructOps(kern, value, user, data, nil, nil); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, value.Size)
	copy(want[8:], "hotlane")
	binary.NativeEndian.PutUint32(want[8+16:], 5000)
	binary.NativeEndian.PutUint64(want[8+24:], 0x4000)
	if diff := cmp.Diff(want, kern); diff != "" {
		t.Errorf("kernel value (-want +got):\n%s", diff)
	}
}

func TestFillStructOpsRefuses(t *testing.T) {
	user, value := opsTypes()
	specs := map[string]*ebpf.ProgramSpec{"hl_enqueue": {Type: ebpf.StructOps, AttachTo: "ops:enqueue"}}
	for _, tc := range []struct {
		name  string
		edit  func(data []byte, user *btf.Struct)
		specs map[string]*ebpf.ProgramSpec
		want  string
	}{
		{"a program that did not load", func([]byte, *btf.Struct) {}, specs, "program hl_enqueue not loaded"},
		{"a set member the kernel lacks", func(data []byte, u *btf.Struct) {
			u.Members = append(u.Members, btf.Member{Name: "future", Type: &btf.Int{Name: "u32", Size: 4}, Offset: 128 + 32})
			data[20] = 1
		}, nil, "member future is set but the kernel's ops lacks it"},
		{"a member of another size", func(data []byte, u *btf.Struct) {
			u.Members[2].Type = &btf.Int{Name: "u64", Size: 8}
			data[16] = 1
		}, nil, "member timeout_ms: 8 bytes here, 4 in the kernel's ops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := *user
			u.Members = append([]btf.Member(nil), user.Members...)
			data := make([]byte, u.Size)
			tc.edit(data, &u)
			err := fillStructOps(make([]byte, value.Size), value, &u, data, tc.specs, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
