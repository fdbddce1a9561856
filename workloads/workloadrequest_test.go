package workloads

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/errtest"
)

func TestWorkloadRequestMix(t *testing.T) {
	req := WorkloadRequest{Period: 10 * time.Millisecond, Compute: 2 * time.Millisecond, Threads: 3, Comm: "llm", Hogs: 4}
	mix, err := req.Mix()
	if err != nil {
		t.Fatal(err)
	}
	want := Periodic{Comm: "llm", Period: 10 * time.Millisecond, Compute: 2 * time.Millisecond, Threads: 3}
	if len(mix.Periodic) != 1 || mix.Periodic[0] != want || len(mix.Hogs) != 1 || mix.Hogs[0] != (Hogs{Comm: "hog", Threads: 4}) {
		t.Errorf("Mix() = %+v, want the periodic task asked for over 4 hogs", mix)
	}
	mix, err = WorkloadRequest{File: "examples/request-server.json", Threads: 1, Hogs: 1}.Mix()
	if err != nil || len(mix.RequestServers) == 0 {
		t.Errorf("Mix() of a file = %+v, %v; want the file's request server", mix, err)
	}
	for _, tt := range []struct {
		name string
		req  WorkloadRequest
		want string
	}{
		{"too many threads", WorkloadRequest{Threads: 1, Hogs: MaxTasks}, "--threads and --hogs: the generators start"},
		{"a file that is not there", WorkloadRequest{File: "examples/none.json"}, "examples/none.json"},
	} {
		if _, err := tt.req.Mix(); !errtest.Says(err, tt.want) {
			t.Errorf("%s: Mix() = %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := (WorkloadRequest{File: "examples/none.json"}).Mix(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Mix() of a missing file = %v, want fs.ErrNotExist", err)
	}
}

func TestWriteMixText(t *testing.T) {
	mix := Mix{
		Periodic: []Periodic{{Comm: "infer"}},
		Hogs:     []Hogs{{Comm: "hog", Threads: 2}},
	}
	res := MixResult{Periodic: make([]PeriodicResult, 1), HogWork: []uint64{3e6}}
	res.Periodic[0].Lateness.Record(uint64(50 * time.Microsecond))
	res.Periodic[0].Missed = 1
	var b strings.Builder
	if err := WriteMixText(&b, mix, res, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"wake-up lateness (the tasks' own measurement):\n", "periodic task", "infer", "hogs hog: 2 threads, 1.5 Mloops/s\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := WriteMixText(&b, Mix{Hogs: mix.Hogs}, MixResult{HogWork: []uint64{0}}, time.Second); err != nil || strings.Contains(b.String(), "lateness") {
		t.Errorf("without a periodic task: %q, %v; want no lateness table", b.String(), err)
	}
}
