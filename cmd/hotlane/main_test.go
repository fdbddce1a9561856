package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/metrics"
	"github.com/hotlane/hotlane/probe/ioctl"
	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/vm"
)

// hotlaneBinary builds the CLI as users run it.
func hotlaneBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hotlane")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runCLI runs hotlane and returns stdout, stderr and the exit code.
func runCLI(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	return runCLIEnv(t, bin, nil, args...)
}

// runCLIEnv is runCLI with NAME=VALUE settings added to the environment.
func runCLIEnv(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &exitErr):
		return stdout.String(), stderr.String(), exitErr.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
		return "", "", -1
	}
}

func writePolicy(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantOneErrorLine runs hotlane with args and fails unless it exits 2
// with one line on stderr containing want.
//
// It runs on a cold cache, as on a fresh machine: HOTLANE_CACHE is a new
// empty directory, and must still be empty afterwards. A check that ran
// only after fetching a kernel would leave apt state or a kernel there,
// and its progress lines would make stderr more than one line; on a warm
// cache fetching prints nothing, which once hid such a late check.
//
// As root it also checks that nothing stays attached: every BPF program a
// failed run left alive (attached, pinned, or held by a link) would still
// have its ID after the process is gone.
func wantOneErrorLine(t *testing.T, bin string, args []string, want string) {
	t.Helper()
	wantOneErrorLineEnv(t, bin, nil, args, want)
}

// wantOneErrorLineEnv is wantOneErrorLine with env added to the
// environment.
func wantOneErrorLineEnv(t *testing.T, bin string, env, args []string, want string) {
	t.Helper()
	cache := t.TempDir()
	before := bpfPrograms(t)
	_, stderr, code := runCLIEnv(t, bin, append([]string{"HOTLANE_CACHE=" + cache}, env...), args...)
	if left := newPrograms(t, before); len(left) > 0 {
		t.Errorf("hotlane %v: BPF programs %v still loaded after it failed", args, left)
	}
	if entries, err := os.ReadDir(cache); err != nil || len(entries) > 0 {
		t.Errorf("hotlane %v: the empty cache holds %v afterwards (%v): it fetched something before failing", args, entries, err)
	}
	if code != exitError {
		t.Errorf("hotlane %v: exit %d, want %d", args, code, exitError)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("hotlane %v: stderr %q, want one line containing %q", args, stderr, want)
	}
}

// bpfPrograms lists the IDs of the BPF programs loaded in the kernel;
// nil when not root (the IDs cannot be read).
func bpfPrograms(t *testing.T) map[ebpf.ProgramID]bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	ids := map[ebpf.ProgramID]bool{}
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return ids
		}
		if err != nil {
			t.Fatalf("list BPF programs: %v", err)
		}
		ids[next], id = true, next
	}
}

