package loader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/report"
)

func TestParseFeatureNames(t *testing.T) {
	got, err := ParseFeatureNames([]string{"sched_ext", "btf, TP_BTF", " root ", "", "btf", "kprobe,,xdp"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sched_ext", "btf", "tp_btf", "caps", "kprobe", "xdp"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseFeatureNames = %v, want %v", got, want)
	}
	for _, n := range FeatureNames() {
		if got, err := ParseFeatureNames([]string{n}); err != nil || len(got) != 1 || got[0] != n {
			t.Errorf("ParseFeatureNames(%q) = %v, %v", n, got, err)
		}
	}

	_, err = ParseFeatureNames([]string{"sched_ext,bogus"})
	if !errors.Is(err, ErrUnknownFeature) {
		t.Fatalf("error = %v, want ErrUnknownFeature", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, `"bogus"`) {
		t.Errorf("error should be one line naming the bad feature: %q", msg)
	}
	for _, n := range FeatureNames() {
		if !strings.Contains(msg, n) {
			t.Errorf("error %q does not list valid name %q", msg, n)
		}
	}
}

func sampleFeatures() *Features {
	k := Kfuncs{API: KfuncAPIV2, DsqInsert: "scx_bpf_dsq_insert___v2", DsqInsertVtime: "scx_bpf_dsq_insert_vtime", DsqMoveToLocal: "scx_bpf_dsq_move_to_local___v2"}
	return &Features{
		Header: report.Header{SchemaVersion: report.SchemaVersion, Command: "doctor", Host: "node1", Kernel: "7.3.4-cloud-amd64",
			Losses: report.Losses{}},
		Machine:  "x86_64",
		Caps:     CapsFromMask(1<<unix.CAP_BPF | 1<<unix.CAP_PERFMON | 1<<unix.CAP_SYS_ADMIN | 1<<unix.CAP_NET_ADMIN),
		SchedExt: SchedExtInfo{InBTF: true, Sysfs: true, State: "disabled", Kfuncs: &k},
		Checks: []Feature{
			{Name: FeatureBTF, Available: true, Detail: "/sys/kernel/btf/vmlinux (5.5 MB)"},
			{Name: FeatureSchedExt, Detail: "no sched_ext_ops in kernel BTF", Advice: "this kernel lacks CONFIG_SCHED_CLASS_EXT: run `hotlane vm`", Error: "boom"},
			{Name: FeatureKprobe, Detail: "no kprobes"},
		},
		Notes: []string{"mounted tracefs"},
	}
}

func TestFeaturesMissing(t *testing.T) {
	f := sampleFeatures()
	if m := f.Missing([]string{FeatureBTF}); len(m) != 0 {
		t.Errorf("Missing(btf) = %v, want none", m)
	}
	m := f.Missing([]string{FeatureBTF, FeatureSchedExt, FeatureXDP})
	var names []string
	for _, x := range m {
		names = append(names, x.Name)
	}
	if want := []string{FeatureSchedExt, FeatureXDP}; !reflect.DeepEqual(names, want) {
		t.Errorf("Missing = %v, want %v (unprobed counts as missing)", names, want)
	}
}

func TestWriteText(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleFeatures().WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		"kernel 7.3.4-cloud-amd64 (x86_64), euid 0",
		"ok       btf         /sys/kernel/btf/vmlinux (5.5 MB)",
		"MISSING  sched_ext   no sched_ext_ops in kernel BTF",
		"                     -> this kernel lacks CONFIG_SCHED_CLASS_EXT: run `hotlane vm`",
		"MISSING  kprobe      no kprobes",
		"note: mounted tracefs",
		"1 of 3 features available; missing: sched_ext, kprobe",
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("WriteText:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
}

func TestWriteJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleFeatures().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, key := range append(report.HeaderKeys(), "machine", "euid", "capabilities", "sched_ext", "checks", "notes") {
		if _, ok := doc[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, buf.String())
		}
	}
	se := doc["sched_ext"].(map[string]any)
	kf := se["kfuncs"].(map[string]any)
	if kf["api"] != "v2" || kf["dsq_insert"] != "scx_bpf_dsq_insert___v2" || kf["dsq_move_to_local"] != "scx_bpf_dsq_move_to_local___v2" {
		t.Errorf("sched_ext.kfuncs = %v", kf)
	}
	checks := doc["checks"].([]any)
	c := checks[1].(map[string]any)
	if c["name"] != "sched_ext" || c["available"] != false || c["advice"] == nil || c["error"] != "boom" {
		t.Errorf("checks[1] = %v", c)
	}

	// The JSON reads back into the same struct.
	var back Features
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, sampleFeatures()) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, sampleFeatures())
	}
}

