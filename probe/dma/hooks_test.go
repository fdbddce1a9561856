package dma

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/google/go-cmp/cmp"

	"github.com/hotlane/hotlane/loader"
)

func targets(as []attachment) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

// vmKernel is the pinned 7.3 VM kernel, from its cached vmlinux.
func vmKernel(t *testing.T) *kernel {
	t.Helper()
	home, _ := os.UserHomeDir()
	cache := os.Getenv("HOTLANE_CACHE")
	if cache == "" {
		cache = filepath.Join(home, ".cache", "hotlane")
	}
	path := filepath.Join(cache, "kernels", "linux-binary-7.3.4+deb13-cloud-amd64", "vmlinux")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("VM kernel not cached (%v); `make test` fetches it", err)
	}
	spec, err := loader.LoadBTF(path)
	if err != nil {
		t.Fatal(err)
	}
	return &kernel{release: "7.3.4", btf: spec, tracefs: func() (string, error) { return "", errors.New("no tracefs in this test") }}
}

func TestPlanOnVMKernel(t *testing.T) {
	k := vmKernel(t)

	p, err := k.makePlan(HooksTpBTF, nil, LatencyAuto)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"tp_btf/dma_map_phys", "tp_btf/dma_unmap_phys", "tp_btf/dma_map_sg", "tp_btf/dma_map_sg_err",
		"tp_btf/dma_unmap_sg", "tp_btf/dma_alloc", "tp_btf/dma_alloc_pages", "tp_btf/dma_alloc_sgt_err",
		"tp_btf/dma_alloc_sgt", "tp_btf/dma_free", "tp_btf/dma_free_pages", "tp_btf/dma_free_sgt",
	}
	if diff := cmp.Diff(want, targets(p.count)); diff != "" {
		t.Errorf("tp_btf hooks (-want +got):\n%s", diff)
	}
	wantLat := []string{"fexit/dma_map_phys", "fexit/__dma_map_sg_attrs", "fentry/dma_map_phys", "fentry/__dma_map_sg_attrs"}
	if diff := cmp.Diff(wantLat, targets(p.latency)); diff != "" {
		t.Errorf("latency hooks (-want +got):\n%s", diff)
	}
	if p.fexitCounts || len(p.notes) > 0 {
		t.Errorf("fexitCounts %v, notes %v", p.fexitCounts, p.notes)
	}

	p, err = k.makePlan(HooksFentry, nil, LatencyOff)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"fexit/dma_map_phys", "fexit/dma_unmap_phys", "fexit/__dma_map_sg_attrs",
		"fexit/dma_unmap_sg_attrs", "fexit/dma_alloc_attrs", "fexit/dma_free_attrs"}
	if diff := cmp.Diff(want, targets(p.count)); diff != "" {
		t.Errorf("fentry family hooks (-want +got):\n%s", diff)
	}
	if !p.fexitCounts || len(p.latency) != 0 {
		t.Errorf("fexitCounts %v, latency %v", p.fexitCounts, targets(p.latency))
	}

	// The classic family needs tracefs, which this test does not have.
	if _, err := k.makePlan(HooksTracepoint, nil, LatencyOff); !errors.Is(err, ErrNoHooks) {
		t.Errorf("tracepoint plan without tracefs: %v, want ErrNoHooks", err)
	}
}

func TestPlanNamedEvents(t *testing.T) {
	k := vmKernel(t)
	events, err := normalizeEvents([]string{"dma:dma_map_phys,dma_unmap_phys", "dma_map_phys"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := k.makePlan(HooksTpBTF, events, LatencyOff)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tp_btf/dma_map_phys", "tp_btf/dma_unmap_phys"}, targets(p.count)); diff != "" {
		t.Errorf("hooks (-want +got):\n%s", diff)
	}

	// dma_map_page is the pre-6.18 name: known, but not on this kernel.
	_, err = k.makePlan(HooksTpBTF, []string{"dma_map_page"}, LatencyOff)
	if !errors.Is(err, ErrMissingTracepoint) {
		t.Fatalf("dma_map_page on 7.3: %v, want ErrMissingTracepoint", err)
	}
	for _, want := range []string{"dma:dma_map_page does not exist", "7.3.4", "dma_map_phys since 6.18", "it has: dma_map_phys"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}

	if _, err := normalizeEvents([]string{"dma_map_bogus"}); !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), "known: dma_map_phys") {
		t.Errorf("unknown tracepoint: %v", err)
	}
}