// newPrograms waits up to two seconds (programs are freed after an RCU
// grace period) for the programs not in before to go away, and returns
// those that stay.
func newPrograms(t *testing.T, before map[ebpf.ProgramID]bool) []ebpf.ProgramID {
	t.Helper()
	if before == nil {
		return nil
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		var left []ebpf.ProgramID
		for id := range bpfPrograms(t) {
			if !before[id] {
				left = append(left, id)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBadInputGivesOneClearLine(t *testing.T) {
	bin := hotlaneBinary(t)
	const catchAll = `{"name": "normal"}`
	for _, tc := range []struct {
		args []string
		want string // in the one line on stderr
	}{
		{[]string{"vm", "--kernel", "/nonexistent", "--", "doctor"}, "/nonexistent does not exist"},
		{[]string{"vm", "--kernel", "bogus-suite", "--", "doctor"}, `unknown Debian suite "bogus-suite"`},
		{[]string{"doctor", "--require", "bogus"}, "bogus"},
		{[]string{"no-such-command"}, `unknown command "no-such-command"`},
		{[]string{"run", "--policy", "/nonexistent.json"}, "/nonexistent.json"},
		{[]string{"run", "--policy", writePolicy(t, "{\n  \"classes\": [\n    {\"name\": \"x\",}\n  ]\n}")}, "policy.json:3:"},
		{[]string{"run", "--policy", writePolicy(t, `{"classes": [{"name": "i", "match": [{"comm_prefx": "a"}]}, `+catchAll+`]}`)}, `unknown field "comm_prefx"`},
		{[]string{"run", "--policy", writePolicy(t, `{"classes": [{"name": "i", "match": [{"comm_prefix": "a"}]}]}`)}, "catch-all"},
		{[]string{"run", "--policy", writePolicy(t, `{"classes": [{"name": "i", "slice": "1s", "match": [{"comm_prefix": "a"}]}, `+catchAll+`]}`)}, "slice"},
		{[]string{"run", "--policy", writePolicy(t, `{"classes": [{"name": "i", "match": [{"cgroup": "/no-such.slice"}]}, `+catchAll+`]}`)}, `cgroup "/no-such.slice" does not exist`},
		{[]string{"run", "--check-policy", writePolicy(t, `{"classes": []}`)}, "policy.json"},
		{[]string{"run", "--policy", writePolicy(t, `{"classes": [`+catchAll+`]}`), "--inference-comm", "x"}, "--inference-comm applies to the built-in policy"},
		{[]string{"verify", "--bound", "inference:p99<=abc"}, `"abc" is not a duration`},
		{[]string{"verify", "--bound", "batch:p99<=1ms"}, `unknown class "batch"`},
		{[]string{"verify", "--duration", "-1s"}, "below the minimum 0s"},
		{[]string{"bench", "--duration", "0s"}, "below the minimum 100ms"},
		// The one-letter spellings parse as their long flags do.
		{[]string{"verify", "-d", "-1s"}, "below the minimum 0s"},
		{[]string{"probe", "ioctl", "-p", "999999999"}, "out of range 0..4194304"},
		{[]string{"verify", "--pid", "4000000"}, "no such process"},
		// Values out of range fail while parsing, before anything runs.
		{[]string{"verify", "--pid", "999999999"}, "out of range 0..4194304"},
		{[]string{"verify", "--top", "-1"}, "out of range"},
		{[]string{"run", "--stats-interval", "-1s"}, "below the minimum 100ms"},
		{[]string{"run", "--timeout", "1h"}, "out of range: use 100ms to 30s"},
		{[]string{"run", "--starvation", "100us"}, "out of range: use 1ms"},
		{[]string{"bench", "--repeats", "0"}, "out of range 1..100"},
		{[]string{"bench", "--hogs", "-1"}, "out of range 0..4096"},
		{[]string{"bench", "--compute", "-1ms"}, "below the minimum"},
		{[]string{"bench", "hooks", "--hooks", "fentry,kprobes"}, `--hooks: unknown hook kind "kprobes"`},
		{[]string{"bench", "hooks", "--calls", "10"}, "out of range 100..100000000"},
		{[]string{"workload", "--threads", "0"}, "out of range 1..1024"},
		{[]string{"workload", "--period", "0s"}, "below the minimum 100µs"},
		{[]string{"workload", "--hogs", "4096", "--threads", "1024"}, "5120 threads and processes in all; at most 4096"},
		{[]string{"probe", "ioctl", "--top", "-5"}, "out of range"},
		{[]string{"probe", "dma", "--interval", "-1s"}, "below the minimum 100ms"},
		{[]string{"probe", "xdp", "--iface", "lo", "--mode", "bogus"}, `unknown XDP mode "bogus"`},
		{[]string{"vm", "--cpus", "0", "--", "doctor"}, "out of range 1..256"},
		{[]string{"vm", "--topology", "sockets=3,cores=2,nodes=2", "--", "doctor"}, "would straddle sockets"},
		{[]string{"vm", "--topology", "sockets=2,cores=8", "--cpus", "4", "--", "doctor"}, "not the 4 asked for"},
		{[]string{"vm", "--topology", "sockets=2,cores=4,llcs=4", "--", "bench"}, `unknown field "llcs"`},
		{[]string{"vm", "--judges", "--topology", "sockets=0", "--", "bench", "--workload", "judges"}, "sockets=0 is not a whole number above 0"},
		// A judge the workload runs must be there before anything starts.
		{[]string{"bench", "--workload", "judges", "--perf", "/nonexistent/perf"}, "the workload runs perf, but /nonexistent/perf is not found: install linux-perf"},
		{[]string{"bench", "--workload", "judges", "--rt-app", "/nonexistent/rt-app"}, "the workload runs rt-app, but /nonexistent/rt-app is not found"},
		{[]string{"bench", "--workload", "request-server", "--duration", "50ms"}, "below the minimum 100ms"},
		{[]string{"vm", "--memory", "lots", "--", "doctor"}, `"lots" is not a memory size`},
		{[]string{"vm", "--timeout", "0s", "--", "doctor"}, "below the minimum 1s"},
		{[]string{"vm", "--retries", "-1", "--", "doctor"}, "out of range 0..10"},
	} {
		wantOneErrorLine(t, bin, tc.args, tc.want)
	}
}

// Files of the wrong kind or in missing places, for every flag that names
// one: one clear line, exit 2, before anything is attached or run, and no
// output file left behind.
func TestWrongFilesGiveOneClearLine(t *testing.T) {
	bin := hotlaneBinary(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file.txt")
	if err := os.WriteFile(file, []byte("not json, not a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "no", "such")
	stats := filepath.Join(dir, "stats.json")
	// Outputs from an earlier run, which a run that fails must leave as
	// they were, and links to a file of root's, which must not be
	// written through.
	earlier := map[string]string{}
	existing := func(name string) string {
		p := filepath.Join(dir, name)
		earlier[p] = "PRECIOUS " + name
		if err := os.WriteFile(p, []byte(earlier[p]), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(victim, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	worldWritable := filepath.Join(dir, "shared-cache")
	if err := os.Mkdir(worldWritable, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(worldWritable, 0o777); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := busy.Addr().String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		// Each command stops after its outputs were checked: the files
		// of an earlier run stay as they were (see below).
		{[]string{"verify", "--json", existing("verify.json"), "--listen", inUse, "-d", "1s"}, "address already in use"},
		{[]string{"verify", "--json", existing("verify2.json"), "--junit", "-"}, "--junit needs a file name"},
		{[]string{"verify", "--junit", existing("verify.xml"), "--listen", inUse, "-d", "1s"}, "address already in use"},
		{[]string{"probe", "ioctl", "--json", existing("ioctl.json"), "--listen", inUse, "--duration", "1s"}, "address already in use"},
		{[]string{"probe", "dma", "--json", existing("dma.json"), "--listen", inUse, "--duration", "1s"}, "address already in use"},
		{[]string{"probe", "xdp", "--iface", "lo", "--json", existing("xdp.json"), "--listen", inUse, "--duration", "1s"}, "address already in use"},
		{[]string{"run", "--stats-json", existing("stats.jsonl"), "--timeout", "1h"}, "out of range"},
		// A link is refused, whatever it points to.
		{[]string{"verify", "--json", link("verify-link.json"), "-d", "1s"}, "is a symbolic link"},
		{[]string{"verify", "--junit", link("verify-link.xml"), "-d", "1s"}, "is a symbolic link"},
		{[]string{"probe", "ioctl", "--json", link("ioctl-link.json"), "--duration", "1s"}, "is a symbolic link"},
		{[]string{"probe", "dma", "--json", link("dma-link.json"), "--duration", "1s"}, "is a symbolic link"},
		{[]string{"probe", "xdp", "--iface", "lo", "--json", link("xdp-link.json"), "--duration", "1s"}, "is a symbolic link"},
		{[]string{"bench", "hooks", "--json", link("hooks-link.json")}, "is a symbolic link"},
		{[]string{"run", "--stats-json", link("stats-link.jsonl")}, "is a symbolic link"},
		{[]string{"run", "--stats-json", "/dev/null"}, "is not a regular file"},
		{[]string{"run", "--policy", dir}, "is a directory"},
		{[]string{"run", "--policy", bin}, "1 MiB cap on policy files"},
		{[]string{"run", "--policy", file}, "invalid JSON"},
		{[]string{"run", "--check-policy", missing}, "no such file"},
		{[]string{"run", "--stats-json", dir}, "is a directory"},
		{[]string{"verify", "--policy", bin}, "1 MiB cap on policy files"},
		{[]string{"verify", "--json", missing, "--duration", "1s"}, "no such file"},
		{[]string{"probe", "ioctl", "--json", dir, "--duration", "1s"}, "is a directory"},
		{[]string{"probe", "dma", "--json", missing, "--duration", "1s"}, "no such file"},
		{[]string{"probe", "xdp", "--iface", "lo", "--policy", dir}, "is a directory"},
		{[]string{"probe", "xdp", "--iface", "lo", "--policy", file}, "invalid JSON"},
		{[]string{"bench", "--workload", bin}, "1 MiB cap on workload files"},
		{[]string{"bench", "--workload", missing}, "no such file"},
		{[]string{"bench", "--out", file}, "--out " + file + " is a file, not a directory"},
		{[]string{"bench", "--out", filepath.Join(file, "sub")}, file + " is a file, not a directory"},
		// A bad flag after --out must not leave the directory made.
		{[]string{"bench", "--out", missing, "--workload", missing}, "no such file"},
		{[]string{"bench", "--out", missing, "--baseline", "hotlane", "--schedulers", "eevdf"}, "--baseline hotlane is not among the variants"},
		{[]string{"run", "--stats-json", missing}, "no such file"},
		// The file is made before the scheduler's own checks, which
		// then fail (--timeout); it must not be left behind.
		{[]string{"run", "--stats-json", stats, "--timeout", "1h"}, "out of range"},
		{[]string{"workload", "--file", dir}, "is a directory"},
		{[]string{"workload", "--file", file}, "invalid JSON"},
		// vm: every flag, file and directory before the kernel is fetched.
		{[]string{"vm", "--kernel", file, "--", "doctor"}, "not an x86 bzImage"},
		{[]string{"vm", "--kernel", dir, "--", "doctor"}, "not a regular file"},
		{[]string{"vm", "--kernel", "/nonexistent", "--", "doctor"}, "/nonexistent does not exist"},
		{[]string{"vm", "--kernel", "sid/Not_A_Package", "--", "doctor"}, "not a Debian package name"},
		{[]string{"vm", "--results", file, "--", "doctor"}, "--results " + file + " is a file, not a directory"},
		{[]string{"vm", "--results", filepath.Join(file, "sub"), "--", "doctor"}, file + " is a file, not a directory"},
		{[]string{"vm", "--results", missing, "--add", missing, "--", "doctor"}, "cannot add " + missing + " to the guest: no such file"},
		{[]string{"vm", "--add", missing + ":/m", "--", "doctor"}, "cannot add " + missing + " to the guest as /m: no such file"},
		{[]string{"vm", "--add", dir, "--", "doctor"}, "not a regular file"},
		{[]string{"vm", "--add", file + ":", "--", "doctor"}, "empty guest path"},
		// Paths the runner fills itself are not replaced.
		{[]string{"vm", "--add", file + ":/init", "--", "doctor"}, "cannot add " + file + " to the guest as /init: the runner puts its own file there"},
		{[]string{"vm", "--add", file + ":/hotlane/guest.json", "--", "doctor"}, "the runner puts its own file there"},
		{[]string{"vm", "--add", file + ":/bin", "--", "doctor"}, "the runner puts its own file there"},
		{[]string{"vm", "--scx", "scx_qmap", "--add", file + ":/bin/scx_qmap", "--", "doctor"}, "--scx scx_qmap builds it"},
		{[]string{"vm", "--cache", worldWritable, "--", "doctor"}, "anyone may write to " + worldWritable},
		{[]string{"vm", "--cache", file, "--", "doctor"}, "--cache " + file + " is a file, not a directory"},
		{[]string{"vm"}, "no command given"},
		{[]string{"vm", "--scx-simple"}, "no command given"},
		{[]string{"vm", "--", "doctr"}, `"doctr" is not a hotlane command`},
		{[]string{"vm", "--", "/sched.test"}, "/sched.test is not in the guest"},
		{[]string{"vm", "--add", file + ":/f", "--", "/sched.test"}, "/sched.test is not in the guest"},
		{[]string{"vm", "--env", "NOEQ", "--", "doctor"}, `"NOEQ" is not NAME=VALUE`},
		{[]string{"vm", "--scx", "scx_bogus", "--", "doctor"}, `"scx_bogus" is not one of`},
		{[]string{"vm", "--print-vmlinux", "--", "doctor"}, "leave out the command"},
	} {
		wantOneErrorLine(t, bin, tc.args, tc.want)
	}
	for _, p := range []string{filepath.Join(dir, "no"), stats} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a failed run left %s behind", p)
		}
	}
	for p, want := range earlier {
		if got, err := os.ReadFile(p); err != nil || string(got) != want {
			t.Errorf("a failed run changed %s: %q (%v), want %q", p, got, err, want)
		}
	}
	if got, err := os.ReadFile(victim); err != nil || string(got) != "SECRET" {
		t.Errorf("a link's target was written through: %q (%v)", got, err)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, ".*hotlane-tmp-*")); len(entries) > 0 {
		t.Errorf("failed runs left temporary files %v", entries)
	}
}

// The programs `hotlane vm` needs are looked for before the kernel is
// fetched, too: on a fresh machine they are the likeliest thing missing.
func TestVMChecksProgramsBeforeFetching(t *testing.T) {
	bin := hotlaneBinary(t)
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("needs qemu-system-x86_64 on the host")
	}
	onlyQemu := t.TempDir()
	if err := os.Symlink(qemu, filepath.Join(onlyQemu, "qemu-system-x86_64")); err != nil {
		t.Fatal(err)
	}
	wantOneErrorLineEnv(t, bin, []string{"PATH=" + t.TempDir()}, []string{"vm", "--", "doctor"}, "qemu-system-x86_64 not found")
	// Nothing is cached, so scx_simple would be built: clang is needed.
	wantOneErrorLineEnv(t, bin, []string{"PATH=" + onlyQemu}, []string{"vm", "--scx-simple", "--", "doctor"}, "apt-get install clang")
}

// A judge missing on the host is one line from 'hotlane vm --judges'
// before anything is fetched or booted: which program, which package.
func TestVMJudgesMissingGiveOneLine(t *testing.T) {
	bin := hotlaneBinary(t)
	empty := t.TempDir()
	wantOneErrorLineEnv(t, bin, []string{"PATH=" + empty}, []string{"vm", "--judges", "--", "bench", "--workload", "judges"},
		"--judges: judge not installed: perf not found in $PATH: install linux-perf")
	judges, err := vm.JudgePrograms(exec.LookPath)
	if err != nil {
		t.Skipf("the second case needs the judges on the host (scripts/deps.sh installs them): %v", err)
	}
	onlyPerf := t.TempDir() // the real perf, not Debian's wrapper script
	if err := os.Symlink(judges["/usr/bin/perf"], filepath.Join(onlyPerf, "perf")); err != nil {
		t.Fatal(err)
	}
	wantOneErrorLineEnv(t, bin, []string{"PATH=" + onlyPerf}, []string{"vm", "--judges", "--", "doctor"},
		"--judges: judge not installed: sysbench not found in $PATH: install sysbench")
}

// A workload file's request server runs from 'hotlane workload' and says
// what it measured: requests served, wake-up and request latency.
func TestWorkloadFileRequestServer(t *testing.T) {
	bin := hotlaneBinary(t)
	file := filepath.Join(t.TempDir(), "rs.json")
	if err := os.WriteFile(file, []byte(`{"request_server": [{"rate_hz": 200, "workers": 1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, bin, "workload", "--file", file, "--duration", "1s")
	m := regexp.MustCompile(`request server rpc: (\d+) served \(\d+/s\), \d+ unfinished; wake-up p50 \S+ p99 \S+ max \S+; request p50`).FindStringSubmatch(stdout)
	if code != 0 || m == nil || m[1] == "0" {
		t.Errorf("hotlane workload with a request server: exit %d, stdout %q, stderr %q; want requests served", code, stdout, stderr)
	}
	if strings.Contains(stdout, "periodic task") {
		t.Errorf("a workload without a periodic task printed its table:\n%s", stdout)
	}
}

// The development hosts run a kernel without sched_ext: doctor says so,
// with advice, and still exits 0; --require turns it into a failure.
func TestDoctorOnHostWithoutSchedExt(t *testing.T) {
	if os.Getenv("HOTLANE_IN_VM") == "1" {
		t.Skip("this test is about the host kernel")
	}
	if _, err := os.Stat("/sys/kernel/sched_ext"); err == nil {
		t.Skip("this host kernel has sched_ext")
	}
	bin := hotlaneBinary(t)
	stdout, _, code := runCLI(t, bin, "doctor")
	if code != exitOK {
		t.Errorf("doctor: exit %d, want 0", code)
	}
	if !strings.Contains(stdout, "lacks CONFIG_SCHED_CLASS_EXT: run `hotlane vm`") {
		t.Errorf("doctor output lacks the sched_ext advice:\n%s", stdout)
	}
	if _, _, code := runCLI(t, bin, "doctor", "--require", "sched_ext"); code != exitFail {
		t.Errorf("doctor --require sched_ext: exit %d, want %d", code, exitFail)
	}
	_, stderr, code := runCLI(t, bin, "run")
	if code != exitError || !strings.Contains(stderr, "lacks CONFIG_SCHED_CLASS_EXT: run hotlane inside `hotlane vm`") {
		t.Errorf("run on a kernel without sched_ext: exit %d, stderr %q", code, stderr)
	}
}

// Without privileges every command that loads BPF says which capabilities
// it needs, in one line, before loading anything. (`run` is covered in the
// VM: on this host it first finds no sched_ext.)
func TestCommandsWithoutPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to an unprivileged user")
	}
	bin := hotlaneBinary(t)
	// t.TempDir and its parent are private to root.
	os.Chmod(filepath.Dir(bin), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(bin)), 0o755)
	// bench checks that it can write its report before the privileges.
	out := t.TempDir()
	os.Chmod(out, 0o777)
	for _, args := range [][]string{
		{"verify", "--duration", "1s"},
		{"bench", "--duration", "1s", "--out", out},
		{"bench", "hooks", "--calls", "1000"},
		{"probe", "dma", "--duration", "1s"},
		{"probe", "xdp", "--iface", "lo", "--duration", "1s"},
		{"probe", "ioctl", "--duration", "1s"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != exitError {
			t.Errorf("%v as nobody: %v, want exit %d\n%s", args, err, exitError, out)
			continue
		}
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "CAP_") {
			t.Errorf("%v as nobody: %q, want one line naming the capabilities", args, out)
		}
	}
}

// A wrong flag gets one line that says what was wrong and where to look,
// not the whole usage, for every command.
func TestWrongFlagsGiveOneLine(t *testing.T) {
	bin := hotlaneBinary(t)
	for _, args := range [][]string{
		{"doctor", "--bogus"}, {"run", "--bogus"}, {"verify", "--bogus"}, {"bench", "--bogus"},
		{"workload", "--bogus"}, {"vm", "--bogus"}, {"probe", "dma", "--bogus"}, {"probe", "xdp", "--bogus"}, {"probe", "ioctl", "--bogus"},
		{"verify", "--duration", "soon"}, {"run", "--timeout", "x"}, {"bench", "--repeats", "many"},
	} {
		_, stderr, code := runCLI(t, bin, args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != exitError || len(lines) != 1 || !strings.Contains(lines[0], "-h' for the flags") {
			t.Errorf("hotlane %v: exit %d, stderr %q; want exit 2 and one line", args, code, stderr)
		}
	}
	// -h still prints the whole usage, and succeeds.
	if stdout, _, code := runCLI(t, bin, "verify", "-h"); code != exitOK || !strings.Contains(stdout, "Usage: hotlane verify") || !strings.Contains(stdout, "\n  --bound string\n") ||
		!strings.Contains(stdout, "\n  -d, --duration duration\n") || strings.Contains(stdout, "\n  -d duration") {
		t.Errorf("verify -h: exit %d, %q; want the usage on standard output, flags written --name, -d listed once with --duration", code, stdout)
	}
}

// --check-policy accepts the examples and says, a line per class, what
// the scheduler will do with it: a high-priority class that does not
// mention preempt preempts.
func TestCheckPolicyAcceptsTheExamples(t *testing.T) {
	bin := hotlaneBinary(t)
	for file, want := range map[string]string{
		"default.json": `default.json: ok, 2 classes:
  inference: high priority, preempts lower classes, 2 ms slice, matched by: comm prefix "infer"
  normal: fair queue, weight 100, 5 ms slice, matched by: every task no other class takes
`,
		"tiers.json": `tiers.json: ok, 4 classes:
  realtime: high priority, preempts lower classes, 500 µs slice, matched by: comm "infer-rt" or tgid 4242 (process)
  inference: high priority, preempts lower classes, 2 ms slice, matched by: comm prefix "infer" and process comm prefix "python" or process comm prefix "triton"
  batch: fair queue, weight 20, 20 ms slice, matched by: comm prefix "make" or comm prefix "cc1"
  normal: fair queue, weight 100, 5 ms slice, matched by: every task no other class takes
`,
	} {
		path := "../../policy/testdata/" + file
		stdout, stderr, code := runCLI(t, bin, "run", "--check-policy", path)
		if code != exitOK || stdout != "../../policy/testdata/"+want {
			t.Errorf("--check-policy %s: exit %d, stderr %q, stdout:\n%s\nwant:\n../../policy/testdata/%s", file, code, stderr, stdout, want)
		}
		if file == "tiers.json" {
			readme, err := os.ReadFile("../../README.md")
			if err != nil {
				t.Fatal(err)
			}
			shown := "$ hotlane run --check-policy policy/testdata/tiers.json\npolicy/testdata/" + want
			if !strings.Contains(string(readme), shown) {
				t.Errorf("README.md does not show --check-policy's output as it is:\n%s", shown)
			}
		}
	}
}

// A bound nothing was measured against is a mistake in the policy or the
// filters, not a latency that failed: exit 2 with what to check. A bound
// without CLASS: says what it checks: the selected tasks when verify was
// given a selection, else the policy's first class.
func TestVerifyWithoutSamplesIsAnError(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	bin := hotlaneBinary(t)
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--comm", "no-such-thread"}, []string{
			`the bound's clauses without CLASS: check the selected tasks (comm prefix "no-such-thread"), whatever their class`,
			`none of the selected tasks (comm prefix "no-such-thread") waited for a CPU in 1s`,
			"--pid, --tid, --comm",
		}},
		{[]string{"--inference-comm", "no-such-thread"}, []string{
			"the bound's clauses without CLASS: check the tasks of class inference (the policy's first)",
			"no task of class inference waited for a CPU in 1s",
			"--inference-comm",
		}},
	} {
		args := append(append([]string{"verify"}, tt.args...), "--bound", "p99<=1ms", "--duration", "1s", "--top", "0")
		stdout, stderr, code := runCLI(t, bin, args...)
		if code != exitError {
			t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, exitError, stdout, stderr)
		}
		for _, want := range tt.want {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
			}
		}
		// The report is still written: it shows what was (not) seen.
		if !strings.Contains(stdout, "no samples") {
			t.Errorf("%v: the report does not say there were no samples:\n%s", args, stdout)
		}
	}
}

// verify --pid P with a bound that names no class bounds P's tasks,
// whatever class the policy gives them (#42): here the built-in policy
// puts them in "normal", and the bound still has their waits to check.
// One no wait can meet fails, a generous one passes, and the text and
// JSON reports say the bound covered the selected tasks.
func TestVerifyBoundCoversTheSelectedTasks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	bin := hotlaneBinary(t)
	// A process that sleeps 1 ms at a time, named so that no class but
	// the catch-all takes it.
	child := exec.Command(bin, "workload", "--hogs", "0", "--period", "1ms", "--compute", "10us", "--comm", "napper", "--duration", "5m")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Kill()
		child.Wait()
	})
	pid := child.Process.Pid
	covers := fmt.Sprintf("the selected tasks (pid %d), whatever their class", pid)
	for _, tt := range []struct {
		bound    string
		code     int
		verdict  string
		extra    []string
		wantPass bool
	}{
		{"max<=1ns", exitFail, "selected tasks FAIL max<=1ns: max is ", []string{"--violation-lines", "1"}, false},
		{"max<=10s", exitOK, "selected tasks PASS max<=10s: max is ", []string{"-q"}, true},
	} {
		jsonPath := filepath.Join(t.TempDir(), "verify.json")
		args := append([]string{"verify", "--pid", strconv.Itoa(pid), "--bound", tt.bound, "--duration", "2s", "--top", "20", "--no-histograms", "--json", jsonPath}, tt.extra...)
		stdout, stderr, code := runCLI(t, bin, args...)
		if code != tt.code {
			t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, tt.code, stdout, stderr)
		}
		if want := "bound covers: " + covers + "\n" + tt.verdict; !strings.Contains(stdout, want) {
			t.Errorf("%v: the text report lacks %q:\n%s", args, want, stdout)
		}
		if !tt.wantPass && !strings.Contains(stderr, "the bound's clauses without CLASS: check "+covers) {
			t.Errorf("%v: stderr does not say what the bound checks:\n%s", args, stderr)
		}
		data, err := os.ReadFile(jsonPath)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Bounds []struct {
				Class    string `json:"class"`
				Selected bool   `json:"selected"`
				Covers   string `json:"covers"`
				Verdicts []struct {
					Pass     bool  `json:"pass"`
					Measured int64 `json:"measured_ns"`
				} `json:"verdicts"`
			} `json:"bounds"`
			Unmeasured []string `json:"unmeasured_classes"`
			Snapshot   struct {
				Tasks []struct {
					PID   uint32 `json:"pid"`
					TGID  uint32 `json:"tgid"`
					Comm  string `json:"comm"`
					Class string `json:"class"`
				} `json:"tasks"`
			} `json:"snapshot"`
		}
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Bounds) != 1 || !res.Bounds[0].Selected || res.Bounds[0].Class != "" || res.Bounds[0].Covers != covers ||
			len(res.Bounds[0].Verdicts) != 1 || res.Bounds[0].Verdicts[0].Pass != tt.wantPass || res.Bounds[0].Verdicts[0].Measured <= 0 {
			t.Errorf("%v: JSON bounds %+v, want one on the selected tasks covering %q, pass %v, with a measured max", args, res.Bounds, covers, tt.wantPass)
		}
		if len(res.Unmeasured) > 0 {
			t.Errorf("%v: unmeasured classes %v", args, res.Unmeasured)
		}
		// What was measured is the child's threads, the sleeper among
		// them, in the catch-all class: not the lane the old rule checked.
		napper := false
		for _, tk := range res.Snapshot.Tasks {
			if int(tk.TGID) != pid {
				t.Errorf("%v: task %d (%s) of process %d measured, want only process %d's", args, tk.PID, tk.Comm, tk.TGID, pid)
			}
			if tk.Comm == "napper" {
				napper = true
				if tk.Class != "normal" {
					t.Errorf("%v: the sleeper is in class %q, want normal", args, tk.Class)
				}
			}
		}
		if !napper {
			t.Errorf("%v: the sleeping thread is not among the measured tasks: %+v", args, res.Snapshot.Tasks)
		}
	}
}

