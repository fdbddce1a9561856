package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func comm(s string) (b [CommLen]byte) {
	copy(b[:], s)
	return b
}

// mask is the compare mask of a name's first n bytes.
func mask(n int) (m [CommLen]byte) {
	for i := range n {
		m[i] = 0xff
	}
	return m
}

func TestCompile(t *testing.T) {
	p, err := Load(context.Background(), filepath.Join("testdata", "tiers.json"))
	if err != nil {
		t.Fatal(err)
	}
	// No cgroup matchers: the root is never looked at.
	tab, err := p.Compile("/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	want := &Table{
		Rules: []Rule{
			{ClassID: 0, Kinds: MatchCommExact, Comm: comm("infer-rt"), CommMask: mask(CommLen)},
			{ClassID: 0, Kinds: MatchTGID, TGID: 4242},
			{ClassID: 1, Kinds: MatchCommPrefix | MatchPcommPrefix, Comm: comm("infer"), CommMask: mask(5), Pcomm: comm("python"), PcommMask: mask(6)},
			{ClassID: 1, Kinds: MatchPcommPrefix, Pcomm: comm("triton"), PcommMask: mask(6)},
			{ClassID: 2, Kinds: MatchCommPrefix, Comm: comm("make"), CommMask: mask(4)},
			{ClassID: 2, Kinds: MatchCommPrefix, Comm: comm("cc1"), CommMask: mask(3)},
			// "normal", the catch-all, has no rules.
		},
		Classes: []ClassConfig{
			{SliceNs: 500_000, Weight: 100, HighPriority: 1, Preempt: 1},
			// "preempt" left out of a high-priority class: it preempts.
			{SliceNs: 2_000_000, Weight: 100, HighPriority: 1, Preempt: 1},
			{SliceNs: 20_000_000, Weight: 20},
			{SliceNs: 5_000_000, Weight: 100},
		},
		Names: []string{"realtime", "inference", "batch", "normal"},
	}
	if diff := cmp.Diff(want, tab); diff != "" {
		t.Errorf("Compile (-want +got):\n%s", diff)
	}
	if tab.NrRules() != 6 || tab.NrClasses() != 4 {
		t.Errorf("NrRules, NrClasses = %d, %d; want 6, 4", tab.NrRules(), tab.NrClasses())
	}
	rules := tab.RulesArray()
	if diff := cmp.Diff(want.Rules, rules[:6]); diff != "" {
		t.Errorf("RulesArray (-want +got):\n%s", diff)
	}
	for i, r := range rules[6:] {
		if r != (Rule{}) {
			t.Errorf("RulesArray()[%d] = %+v; want zero", 6+i, r)
		}
	}
	classes := tab.ClassesArray()
	if diff := cmp.Diff(want.Classes, classes[:4]); diff != "" {
		t.Errorf("ClassesArray (-want +got):\n%s", diff)
	}
	if classes[4] != (ClassConfig{}) {
		t.Errorf("ClassesArray()[4] = %+v; want zero", classes[4])
	}
}

func TestCompileAllKinds(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Default()
	p.Classes[0].Match = []Matcher{{
		Comm: "0123456789abcde", ProcessComm: "leader", PID: 10, TGID: 20, Cgroup: "/x", SchedExt: true,
	}}
	tab, err := p.Compile(root)
	if err != nil {
		t.Fatal(err)
	}
	r := tab.Rules[0]
	wantKinds := MatchCommExact | MatchPcommExact | MatchPID | MatchTGID | MatchCgroup | MatchSchedExt
	if r.Kinds != wantKinds {
		t.Errorf("kinds = %v; want %v", r.Kinds, wantKinds)
	}
	// A 15-byte comm leaves the NUL that ends every task comm; an exact
	// name compares all 16 bytes, that NUL included.
	if r.Comm != comm("0123456789abcde") || r.Comm[15] != 0 || r.CommMask != mask(CommLen) {
		t.Errorf("comm = %q, mask %x", r.Comm, r.CommMask)
	}
	if r.Pcomm != comm("leader") || r.PcommMask != mask(CommLen) || r.PID != 10 || r.TGID != 20 {
		t.Errorf("rule = %+v", r)
	}
	if got := MatchKind(0x7ff).String(); got != "comm_prefix|comm|process_comm_prefix|process_comm|pid|tgid|cgroup|sched_ext|device|device_process|0x400" {
		t.Errorf("MatchKind.String = %q", got)
	}
}

