package vm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotlane/hotlane/internal/errtest"
)

func TestRequestValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil || os.Chmod(shared, 0o777) != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	doctor := []string{"doctor"}
	for _, tt := range []struct {
		name string
		req  Request
		want string // in the error; "" for none
	}{
		{"a command", Request{CacheDir: cache, Args: doctor}, ""},
		{"no command", Request{CacheDir: cache}, "no command given; e.g. 'hotlane vm -- doctor'"},
		{"an unknown example scheduler", Request{CacheDir: cache, Scx: []string{"scx_bogus"}, Args: doctor}, `--scx "scx_bogus" is not one of`},
		{"a kernel that is not there", Request{Kernel: "/nonexistent", CacheDir: cache, Args: doctor}, "/nonexistent does not exist"},
		{"a cache that is a file", Request{CacheDir: file, Args: doctor}, "--cache " + file + " is a file, not a directory"},
		{"a cache anyone may write to", Request{CacheDir: shared, Args: doctor}, "anyone may write to " + shared},
		{"results that are a file", Request{CacheDir: cache, ResultsDir: file, Args: doctor}, "--results " + file + " is a file, not a directory"},
		{"the vmlinux path alone", Request{CacheDir: cache, PrintVmlinux: true}, ""},
		{"the vmlinux path and a command", Request{CacheDir: cache, PrintVmlinux: true, Args: doctor},
			`--print-vmlinux only prints the path and boots nothing; leave out the command "doctor"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.req.Validate(); !errtest.Says(err, tt.want) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := os.Stat(cache); err == nil {
		t.Error("Validate created the cache directory")
	}
}

func TestRequestCPUs(t *testing.T) {
	topo := &Topology{Sockets: 2, Cores: 4, Threads: 1, Nodes: 1}
	for _, tt := range []struct {
		name string
		req  Request
		want int
	}{
		{"the count given", Request{CPUs: 4}, 4},
		{"the topology's", Request{CPUs: 2, Topology: topo}, 8},
		{"a count given beside a topology stays, to be checked", Request{CPUs: 4, CPUsGiven: true, Topology: topo}, 4},
	} {
		if got := tt.req.cpus(); got != tt.want {
			t.Errorf("%s: %d CPUs, want %d", tt.name, got, tt.want)
		}
	}
}

func TestRequestScxSimple(t *testing.T) {
	asked := make([]string, 1, 4)
	asked[0] = "scx_qmap"
	r := Request{Scx: asked, ScxSimple: true}
	if got := r.scx(); !slices.Equal(got, []string{"scx_qmap", "scx_simple"}) {
		t.Errorf("scx() = %v, want scx_qmap and scx_simple", got)
	}
	if !slices.Equal(asked[:2], []string{"scx_qmap", ""}) {
		t.Errorf("scx() wrote into the request's list: %v", asked[:2])
	}
}

func TestRequestAddFiles(t *testing.T) {
	dir := t.TempDir()
	prog := staticELF(t, dir)
	for _, tt := range []struct {
		name  string
		req   Request
		want  string // in the error; "" for none
		paths []string
	}{
		{"a file at its own path", Request{Add: []string{prog}}, "", []string{prog}},
		{"a file elsewhere, and scx_simple", Request{Add: []string{prog + ":/t"}, ScxSimple: true}, "", []string{"/t", "/usr/bin/scx_simple"}},
		{"an empty guest path", Request{Add: []string{prog + ":"}}, "--add \"" + prog + ":\" has an empty guest path", nil},
		{"where the runner's file goes", Request{Add: []string{prog + ":/init"}}, "the runner puts its own file there", nil},
		{"where an example scheduler goes", Request{Add: []string{prog + ":/usr/bin/scx_qmap"}, Scx: []string{"scx_qmap"}}, "--scx scx_qmap builds it", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			exes := map[string]string{}
			paths, err := tt.req.addFiles(exes)
			if !errtest.Says(err, tt.want) {
				t.Fatalf("addFiles() = %v, want %q", err, tt.want)
			}
			if !slices.Equal(paths, tt.paths) {
				t.Errorf("guest paths %v, want %v", paths, tt.paths)
			}
		})
	}
}

func TestRequestAddFilesJudges(t *testing.T) {
	dir := t.TempDir()
	prog := staticELF(t, dir)
	found := func(name string) (string, error) {
		if name == "perf" || name == "sysbench" || name == "rt-app" || name == "stress-ng" {
			return prog, nil
		}
		return "", exec.ErrNotFound
	}
	mine := filepath.Join(dir, "my-sysbench")
	if err := os.WriteFile(mine, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	exes := map[string]string{}
	paths, err := Request{Judges: true, LookPath: found, Add: []string{mine + ":/usr/bin/sysbench"}}.addFiles(exes)
	if err != nil {
		t.Fatal(err)
	}
	if exes["/usr/bin/sysbench"] != mine || exes["/usr/bin/perf"] != prog || len(paths) != 4 {
		t.Errorf("executables %v, guest paths %v; want the judges, with the --add at sysbench's path kept", exes, paths)
	}
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	if _, err := (Request{Judges: true, LookPath: missing}).addFiles(map[string]string{}); !errors.Is(err, ErrJudgeMissing) || !strings.HasPrefix(err.Error(), "--judges: ") {
		t.Errorf("addFiles() without the judges = %v, want --judges: and ErrJudgeMissing", err)
	}
}

func TestRequestConfig(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("Config checks qemu is installed")
	}
	dir := t.TempDir()
	req := Request{
		CacheDir: filepath.Join(dir, "cache"), Memory: "1G", CPUs: 2, Topology: &Topology{Sockets: 2, Cores: 2, Threads: 1, Nodes: 1},
		Init: staticELF(t, dir), Args: []string{"doctor"}, Env: []string{"A=1"}, Subcommands: []string{"doctor"},
	}
	cfg, err := req.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CPUs != 4 || cfg.Memory != "1G" || cfg.Init != req.Init || !slices.Equal(cfg.Args, req.Args) || cfg.Kernel != nil {
		t.Errorf("Config() = %+v, want the request's guest with the topology's 4 CPUs and no kernel yet", cfg)
	}
	req.Args = []string{"/sched.test"}
	if _, err := req.Config(); !errtest.Says(err, "/sched.test is not in the guest") {
		t.Errorf("Config() with a program not added = %v", err)
	}
}

func TestRunWithRetries(t *testing.T) {
	errOther := errors.New("qemu: no such machine")
	for _, tt := range []struct {
		name    string
		retries int
		errs    []error // of the boots in turn; nil boots well
		boots   int
		want    error
	}{
		{"a crash retried", 2, []error{ErrKernelPanic, nil}, 2, nil},
		{"no result retried until the retries end", 2, []error{ErrNoResult, ErrKernelPanic, ErrNoResult}, 3, ErrNoResult},
		{"no retries", 0, []error{ErrKernelPanic}, 1, ErrKernelPanic},
		{"another error not retried", 3, []error{errOther}, 1, errOther},
	} {
		t.Run(tt.name, func(t *testing.T) {
			boots := 0
			run := func(context.Context, Config) (*Result, error) {
				err := tt.errs[boots]
				boots++
				return &Result{}, err
			}
			var log strings.Builder
			_, err := runWithRetries(context.Background(), Config{}, tt.retries, &log, run)
			if !errors.Is(err, tt.want) || boots != tt.boots {
				t.Errorf("%d boots, error %v; want %d boots, %v", boots, err, tt.boots, tt.want)
			}
			if n := strings.Count(log.String(), "the guest crashed; booting again"); n != boots-1 {
				t.Errorf("%d retries said, want %d: %q", n, boots-1, log.String())
			}
		})
	}
}