// --json - puts the JSON alone on standard output, as a pipe into jq
// wants it, and the text report on standard error; no file named "-".
func TestVerifyJSONToStdout(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	bin := hotlaneBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "verify", "--json", "-", "--duration", "1s", "--top", "0")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("verify --json -: %v\nstderr:\n%s", err, stderr.String())
	}
	var report struct {
		Snapshot struct {
			Classes []json.RawMessage `json:"classes"`
		} `json:"snapshot"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("standard output is not one JSON document: %v\n%s", err, stdout.String())
	}
	if len(report.Snapshot.Classes) == 0 {
		t.Errorf("the JSON on standard output has no classes:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "run-queue latency over") {
		t.Errorf("the text report is not on standard error:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Error(`verify created a file named "-"`)
	}
	// -q as well: machine-only, the JSON and nothing else.
	stdoutQ, stderrQ, code := runCLI(t, bin, "verify", "--json", "-", "--duration", "1s", "--top", "0", "-q")
	if code != exitOK || !json.Valid([]byte(stdoutQ)) || stderrQ != "" {
		t.Errorf("verify --json - -q: exit %d, stderr %q, stdout valid JSON %v: want exit 0, the JSON alone", code, stderrQ, json.Valid([]byte(stdoutQ)))
	}
}

// A bound every wait breaks floods the violation stream: verify prints at
// most --violation-lines a second, says how many more each second had,
// and the printed and the not-printed add up to the streamed count.
// bench hooks --json - writes one JSON document with every hook kind on
// standard output (the refused ones with their reason), and the text on
// standard error.
func TestBenchHooksJSONToStdout(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches BPF programs: needs root")
	}
	cmd := exec.Command(hotlaneBinary(t), "bench", "hooks", "--calls", "2000", "--rounds", "2", "--own-duration", "200ms", "--json", "-")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench hooks --json -: %v\nstderr:\n%s", err, stderr.String())
	}
	var rep struct {
		Hooks []struct {
			Hook    string `json:"hook"`
			Refused string `json:"refused"`
			Counted uint64 `json:"calls_counted"`
		} `json:"hooks"`
		Programs []struct {
			Program string `json:"program"`
		} `json:"programs"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("standard output is not one JSON document: %v\n%s", err, stdout.String())
	}
	if len(rep.Hooks) != 9 || len(rep.Programs) == 0 {
		t.Errorf("JSON has %d hooks (want 9) and %d of hotlane's programs:\n%s", len(rep.Hooks), len(rep.Programs), stdout.String())
	}
	for _, h := range rep.Hooks {
		if (h.Refused == "") == (h.Counted == 0) {
			t.Errorf("%s: counted %d, refused %q: want one or the other", h.Hook, h.Counted, h.Refused)
		}
	}
	if !strings.Contains(stderr.String(), "BPF hook cost on") {
		t.Errorf("the text report is not on standard error:\n%s", stderr.String())
	}
}