// fakeKernel builds kernel BTF with the given raw tracepoint prototypes
// (after the void *) and functions, from a handful of base types.
func fakeKernel(t *testing.T, tracepoints map[string]string, funcs map[string]string) *kernel {
	t.Helper()
	dev := &btf.Pointer{Target: &btf.Struct{Name: "device"}}
	other := &btf.Pointer{Target: &btf.Struct{Name: "scatterlist"}}
	u64 := &btf.Int{Name: "long long unsigned int", Size: 8}
	void := &btf.Pointer{Target: &btf.Void{}}
	arg := func(c rune) btf.Type {
		switch c {
		case 'D':
			return dev
		case 'P':
			return other
		default:
			return u64
		}
	}
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, shape := range tracepoints {
		params := []btf.FuncParam{{Name: "data", Type: void}}
		for _, c := range shape {
			params = append(params, btf.FuncParam{Type: arg(c)})
		}
		td := &btf.Typedef{Name: "btf_trace_" + name, Type: &btf.Pointer{Target: &btf.FuncProto{Return: &btf.Void{}, Params: params}}}
		if _, err := b.Add(td); err != nil {
			t.Fatal(err)
		}
	}
	for name, shape := range funcs {
		args, ret, _ := strings.Cut(shape, ">")
		var params []btf.FuncParam
		for _, c := range args {
			params = append(params, btf.FuncParam{Type: arg(c)})
		}
		var r btf.Type = &btf.Void{}
		if ret != "" {
			r = arg(rune(ret[0]))
		}
		fn := &btf.Func{Name: name, Type: &btf.FuncProto{Return: r, Params: params}, Linkage: btf.GlobalFunc}
		if _, err := b.Add(fn); err != nil {
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
	return &kernel{release: "6.15.0", btf: spec, tracefs: func() (string, error) { return "", errors.New("no tracefs") }}
}

// Before 6.18 the single-mapping tracepoints were dma_map_page and
// dma_unmap_page, and dma_map_page_attrs was the function to hook.
func TestPlanPre618Names(t *testing.T) {
	k := fakeKernel(t,
		map[string]string{
			"dma_map_page": "DIIIII", "dma_unmap_page": "DIIII",
			"dma_map_resource": "DIIIII", "dma_unmap_resource": "DIIII",
			// A prototype this code does not read: skipped with a note.
			"dma_alloc": "DPIIII",
		},
		map[string]string{"dma_map_page_attrs": "DPIIII>I", "dma_unmap_page_attrs": "DIIII>", "dma_map_sg_attrs": "DPIII>I"})
	p, err := k.makePlan(HooksTpBTF, nil, LatencyAuto)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tp_btf/dma_map_page", "tp_btf/dma_map_resource", "tp_btf/dma_unmap_page", "tp_btf/dma_unmap_resource"}
	if diff := cmp.Diff(want, targets(p.count)); diff != "" {
		t.Errorf("hooks (-want +got):\n%s", diff)
	}
	wantLat := []string{"fexit/dma_map_page_attrs", "fexit/dma_map_sg_attrs", "fentry/dma_map_page_attrs", "fentry/dma_map_sg_attrs"}
	if diff := cmp.Diff(wantLat, targets(p.latency)); diff != "" {
		t.Errorf("latency hooks (-want +got):\n%s", diff)
	}
	if len(p.notes) != 1 || !strings.Contains(p.notes[0], "dma:dma_alloc has arguments DPIIII") {
		t.Errorf("notes %q, want one about dma_alloc's prototype", p.notes)
	}
	if p.latency[0].prog != "hldma_fx_map_page" {
		t.Errorf("dma_map_page_attrs gets program %s", p.latency[0].prog)
	}

	p, err = k.makePlan(HooksFentry, nil, LatencyOff)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"fexit/dma_map_page_attrs", "fexit/dma_unmap_page_attrs", "fexit/dma_map_sg_attrs"}
	if diff := cmp.Diff(want, targets(p.count)); diff != "" {
		t.Errorf("fentry family hooks (-want +got):\n%s", diff)
	}
	if len(p.notes) != 3 { // unmap_sg, alloc, free
		t.Errorf("notes %q, want three missing roles", p.notes)
	}
}

// A kernel without dma:* tracepoints: the tracepoint families say so in one
// line, and a map tracepoint with an unexpected prototype is refused.
func TestPlanNoTracepoints(t *testing.T) {
	k := fakeKernel(t, nil, map[string]string{"dma_map_page_attrs": "DPIIII>I"})
	_, err := k.makePlan(HooksTpBTF, nil, LatencyOff)
	if !errors.Is(err, ErrMissingTracepoint) || !strings.Contains(err.Error(), "use --hook fentry") {
		t.Errorf("no tracepoints: %v", err)
	}
	k = fakeKernel(t, map[string]string{"dma_map_phys": "DIII", "dma_unmap_phys": "DIIII"}, nil)
	_, err = k.makePlan(HooksTpBTF, nil, LatencyOff)
	if !errors.Is(err, ErrNoHooks) || !strings.Contains(err.Error(), "dma:dma_map_phys has arguments DIII") {
		t.Errorf("wrong prototype: %v", err)
	}
	// No map function at all: latency on must fail, auto only notes it.
	k = fakeKernel(t, map[string]string{"dma_map_phys": "DIIIII", "dma_unmap_phys": "DIIII"}, nil)
	if _, err := k.makePlan(HooksTpBTF, nil, LatencyOn); !errors.Is(err, ErrNoLatency) {
		t.Errorf("latency on without map functions: %v", err)
	}
	p, err := k.makePlan(HooksTpBTF, nil, LatencyAuto)
	if err != nil || len(p.latency) != 0 || len(p.notes) != 1 {
		t.Errorf("latency auto without map functions: %v, latency %v, notes %q", err, targets(p.latency), p.notes)
	}
}

func TestFamilies(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want []string
	}{
		{Options{}, []string{HooksTpBTF, HooksTracepoint, HooksFentry}},
		{Options{Hooks: HooksAuto}, []string{HooksTpBTF, HooksTracepoint, HooksFentry}},
		{Options{Events: []string{"dma_map_phys"}}, []string{HooksTpBTF, HooksTracepoint}},
		{Options{Hooks: HooksFentry}, []string{HooksFentry}},
	} {
		if diff := cmp.Diff(tc.want, families(tc.opts)); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.opts, diff)
		}
	}
}
