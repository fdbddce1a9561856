package vm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Where Debian's /usr/bin/perf is the wrapper script, the guest gets the
// newest real perf_<version> beside it; where it is perf itself, perf.
func TestJudgeProgramsFindRealPerf(t *testing.T) {
	elf, err := exec.LookPath("true")
	if err != nil {
		t.Skip("needs true(1), an ELF program")
	}
	program, _ := os.ReadFile(elf)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	others := map[string]string{"sysbench": write("sysbench", program), "rt-app": write("rt-app", program), "stress-ng": write("stress-ng", program)}
	look := func(name string) (string, error) {
		if p, ok := others[name]; ok {
			return p, nil
		}
		if p := filepath.Join(dir, name); name == "perf" {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		return "", exec.ErrNotFound
	}
	if _, err := JudgePrograms(look); !errors.Is(err, ErrJudgeMissing) || !strings.Contains(err.Error(), "install linux-perf") {
		t.Errorf("without perf: %v", err)
	}
	wrapper := write("perf", []byte("#!/bin/sh\nexec \"perf_$(uname -r | cut -d. -f1-2)\" \"$@\"\n"))
	if _, err := JudgePrograms(look); !errors.Is(err, ErrJudgeMissing) || !strings.Contains(err.Error(), "wrapper script") {
		t.Errorf("the wrapper alone: %v", err)
	}
	write("perf_6.1", program)
	write("perf_6.12", program)
	write("perf_6.9", []byte("#!/bin/sh\n"))
	got, err := JudgePrograms(look)
	if err != nil || got["/usr/bin/perf"] != filepath.Join(dir, "perf_6.12") || got["/usr/bin/sysbench"] != others["sysbench"] || len(got) != 4 {
		t.Errorf("with the wrapper and perf_6.1, perf_6.12: %v, %v; want perf_6.12 at /usr/bin/perf", got, err)
	}
	write(filepath.Base(wrapper), program)
	if got, err := JudgePrograms(look); err != nil || got["/usr/bin/perf"] != wrapper {
		t.Errorf("perf itself: %v, %v", got, err)
	}
	delete(others, "rt-app")
	if _, err := JudgePrograms(look); !errors.Is(err, ErrJudgeMissing) || !strings.Contains(err.Error(), "rt-app not found in $PATH: install rt-app") {
		t.Errorf("without rt-app: %v", err)
	}
}