func TestVerifyLimitsViolationLines(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	bin := hotlaneBinary(t)
	stdout, stderr, code := runCLI(t, bin, "verify", "--bound", "normal:max<=1ns", "--duration", "3s",
		"--violation-lines", "2", "--top", "0", "--no-histograms")
	if code != exitFail {
		t.Fatalf("exit %d, want %d (every wait breaks the bound)\nstderr:\n%s", code, exitFail, stderr)
	}
	var printed, held int
	for _, line := range strings.Split(stderr, "\n") {
		var n int
		switch {
		case strings.Contains(line, "more in that second not printed"):
			if _, err := fmt.Sscanf(line, "violation: %d more", &n); err != nil {
				t.Fatalf("summary line %q: %v", line, err)
			}
			held += n
		case strings.HasPrefix(line, "violation: "):
			printed++
		}
	}
	var streamed, notPrinted int
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "events: ") {
			i := strings.Index(line, "samples, ")
			fmt.Sscanf(line[i+len("samples, "):], "%d violations streamed (%d of them", &streamed, &notPrinted)
		}
	}
	t.Logf("streamed %d, printed %d, summarised %d", streamed, printed, held)
	if held == 0 || printed == 0 {
		t.Fatalf("no flood to limit: printed %d, summarised %d\n%s", printed, held, stderr)
	}
	// 3 s of violations, and those of the moments before the run's clock
	// starts, span at most 5 seconds of the violations' clock.
	if printed > 2*5 {
		t.Errorf("%d violation lines printed, want at most 2 a second:\n%s", printed, stderr)
	}
	if printed+held != streamed || held != notPrinted {
		t.Errorf("printed %d + summarised %d != streamed %d (report: %d not printed)", printed, held, streamed, notPrinted)
	}
}

