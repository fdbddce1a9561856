package ioctl

import (
	"reflect"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/hotlane/hotlane/bpf"
)

// TestSpec checks the compiled object without loading it: one pair of
// programs per hook family, of the right type and attach point.
func TestSpec(t *testing.T) {
	spec, err := bpf.LoadIoctl()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		typ      ebpf.ProgramType
		attachTo string
	}{
		bpf.IoctlProgIoctlFentry:   {ebpf.Tracing, syscallFunc64},
		bpf.IoctlProgIoctlFexit:    {ebpf.Tracing, syscallFunc64},
		bpf.IoctlProgIoctlFentry32: {ebpf.Tracing, syscallFunc32},
		bpf.IoctlProgIoctlFexit32:  {ebpf.Tracing, syscallFunc32},
		bpf.IoctlProgIoctlTpEnter:  {ebpf.TracePoint, "syscalls/sys_enter_ioctl"},
		bpf.IoctlProgIoctlTpExit:   {ebpf.TracePoint, "syscalls/sys_exit_ioctl"},
		bpf.IoctlProgIoctlBtfEnter: {ebpf.Tracing, "sys_enter"},
		bpf.IoctlProgIoctlBtfExit:  {ebpf.Tracing, "sys_exit"},
		bpf.IoctlProgIoctlRawEnter: {ebpf.RawTracepoint, "sys_enter"},
		bpf.IoctlProgIoctlRawExit:  {ebpf.RawTracepoint, "sys_exit"},
		bpf.IoctlProgIoctlSwitch:   {ebpf.Tracing, "sched_switch"},
		bpf.IoctlProgIoctlWaking:   {ebpf.Tracing, "sched_waking"},
	}
	if len(spec.Programs) != len(want) {
		t.Errorf("%d programs, want %d", len(spec.Programs), len(want))
	}
	var specs bpf.IoctlProgramSpecs
	if err := spec.Assign(&specs); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, h := range Hooks() {
		for _, ps := range hookPrograms(&specs, h) {
			listed[ps.Name] = true
		}
	}
	for _, ps := range wakeupPrograms(&specs) {
		listed[ps.Name] = true
	}
	if len(listed) != len(want) {
		t.Errorf("hookPrograms and wakeupPrograms list %d programs, want %d", len(listed), len(want))
	}
	for name, w := range want {
		p := spec.Programs[name]
		if p == nil {
			t.Errorf("no program %s", name)
			continue
		}
		if p.Type != w.typ || p.AttachTo != w.attachTo || p.License != "GPL" {
			t.Errorf("%s: %v to %q (%s), want %v to %q", name, p.Type, p.AttachTo, p.License, w.typ, w.attachTo)
		}
		if len(name) > 15 {
			t.Errorf("%s: the kernel keeps 15 bytes of a program's name", name)
		}
	}
	if rb := spec.Maps[bpf.IoctlMapIoctlEvents]; rb.Type != ebpf.RingBuf || rb.MaxEntries != 256*1024 {
		t.Errorf("events: %v of %d bytes", rb.Type, rb.MaxEntries)
	}
}

// TestEventLayout compares the Go mirror of struct ioctl_event with the
// object's BTF, field by field.
func TestEventLayout(t *testing.T) {
	spec, err := bpf.LoadIoctl()
	if err != nil {
		t.Fatal(err)
	}
	var s *btf.Struct
	if err := spec.Types.TypeByName("ioctl_event", &s); err != nil {
		t.Fatal(err)
	}
	if int(s.Size) != eventSize {
		t.Errorf("struct ioctl_event is %d bytes, Go's event %d", s.Size, eventSize)
	}
	goType := reflect.TypeOf(event{})
	if len(s.Members) != goType.NumField() {
		t.Fatalf("%d members in C, %d fields in Go", len(s.Members), goType.NumField())
	}
	for i, m := range s.Members {
		f := goType.Field(i)
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			t.Fatal(err)
		}
		if uint32(f.Offset) != m.Offset.Bytes() || int(f.Type.Size()) != size {
			t.Errorf("%s/%s: Go offset %d size %d, C offset %d size %d", m.Name, f.Name, f.Offset, f.Type.Size(), m.Offset.Bytes(), size)
		}
	}
}

func TestKeepSlowest(t *testing.T) {
	var list []SlowCall
	for i := range 3 * MaxSlowKept {
		// 0, 7, 14, ... modulo 3*MaxSlowKept: every latency once, shuffled.
		list = keepSlowest(list, SlowCall{Latency: time.Duration(i * 7 % (3 * MaxSlowKept)), FD: uint32(i)})
	}
	if len(list) != MaxSlowKept {
		t.Fatalf("kept %d", len(list))
	}
	for i, s := range list {
		if want := time.Duration(3*MaxSlowKept - 1 - i); s.Latency != want {
			t.Fatalf("list[%d] = %v, want %v", i, s.Latency, want)
		}
	}
	// Ties keep arrival order.
	list = nil
	for i := range 3 {
		list = keepSlowest(list, SlowCall{Latency: 5, FD: uint32(i)})
	}
	if list[0].FD != 0 || list[2].FD != 2 {
		t.Errorf("ties reordered: %+v", list)
	}
}
