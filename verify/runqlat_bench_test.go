package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/hotlane/hotlane/loader"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/report"
)

// The tracer's cost beside libbpf-tools' runqlat (Debian's libbpf-tools),
// both attached at once to the same kernel under the same hackbench load
// (rt-tests), so each sees the same events. The figure is BPF run time per
// context switch: the tools hook different tracepoints (hotlane also
// sched_waking, for where a wait starts), so time per program run would
// favour the tool that runs more, cheaper programs. Per-task histograms
// are compared with runqlat -L (a histogram per thread). "explain" is the
// tracer as verify runs it with a bound: histograms, the per-CPU history
// and interrupt hooks that explain violations, and a 1 ms threshold on
// every class so that the explaining walk runs too.
//
//	go test ./verify -run '^$' -bench TracerVsRunqlat -benchtime 3x
func BenchmarkTracerVsRunqlat(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("loads BPF programs into the running kernel: needs root")
	}
	runqlat, err := exec.LookPath("runqlat")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/runqlat"); serr != nil {
			b.Skip("runqlat not found: apt-get install libbpf-tools")
		}
		runqlat = "/usr/sbin/runqlat"
	}
	hackbench, err := exec.LookPath("hackbench")
	if err != nil {
		b.Skip("hackbench not found: apt-get install rt-tests")
	}
	for _, mode := range []struct {
		name    string
		perTask bool
		explain bool
		args    []string
	}{
		{"histograms", false, false, nil},
		{"per-task", true, false, []string{"-L"}},
		{"explain", false, true, nil},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var ours, theirs, switches float64
			for range b.N {
				o, t, n, err := compareWithRunqlat(runqlat, mode.args, hackbench, mode.perTask, mode.explain)
				if err != nil {
					b.Fatal(err)
				}
				ours, theirs, switches = ours+o, theirs+t, switches+n
			}
			b.ReportMetric(ours/switches, "hotlane-ns/switch")
			b.ReportMetric(theirs/switches, "runqlat-ns/switch")
			b.ReportMetric(ours/theirs, "hotlane/runqlat")
		})
	}
}

// compareWithRunqlat attaches runqlat and the tracer, runs hackbench, and
// returns each tool's BPF run time (ns) over the load and the number of
// context switches the tracer saw meanwhile.
func compareWithRunqlat(runqlat string, args []string, hackbench string, perTask, explain bool) (ours, theirs, switches float64, err error) {
	cmd := exec.Command(runqlat, append(args, "60", "1")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, fmt.Errorf("start runqlat: %w", err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	var progs map[string]*ebpf.Program
	for deadline := time.Now().Add(10 * time.Second); ; {
		progs, err = loader.ProcessPrograms(cmd.Process.Pid)
		if err == nil && len(progs) >= 3 {
			break
		}
		for _, p := range progs {
			p.Close()
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("runqlat loaded no programs within 10s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer func() {
		for _, p := range progs {
			p.Close()
		}
	}()
	table, err := policy.Default().Compile("")
	if err != nil {
		return 0, 0, 0, err
	}
	cfg := TracerConfig{Table: table, PerTask: perTask, MeasureCost: true, Explain: explain}
	if explain {
		cfg.Thresholds = map[string]time.Duration{}
		for _, class := range table.Names {
			cfg.Thresholds[class] = time.Millisecond
		}
	}
	tr, err := Attach(cfg)
	if err != nil {
		return 0, 0, 0, err
	}
	defer tr.Close()
	// Let runqlat finish attaching (its programs are loaded before its
	// links exist), then count from here.
	time.Sleep(200 * time.Millisecond)
	read := func() (ours, theirs []report.ProgramCost, err error) {
		if ours, err = tr.Cost(); err != nil {
			return nil, nil, err
		}
		theirs, err = loader.Costs(progs)
		return ours, theirs, err
	}
	ours0, theirs0, err := read()
	if err != nil {
		return 0, 0, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, hackbench, "--groups", "4", "--loops", "2000").CombinedOutput(); err != nil {
		return 0, 0, 0, fmt.Errorf("hackbench: %w: %s", err, out)
	}
	ours1, theirs1, err := read()
	if err != nil {
		return 0, 0, 0, err
	}
	o, _ := costDelta(ours0, ours1, "")
	t, _ := costDelta(theirs0, theirs1, "")
	_, n := costDelta(ours0, ours1, "switch")
	if n == 0 {
		return 0, 0, 0, errors.New("the tracer's sched_switch program never ran")
	}
	if t == 0 {
		return 0, 0, 0, errors.New("runqlat's programs never ran: BPF run-time statistics off?")
	}
	return o, t, n, nil
}

// costDelta sums run time (ns) and runs between two readings, over the
// programs whose name contains match ("" for all).
func costDelta(before, after []report.ProgramCost, match string) (ns, runs float64) {
	prev := map[string]report.ProgramCost{}
	for _, c := range before {
		prev[c.Program] = c
	}
	for _, c := range after {
		if !strings.Contains(c.Program, match) {
			continue
		}
		ns += float64(c.Total - prev[c.Program].Total)
		runs += float64(c.Runs - prev[c.Program].Runs)
	}
	return ns, runs
}