// In CI, verify writes a JUnit file with one case per clause (the one no
// wait can meet failed, with its message) and, under GitHub Actions, one
// annotation per clause beside the text report; --junit - is refused.
func TestVerifyCIOutputs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	bin := hotlaneBinary(t)
	junit := filepath.Join(t.TempDir(), "verify.xml")
	// A process of this test's making waits now and then: sleep's
	// wake-ups give the class samples.
	sleeper := exec.Command("sh", "-c", "while :; do sleep 0.01; done")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	stdout, stderr, code := runCLIEnv(t, bin, []string{"GITHUB_ACTIONS=true"}, "verify", "--inference-comm", "sleep", "--comm", "sleep",
		"--bound", "inference:max<=1h,p50<1ns", "--duration", "2s", "--top", "0", "-q", "--junit", junit)
	if code != exitFail {
		t.Fatalf("exit %d, want %d (p50<1ns cannot hold)\nstdout:\n%s\nstderr:\n%s", code, exitFail, stdout, stderr)
	}
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &suites); err != nil {
		t.Fatalf("--junit wrote no XML: %v\n%s", err, data)
	}
	if suites.Tests != 2 || suites.Failures != 1 || len(suites.Suites) != 1 || len(suites.Suites[0].Cases) != 2 {
		t.Fatalf("JUnit %+v, want 2 cases, 1 failure\n%s", suites, data)
	}
	if c := suites.Suites[0].Cases[1]; c.Name != "p50<1ns" || c.Failure == nil || !strings.Contains(c.Failure.Message, "not below 1ns") {
		t.Errorf("second case %+v, want p50<1ns failed with the reason", c)
	}
	for _, want := range []string{"::notice title=hotlane verify%3A inference max<=1h0m0s::passed", "::error title=hotlane verify%3A inference p50<1ns::"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks the annotation %q:\n%s", want, stdout)
		}
	}
	_, stderr, code = runCLI(t, bin, "verify", "--junit", "-", "--duration", "1s")
	if code != exitError || !strings.Contains(stderr, "--junit needs a file name") {
		t.Errorf("--junit -: exit %d, stderr %q", code, stderr)
	}
}