// The classifier reads only what some rule looks at: RuleKinds is the
// union of every rule's kinds, whichever class the rule belongs to.
func TestRuleKinds(t *testing.T) {
	p := Default("infer")
	p.Classes = append(p.Classes[:1], Class{Name: "batch", Slice: DefaultSlice, Weight: DefaultWeight,
		Match: []Matcher{{ProcessCommPrefix: "make"}, {TGID: 7}}}, p.Classes[1])
	tab, err := p.Compile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := MatchKind(tab.RuleKinds()), MatchCommPrefix|MatchPcommPrefix|MatchTGID; got != want {
		t.Errorf("RuleKinds = %v; want %v", got, want)
	}
	only, err := Default("infer").Compile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := MatchKind(only.RuleKinds()); got != MatchCommPrefix {
		t.Errorf("default policy: RuleKinds = %v; want comm_prefix alone (no leader comm, no cgroup read)", got)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestCompileCgroups resolves cgroups in a fake cgroup root made of plain
// directories: the id is the directory's inode number, as on cgroup2.
func TestCompileCgroups(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "inference.slice", "job-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Parse("cg.json", []byte(`{"classes": [
		{"name": "job", "match": [{"cgroup": "/inference.slice/job-1"}]},
		{"name": "inference", "match": [{"cgroup": "/inference.slice", "comm_prefix": "infer"}, {"cgroup": "/"}]},
		{"name": "normal"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := p.Compile(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{ClassID: 0, Kinds: MatchCgroup, CgroupID: inode(t, filepath.Join(root, "inference.slice", "job-1")), CgroupLevel: 2},
		{ClassID: 1, Kinds: MatchCgroup | MatchCommPrefix, Comm: comm("infer"), CommMask: mask(5),
			CgroupID: inode(t, filepath.Join(root, "inference.slice")), CgroupLevel: 1},
		{ClassID: 1, Kinds: MatchCgroup, CgroupID: inode(t, root), CgroupLevel: 0},
	}
	if diff := cmp.Diff(want, tab.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		cgroup, want string
		kind         error
	}{
		{"/nope", `cg.json: class "a" matcher 2: cgroup "/nope" does not exist under ` + root + `; create it first or fix the path`, ErrCgroupNotFound},
		{"/inference.slice/nope", `... cgroup "/inference.slice/nope" does not exist under ...`, ErrCgroupNotFound},
		{"/cgroup.procs", `cg.json: class "a" matcher 2: cgroup "/cgroup.procs": ` + filepath.Join(root, "cgroup.procs") + ` is not a directory, so not a cgroup`, nil},
		{"/cgroup.procs/x", `cg.json: class "a" matcher 2: cgroup "/cgroup.procs/x": stat ...`, nil},
	} {
		p := &Policy{Source: "cg.json", Classes: []Class{
			{Name: "a", Slice: DefaultSlice, Weight: 1, Match: []Matcher{{PID: 1}, {Cgroup: tt.cgroup}}},
			{Name: "b", Slice: DefaultSlice, Weight: 1},
		}}
		_, err := p.Compile(root)
		if err == nil {
			t.Errorf("%s: no error", tt.cgroup)
			continue
		}
		checkMessage(t, err, tt.want)
		if !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: error does not match ErrInvalidPolicy", tt.cgroup)
		}
		if tt.kind != nil && !errors.Is(err, tt.kind) {
			t.Errorf("%s: error does not match %v", tt.cgroup, tt.kind)
		}
		if tt.kind != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: error hides its cause", tt.cgroup)
		}
	}
}

func TestCompileInvalid(t *testing.T) {
	p := Default()
	p.Classes[1].Match = []Matcher{{PID: 1}}
	_, err := p.Compile(t.TempDir())
	if !errors.Is(err, ErrNoCatchAll) || !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("got %v; want ErrNoCatchAll", err)
	}
}

func TestCgroup2Mount(t *testing.T) {
	const v1 = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	for _, tt := range []struct {
		name, mountinfo, want string
	}{
		{"unified", "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup"},
		{"hybrid", "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" + v1 +
			"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified"},
		{"prefers the default", "50 1 0:40 / /mnt/cg rw - cgroup2 none rw\n60 1 0:40 / /sys/fs/cgroup rw - cgroup2 none rw\n", "/sys/fs/cgroup"},
		{"escaped", "50 1 0:40 / /mnt/my\\040cgroups rw - cgroup2 none rw\n", "/mnt/my cgroups"},
		{"none", v1, ""},
	} {
		got, err := cgroup2Mount([]byte(tt.mountinfo))
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

// TestCompileFindsCgroupRoot resolves "/" against this machine's cgroup2
// mount when no root is given.
func TestCompileFindsCgroupRoot(t *testing.T) {
	root, err := CgroupRoot()
	if err != nil {
		t.Skipf("no cgroup2 mount here: %v", err)
	}
	p := Default()
	p.Classes[0].Match = []Matcher{{Cgroup: "/"}}
	tab, err := p.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tab.Rules[0].CgroupID, inode(t, root); got != want {
		t.Errorf("cgroup id of / = %d; want %d, the inode of %s", got, want, root)
	}
}
