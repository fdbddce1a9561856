package sched_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/vm/vmtest"
)

// matrixEnv lists the kernels TestVMMatrix boots, by vm.NamedKernels name
// or any --kernel spec; `make matrix` sets it.
const matrixEnv = "HOTLANE_MATRIX"

// TestVMMatrix runs the scheduler's guest tests (those TestVM runs, the
// latency comparison with scx_simple among them as the short bench) on
// every kernel of $HOTLANE_MATRIX, one boot each, goes on after a kernel
// fails, and ends with one line per kernel: the object loaded, the tests
// passed, the lane's p99 and how hotlane exited. The table also goes to
// $HOTLANE_MATRIX_OUT (make matrix: matrix-results/summary.md).
func TestVMMatrix(t *testing.T) {
	kernels := strings.Fields(os.Getenv(matrixEnv))
	if len(kernels) == 0 {
		t.Skipf("set %s to the kernels to run (make matrix does: 7.3 6.17 7.2 6.12)", matrixEnv)
	}
	var rows []matrixRow
	for _, k := range kernels {
		t.Run(k, func(t *testing.T) {
			began := time.Now()
			run, err := vmtest.RunGuest(t, vmtest.Options{Run: "^TestGuest", ScxSimple: true, Kernel: k, MultiThreadedTCG: true, Timeout: 20 * time.Minute})
			row := matrixRow{Kernel: k, Took: time.Since(began)}
			if run != nil {
				row.parse(run.Console)
				row.Package = run.Kernel.Name
				if err != nil || len(row.Failed) > 0 {
					t.Logf("guest console (%s):\n%s", run.Kernel.Name, run.Console)
				}
			}
			if err != nil {
				row.Error = err.Error()
				if !errors.Is(err, vmtest.ErrGuestTestsFailed) {
					row.Error = firstLine(row.Error)
				}
				t.Error(err)
			}
			rows = append(rows, row)
		})
	}
	var table strings.Builder
	writeMatrix(&table, rows)
	t.Logf("kernel matrix:\n%s", table.String())
	if out := os.Getenv("HOTLANE_MATRIX_OUT"); out != "" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := safefile.WriteFile(out, []byte(table.String()), safefile.Readable); err != nil {
			t.Fatal(err)
		}
	}
}

// matrixRow is one kernel's line.
type matrixRow struct {
	Kernel, Package, Object string
	Passed                  int
	Failed                  []string
	LaneP99, SimpleP99      string
	Exit                    string
	Error                   string
	Took                    time.Duration
}

var (
	topLevelResult = regexp.MustCompile(`(?m)^--- (PASS|FAIL): (TestGuest\w+)`)
	matrixLine     = regexp.MustCompile(`matrix: object (\w+), lane p99 (\S+) under hotlane, (\S+) under scx_simple, exit (\S+)`)
	objectLine     = regexp.MustCompile(`object for this kernel's kfuncs: (\w+)`)
)

// parse reads the guest console: top-level results, and the lines
// TestGuestLoadUnload and TestGuestLatencyBeatsScxSimple log for it.
func (r *matrixRow) parse(console string) {
	for _, m := range topLevelResult.FindAllStringSubmatch(console, -1) {
		if m[1] == "PASS" {
			r.Passed++
		} else {
			r.Failed = append(r.Failed, m[2])
		}
	}
	if m := objectLine.FindStringSubmatch(console); m != nil {
		r.Object = m[1]
	}
	if m := matrixLine.FindStringSubmatch(console); m != nil {
		r.Object, r.LaneP99, r.SimpleP99, r.Exit = m[1], m[2], m[3], m[4]
	}
}

// writeMatrix writes the rows as a Markdown table.
func writeMatrix(w io.Writer, rows []matrixRow) {
	fmt.Fprintln(w, "| kernel | package | object | guest tests passed | failed | lane p99 (hotlane) | lane p99 (scx_simple) | hotlane's exit | took |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		failed := strings.Join(r.Failed, ", ")
		if r.Error != "" && len(r.Failed) == 0 {
			failed = r.Error
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", r.Kernel, dash(r.Package), dash(r.Object), r.Passed, dash(failed),
			dash(r.LaneP99), dash(r.SimpleP99), dash(r.Exit), r.Took.Round(time.Second))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// The matrix reads what the guest tests print; a change to those lines
// must not leave the table empty unnoticed.
func TestMatrixRowParse(t *testing.T) {
	console := `=== RUN   TestGuestLoadUnload
    sched_vm_test.go:120: object for this kernel's kfuncs: 613
--- PASS: TestGuestLoadUnload (0.52s)
=== RUN   TestGuestFaultX
--- SKIP: TestGuestFaultX (0.00s)
    --- PASS: TestGuestStarvationGuard/sub (1.00s)
--- FAIL: TestGuestStarvationGuard (3.10s)
    sched_vm_test.go:512: matrix: object 613, lane p99 1.2ms under hotlane, 9.8ms under scx_simple, exit SCX_EXIT_UNREG
--- PASS: TestGuestLatencyBeatsScxSimple (12.00s)
`
	var r matrixRow
	r.parse(console)
	if r.Passed != 2 || len(r.Failed) != 1 || r.Failed[0] != "TestGuestStarvationGuard" {
		t.Errorf("passed %d failed %v, want 2 and [TestGuestStarvationGuard] (subtests and skips not counted)", r.Passed, r.Failed)
	}
	if r.Object != "613" || r.LaneP99 != "1.2ms" || r.SimpleP99 != "9.8ms" || r.Exit != "SCX_EXIT_UNREG" {
		t.Errorf("row %+v", r)
	}
	var b strings.Builder
	writeMatrix(&b, []matrixRow{r})
	if !strings.Contains(b.String(), "| 613 | 2 | TestGuestStarvationGuard | 1.2ms | 9.8ms | SCX_EXIT_UNREG |") {
		t.Errorf("table:\n%s", b.String())
	}
}