// The systemd unit is one systemd accepts without a warning, and the
// command line it starts is one hotlane accepts.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (package systemd)")
	}
	unit, err := os.ReadFile("../../packaging/hotlane.service")
	if err != nil {
		t.Fatal(err)
	}
	bin := hotlaneBinary(t)
	const installed = "/usr/local/bin/hotlane"
	if !bytes.Contains(unit, []byte("ExecStart="+installed+" ")) {
		t.Fatalf("the unit does not start %s", installed)
	}
	local := filepath.Join(t.TempDir(), "hotlane.service")
	if err := os.WriteFile(local, bytes.ReplaceAll(unit, []byte(installed), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", local).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	var args []string
	for _, line := range strings.Split(string(unit), "\n") {
		if rest, ok := strings.CutPrefix(line, "ExecStart="+installed+" "); ok {
			args = strings.Fields(rest)
		}
	}
	_, stderr, code := runCLI(t, bin, append(args, "--check-policy", "/nonexistent/policy.json")...)
	if code != exitError || strings.Contains(stderr, "flag provided but not defined") || !strings.Contains(stderr, "/nonexistent/policy.json") {
		t.Errorf("hotlane %v: exit %d, stderr %q: want only the missing policy file refused", args, code, stderr)
	}
}

// The DaemonSet example's policy is one hotlane accepts, and so are the
// flags it starts verify with.
func TestDaemonSetExample(t *testing.T) {
	data, err := os.ReadFile("../../packaging/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "policy.json: |\n")
	block, _, _ = strings.Cut(block, "---")
	if !ok || strings.TrimSpace(block) == "" {
		t.Fatal("no policy.json in the ConfigMap")
	}
	policyFile := filepath.Join(t.TempDir(), "policy.json")
	os.WriteFile(policyFile, []byte(block), 0o644)
	bin := hotlaneBinary(t)
	if out, errOut, code := runCLI(t, bin, "run", "--check-policy", policyFile); code != exitOK {
		t.Errorf("the example policy is refused (exit %d): %s%s", code, out, errOut)
	}
	var args []string
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "args: "); ok {
			if err := json.Unmarshal([]byte(rest), &args); err != nil {
				t.Fatalf("args %s: %v", rest, err)
			}
		}
	}
	if len(args) < 2 || args[0] != "verify" {
		t.Fatalf("args %v, want verify and its flags", args)
	}
	// A privileged pod serves no plain HTTP to every network the node is
	// on: verify listens on a host, behind the authenticating proxy.
	if i := slices.Index(args, "--listen"); i < 0 || i+1 == len(args) || metrics.BindsEverywhere(args[i+1]) {
		t.Errorf("args %v: want --listen on a host (127.0.0.1), not every interface", args)
	}
	for _, kind := range []string{"kind: NetworkPolicy", "kube-rbac-proxy"} {
		if !strings.Contains(string(data), kind) {
			t.Errorf("the DaemonSet has no %s in front of the metrics", kind)
		}
	}
	for i, a := range args {
		if a == "/etc/hotlane/policy.json" {
			args[i] = policyFile
		}
	}
	// A duration verify refuses, put last, shows that every other flag
	// parsed.
	_, stderr, code := runCLI(t, bin, append(args, "--duration", "-1s")...)
	if code != exitError || !strings.Contains(stderr, "-1s is below the minimum 0s") {
		t.Errorf("hotlane %v: exit %d, stderr %q", args, code, stderr)
	}
}

// probe xdp takes --json FILE like every other command: "-" puts the JSON
// alone on standard output and the text report on standard error.
func TestProbeXDPJSONToStdout(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches XDP: needs root")
	}
	bin := hotlaneBinary(t)
	stdout, stderr, code := runCLI(t, bin, "probe", "xdp", "--iface", "lo", "--duration", "500ms", "--json", "-")
	if code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("standard output is not one JSON document: %v\n%s", err, stdout)
	}
	if !strings.Contains(stderr, "lo") || len(strings.TrimSpace(stderr)) == 0 {
		t.Errorf("the text report is not on standard error:\n%s", stderr)
	}
}