func TestCaps(t *testing.T) {
	all := CapsFromMask(0x000001fffeffffff) // this CI host: everything but CAP_SYS_RESOURCE
	if len(all.Missing) != 0 || len(all.Have) != 4 || !all.canBPF() {
		t.Errorf("CapsFromMask(host) = %+v", all)
	}
	onlyBPF := CapsFromMask(1 << unix.CAP_BPF)
	if onlyBPF.canBPF() {
		t.Error("CAP_BPF alone should not count as able to load tracing programs")
	}
	if want := []string{"CAP_PERFMON", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"}; !reflect.DeepEqual(onlyBPF.Missing, want) {
		t.Errorf("Missing = %v, want %v", onlyBPF.Missing, want)
	}
	if !CapsFromMask(1 << unix.CAP_SYS_ADMIN).canBPF() {
		t.Error("CAP_SYS_ADMIN implies CAP_BPF and CAP_PERFMON")
	}

	status := "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n"
	eff, err := ParseCapEff(strings.NewReader(status))
	if err != nil || eff != 0x000001fffeffffff {
		t.Errorf("ParseCapEff = %#x, %v", eff, err)
	}
	if _, err := ParseCapEff(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("ParseCapEff without CapEff line: no error")
	}
	if _, err := ParseCapEff(strings.NewReader("CapEff:\tzz\n")); err == nil {
		t.Error("ParseCapEff with garbage: no error")
	}
}

func TestEffectiveCaps(t *testing.T) {
	eff, err := effectiveCaps()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && eff == 0 {
		t.Errorf("running as root but the effective capability mask is empty")
	}
}

func TestReadSchedExtSysfs(t *testing.T) {
	dir := t.TempDir()
	s, err := ReadSchedExtStatus(filepath.Join(dir, "absent"))
	if err != nil || s.Present {
		t.Errorf("absent dir: %+v, %v", s, err)
	}

	se := filepath.Join(dir, "sched_ext")
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(se, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("state", "disabled\n")
	write("switch_all", "0\n")
	s, err = ReadSchedExtStatus(se)
	if err != nil {
		t.Fatal(err)
	}
	if want := (SchedExtStatus{Present: true, State: "disabled"}); s != want {
		t.Errorf("disabled: %+v, want %+v", s, want)
	}

	write("state", "enabled\n")
	write("root/ops", "simple\n")
	write("switch_all", "1\n")
	s, err = ReadSchedExtStatus(se)
	if err != nil {
		t.Fatal(err)
	}
	if want := (SchedExtStatus{Present: true, State: "enabled", Ops: "simple", SwitchAll: true}); s != want {
		t.Errorf("enabled: %+v, want %+v", s, want)
	}
}

func TestParseKconfig(t *testing.T) {
	v, err := parseKconfig(strings.NewReader("#\n# comment\nCONFIG_BPF=y\n# CONFIG_SCHED_CLASS_EXT is not set\nCONFIG_LOCALVERSION=\"-x\"\nCONFIG_HZ=250\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := kconfig{source: "test", values: v}
	for opt, want := range map[string]string{
		"CONFIG_BPF": "y", "CONFIG_SCHED_CLASS_EXT": "n", "CONFIG_LOCALVERSION": "-x", "CONFIG_HZ": "250", "CONFIG_KPROBES": "n",
	} {
		if got, ok := k.value(opt); !ok || got != want {
			t.Errorf("%s = %q, %v; want %q", opt, got, ok, want)
		}
	}
	if _, ok := (kconfig{}).value("CONFIG_BPF"); ok {
		t.Error("empty kconfig claims to know CONFIG_BPF")
	}
}

func TestFailureAdvice(t *testing.T) {
	eperm := fmt.Errorf("load fentry/do_nanosleep: %w", unix.EPERM)
	unpriv := &probeEnv{caps: CapsFromMask(0)}
	f := unpriv.failure(FeatureFentry, eperm, "exercised in the VM (`hotlane vm`)")
	if f.Available || !strings.Contains(f.Advice, "root") {
		t.Errorf("unprivileged EPERM: %+v", f)
	}
	priv := &probeEnv{caps: CapsFromMask(1<<unix.CAP_BPF | 1<<unix.CAP_PERFMON | 1<<unix.CAP_SYS_ADMIN)}
	f = priv.failure(FeatureFentry, eperm, "exercised in the VM (`hotlane vm`)")
	if !strings.Contains(f.Detail, "EPERM although") || !strings.Contains(f.Advice, "hotlane vm") || f.Error == "" {
		t.Errorf("privileged EPERM: %+v", f)
	}
	f = priv.failure(FeatureXDP, fmt.Errorf("load xdp: %w", ebpf.ErrNotSupported), "")
	if !strings.Contains(f.Detail, "not supported") || f.Advice == "" {
		t.Errorf("ErrNotSupported: %+v", f)
	}
	if got := CleanError(errors.New("load: operation not permitted (MEMLOCK may be too low, consider rlimit.RemoveMemlock)")); got != "load: operation not permitted" {
		t.Errorf("CleanError = %q", got)
	}
}

func TestLoadBTF(t *testing.T) {
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range kfuncs7x() {
		if _, err := b.Add(typ); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "vmlinux.btf")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := LoadBTF(path)
	if err != nil {
		t.Fatal(err)
	}
	if api, err := KfuncGenerationFromBTF(spec); err != nil || api != KfuncAPIV2 {
		t.Errorf("KfuncGenerationFromBTF = %v, %v", api, err)
	}
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not btf at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBTF(junk); err == nil {
		t.Error("LoadBTF(junk): no error")
	}
	if _, err := LoadBTF(filepath.Join(dir, "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadBTF(absent) = %v, want ErrNotExist", err)
	}
}