// Every command's JSON starts with the same fields (report.Header,
// docs/json.md): a collector reads host, kernel, start, duration and
// losses alike from any of them. run's stats lines are checked in the VM
// (sched), bench's report in workloads.
func TestJSONSharedFields(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches tracers and probes: needs root")
	}
	bin := hotlaneBinary(t)
	for _, c := range []struct {
		command string
		args    []string
	}{
		{"doctor", []string{"doctor", "--json"}},
		{"verify", []string{"verify", "--duration", "500ms", "--top", "0", "-q", "--json", "-"}},
		{"probe ioctl", []string{"probe", "ioctl", "--duration", "500ms", "-q", "--json", "-"}},
		{"probe dma", []string{"probe", "dma", "--duration", "500ms", "-q", "--json", "-"}},
		{"probe xdp", []string{"probe", "xdp", "--iface", "lo", "--duration", "500ms", "-q", "--json", "-"}},
		{"bench hooks", []string{"bench", "hooks", "--hooks", "tp_btf", "--calls", "1000", "--rounds", "1", "--own-duration", "100ms", "--json", "-"}},
	} {
		stdout, stderr, code := runCLI(t, bin, c.args...)
		if code != exitOK {
			t.Errorf("%s: exit %d\nstderr:\n%s", c.command, code, stderr)
			continue
		}
		if err := report.CheckHeader([]byte(stdout), c.command); err != nil {
			t.Errorf("%s: %v\n%s", c.command, err, stdout)
		}
	}
}

// --duration 0 means one thing on every command that measures until it is
// told to stop: run until SIGTERM (or Ctrl-C), then report what was
// measured and exit 0, as with a duration that ran out.
func TestDurationZeroRunsUntilSignal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches tracers and probes: needs root")
	}
	bin := hotlaneBinary(t)
	for _, args := range [][]string{
		{"verify", "--top", "0", "-q"},
		{"probe", "ioctl", "-q"},
		{"probe", "dma", "-q"},
		{"probe", "xdp", "--iface", "lo", "-q"},
	} {
		name := strings.Join(args[:len(args)-1], " ")
		stdout, stderr, code, err := signalledRun(bin, append(args, "--duration", "0", "--json", "-")...)
		if err != nil || code != exitOK {
			t.Errorf("%s --duration 0, then SIGTERM: exit %d, %v\n%s", name, code, err, stderr)
			continue
		}
		var h report.Header
		// How much of the pause before the signal was measured depends
		// on how long attaching took on a busy machine: only that some
		// was, and that it is not called an interruption.
		if err := json.Unmarshal([]byte(stdout), &h); err != nil || h.Elapsed <= 0 || h.Interrupted {
			t.Errorf("%s: after SIGTERM, elapsed %v, interrupted %v (%v), want what it ran, not interrupted:\n%s", name, h.Elapsed, h.Interrupted, err, stdout)
		}
	}
}

// The bash completion script completes commands, probes and each
// command's flags (read from its -h, one-letter spellings included), as
// bash itself runs it.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine")
	}
	bin := hotlaneBinary(t)
	script, stderr, code := runCLI(t, bin, "completion", "bash")
	if code != exitOK {
		t.Fatalf("completion bash: exit %d: %s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "hotlane.bash")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"pro"}, "probe"},
		{[]string{""}, "verify"},
		{[]string{"probe", "io"}, "ioctl"},
		{[]string{"bench", "ho"}, "hooks"},
		{[]string{"verify", "--du"}, "--duration"},
		{[]string{"probe", "ioctl", "--p"}, "--pid"},
		{[]string{"verify", "-"}, "-d"},
		{[]string{"probe", "xdp", "--if"}, "--iface"},
		{[]string{"bench", "hooks", "--ho"}, "--hooks"},
	} {
		words := append([]string{bin}, c.words...)
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = fmt.Sprintf("%q", w)
		}
		prog := fmt.Sprintf("source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _hotlane; printf '%%s\\n' \"${COMPREPLY[@]}\"",
			file, strings.Join(quoted, " "), len(words)-1)
		out, err := exec.Command(bash, "-c", prog).CombinedOutput()
		if err != nil {
			t.Errorf("%v: %v\n%s", c.words, err, out)
			continue
		}
		got := strings.Fields(string(out))
		if !slices.Contains(got, c.want) {
			t.Errorf("completing %v: %v; want %q among them", c.words, got, c.want)
		}
	}
	if _, _, code := runCLI(t, bin, "completion", "fish"); code != exitError {
		t.Errorf("completion fish: exit %d, want %d", code, exitError)
	}
}

// --interval prints each interval's waits per class as the run goes (to
// standard error when the JSON has standard output): the intervals'
// counts add up to no more than the whole run's.
func TestVerifyIntervals(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	stdout, stderr, code := runCLI(t, hotlaneBinary(t), "verify", "--interval", "500ms", "--duration", "2200ms", "--top", "0", "-q", "--json", "-")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var res struct {
		Snapshot struct {
			Classes []struct {
				Class string `json:"class"`
				Hist  struct {
					Count uint64 `json:"count"`
				} `json:"histogram"`
			} `json:"classes"`
		} `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d (\S+) +(?:(\d+) waits  p50 \S+ +p99 \S+ +max \S+|no waits)$`)
	sums, lines := map[string]uint64{}, 0
	for _, m := range line.FindAllStringSubmatch(stderr, -1) {
		lines++
		n, _ := strconv.ParseUint(m[2], 10, 64)
		sums[m[1]] += n
	}
	classes := len(res.Snapshot.Classes)
	if classes == 0 || lines < 4*classes || lines > 5*classes {
		t.Fatalf("%d interval lines for %d classes over 2.2s at 500ms, want 4 or 5 per class:\n%s", lines, classes, stderr)
	}
	for _, c := range res.Snapshot.Classes {
		if sums[c.Class] > c.Hist.Count {
			t.Errorf("class %s: intervals add up to %d waits, over the run's %d", c.Class, sums[c.Class], c.Hist.Count)
		}
	}
	if sums["normal"] == 0 {
		t.Errorf("no normal waits in any interval:\n%s", stderr)
	}
}

// Every probe serves its figures on --listen while it runs, labelled by
// device, command, interface and hook, with its loss counters, and still
// stops cleanly on SIGTERM. The ioctl and XDP probes are given load the
// test makes itself (failing TCGETS on /dev/null, UDP over lo) and must
// count it there; DMA traffic on a host cannot be made on purpose, so its
// probe is held to its info and loss counters.
func TestProbesServeMetrics(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches probes: needs root")
	}
	bin := hotlaneBinary(t)
	tcgets := ioctl.DecodeCommand(unix.TCGETS).String()
	for _, c := range []struct {
		probe string
		args  []string
		load  func() error
		want  string // a counter that must reach 50 through the load
	}{
		{"ioctl", []string{"--dev", "/dev/null"}, func() error {
			f, err := os.Open(os.DevNull)
			if err != nil {
				return err
			}
			defer f.Close()
			for range 50 {
				if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); !errors.Is(err, unix.ENOTTY) {
					return fmt.Errorf("TCGETS on /dev/null: %v, want ENOTTY", err)
				}
			}
			return nil
		}, fmt.Sprintf(`hotlane_ioctl_errors_total{command=%q,device="/dev/null"}`, tcgets)},
		{"xdp", []string{"--iface", "lo"}, func() error {
			// To itself: a closed port would answer with ICMP errors
			// that fail every other write.
			conn, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			defer conn.Close()
			for range 50 {
				if _, err := conn.WriteTo([]byte("hotlane"), conn.LocalAddr()); err != nil {
					return err
				}
			}
			return nil
		}, `hotlane_xdp_packets_total{class="ipv4/udp",interface="lo"}`},
		{"dma", nil, nil, ""},
	} {
		t.Run(c.probe, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"probe", c.probe, "--listen", "127.0.0.1:0"}, c.args...)...)
			stderr := &lineLog{done: make(chan struct{})}
			pipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			addr := make(chan string, 1)
			go stderr.read(pipe, regexp.MustCompile(`metrics on http://(\S+)/metrics`), addr)
			var at string
			select {
			case at = <-addr:
			case <-time.After(20 * time.Second):
				t.Fatalf("probe %s never said where it serves:\n%s", c.probe, stderr)
			}
			body := scrapeUntil(t, at, func(body string) bool { return strings.Contains(body, `hotlane_probe_info{hook="`) }, stderr)
			if !regexp.MustCompile(`(?m)^hotlane_probe_lost_total\{probe="` + c.probe + `",reason="[^"]+"\} 0$`).MatchString(body) {
				t.Errorf("no loss counters for probe %s:\n%s", c.probe, body)
			}
			if c.load != nil {
				if err := c.load(); err != nil {
					t.Fatal(err)
				}
				scrapeUntil(t, at, func(body string) bool { return metricValue(body, c.want) >= 50 }, stderr)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			<-stderr.done
			if err := cmd.Wait(); err != nil {
				t.Errorf("probe %s --listen, then SIGTERM: %v\n%s", c.probe, err, stderr)
			}
		})
	}
}

// lineLog collects a command's standard error while it runs, for failure
// messages, and hands on the first submatch of a pattern; done is closed
// at the end of the stream.
type lineLog struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func (l *lineLog) read(r io.Reader, pattern *regexp.Regexp, found chan<- string) {
	defer close(l.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		l.mu.Unlock()
		if m := pattern.FindStringSubmatch(sc.Text()); m != nil && found != nil {
			found <- m[1]
			found = nil
		}
	}
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// scrapeUntil fetches addr/metrics until ok holds for the body, for up to
// 20 s, and returns that body.
func scrapeUntil(t *testing.T, addr string, ok func(string) bool, stderr fmt.Stringer) string {
	t.Helper()
	var body string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if body = string(b); ok(body) {
			return body
		}
	}
	t.Fatalf("http://%s/metrics never showed what was wanted; last scrape:\n%s\nstderr:\n%s", addr, body, stderr)
	return ""
}

// metricValue is the value of the sample series (name{labels}) in a text
// exposition, or -1 when it is absent.
func metricValue(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			if f, err := strconv.ParseFloat(strings.Fields(v)[0], 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// An output of an earlier run survives a run killed with SIGKILL while it
// measures: it is replaced only by a complete file, never emptied first.
func TestKilledRunKeepsExistingOutput(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	bin := hotlaneBinary(t)
	dir := t.TempDir()
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte("PRECIOUS"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "verify", "--json", old, "--duration", "1m", "--top", "0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first progress line says the tracer is measuring.
	measuring := make(chan string, 1)
	log := &lineLog{done: make(chan struct{})}
	go log.read(stderr, regexp.MustCompile(`^(verify: .* samples)`), measuring)
	select {
	case <-measuring:
	case <-log.done:
		cmd.Wait()
		t.Fatalf("verify ended before measuring:\n%s", log)
	}
	cmd.Process.Kill()
	<-log.done
	cmd.Wait()
	if got, err := os.ReadFile(old); err != nil || string(got) != "PRECIOUS" {
		t.Errorf("after SIGKILL %s holds %q (%v), want it as it was", old, got, err)
	}
}

// Output files get their stated mode whatever the umask: 0600 for those
// that name the machine's tasks, 0644 for the others.
func TestOutputModesIgnoreUmask(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attaches the tracer: needs root")
	}
	bin := hotlaneBinary(t)
	dir := t.TempDir()
	jsonOut, junitOut := filepath.Join(dir, "verify.json"), filepath.Join(dir, "verify.xml")
	// The umask is the shell's; the paths are its arguments, not its code.
	cmd := exec.Command("sh", "-c", `umask 000; exec "$@"`, "sh",
		bin, "verify", "--duration", "1s", "--top", "0", "-q", "--json", jsonOut, "--junit", junitOut)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("verify under umask 000: %v\n%s", err, out)
	}
	for path, want := range map[string]os.FileMode{jsonOut: 0o600, junitOut: 0o644} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v under umask 000, want %v", filepath.Base(path), fi.Mode().Perm(), want)
		}
	}
}

// Being PID 1 does not make hotlane the VM guest's /init: run as PID 1 of
// a new PID namespace (as `unshare --pid --fork --mount`, or a container's
// entrypoint, does) it runs the command it was given.
func TestPID1RunsTheCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a new PID namespace and the tracer need root")
	}
	bin := hotlaneBinary(t)
	cmd := exec.Command(bin, "verify", "-d", "2s", "--top", "0", "-q", "--json", "-")
	// A mount namespace of its own, made private (Go does that for
	// Unshareflags), so that an init's mounts could not reach the host.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Unshareflags: syscall.CLONE_NEWNS}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if strings.Contains(stderr.String(), "hotlane-init") {
		t.Errorf("as PID 1 it acted as the guest's /init:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("verify as PID 1: %v\nstderr:\n%s", err, stderr.String())
	}
	var h report.Header
	if err := json.Unmarshal(stdout.Bytes(), &h); err != nil || h.Command != "verify" {
		t.Errorf("verify as PID 1 printed no report (%v):\n%s", err, stdout.String())
	}
}

// With neither HOME nor XDG_CACHE_HOME (systemd units, some CI runners),
// `hotlane vm` used a fixed directory in /tmp, which another user could
// make first and fill with links. Now a user without a home gets one line
// asking for a cache, and nothing is made in /tmp.
func TestVMWithoutHomeRefusesSharedCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs hotlane as the user nobody: needs root")
	}
	// A directory nobody can reach, for the binary and the kernel image.
	dir, err := os.MkdirTemp("", "hotlane-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hotlane")
	if err := os.Rename(hotlaneBinary(t), bin); err != nil {
		t.Fatal(err)
	}
	kernel := filepath.Join(dir, "vmlinuz")
	image := make([]byte, 0x300)
	copy(image[0x202:], "HdrS")
	if err := os.WriteFile(kernel, image, 0o644); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(os.TempDir(), "hotlane-cache")
	_, existed := os.Lstat(shared)

	cmd := exec.Command(bin, "vm", "--kernel", kernel, "--print-vmlinux")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != exitError {
		t.Errorf("as nobody without HOME: %v, want exit %d", err, exitError)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "set HOTLANE_CACHE") {
		t.Errorf("stderr %q, want one line asking for --cache or HOTLANE_CACHE", stderr.String())
	}
	if existed != nil {
		if _, err := os.Lstat(shared); err == nil {
			os.RemoveAll(shared)
			t.Errorf("it made %s", shared)
		}
	}
}
