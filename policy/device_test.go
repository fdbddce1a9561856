package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func dev(major, minor uint32) uint32 { return major<<20 | minor }

func TestCompileDevices(t *testing.T) {
	if _, err := os.Stat("/dev/null"); err != nil {
		t.Skipf("no /dev/null to resolve a glob to: %v", err)
	}
	p, err := Parse("devices.json", []byte(`{"classes": [
		{"name": "accel", "high_priority": true, "match": [
			{"device": "/dev/nul[l]", "idle": "2s"},
			{"device_process": "/dev/nul[l]", "idle": "2s"},
			{"device": "195:*", "comm_prefix": "py"}
		]},
		{"name": "render", "match": [{"device_process": "226:128-255", "idle": "30s"}, {"device": "195:*"}]},
		{"name": "normal"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := p.Compile("/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	wantRanges := []DeviceRange{
		{Lo: dev(1, 3), Hi: dev(1, 3), DevSet: 0},
		{Lo: dev(195, 0), Hi: dev(195, 1<<20-1), DevSet: 1},
		{Lo: dev(226, 128), Hi: dev(226, 255), DevSet: 2},
	}
	if diff := cmp.Diff(wantRanges, tab.DeviceRanges); diff != "" {
		t.Errorf("DeviceRanges (-want +got):\n%s", diff)
	}
	// A device and idle pair is one set, shared by the matchers naming it.
	if diff := cmp.Diff([]uint64{2e9, 0, 30e9}, tab.DeviceSetIdle); diff != "" {
		t.Errorf("DeviceSetIdle (-want +got):\n%s", diff)
	}
	type kindSet struct {
		Kinds  MatchKind
		DevSet uint32
	}
	var got []kindSet
	for _, r := range tab.Rules {
		got = append(got, kindSet{r.Kinds, r.DevSet})
	}
	want := []kindSet{{MatchDevice, 0}, {MatchDeviceProcess, 0}, {MatchDevice | MatchCommPrefix, 1}, {MatchDeviceProcess, 2}, {MatchDevice, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if !tab.HasDeviceRules() {
		t.Error("HasDeviceRules = false")
	}
	vars := tab.BPFVariables()
	if vars["hl_nr_dev_ranges"] != uint32(3) || vars["hl_nr_devsets"] != uint32(3) {
		t.Errorf("hl_nr_dev_ranges, hl_nr_devsets = %v, %v; want 3, 3", vars["hl_nr_dev_ranges"], vars["hl_nr_devsets"])
	}
	if a := tab.DeviceRangesArray(); a[2] != wantRanges[2] || a[3] != (DeviceRange{}) {
		t.Errorf("DeviceRangesArray = %v", a[:4])
	}

	plain, err := Default("infer").Compile("/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	if plain.HasDeviceRules() || len(plain.DeviceRanges) != 0 {
		t.Errorf("the default policy has device rules: %+v", plain)
	}
}

func TestCompileDeviceErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "accel0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var nine []string
	for i := range 9 {
		nine = append(nine, fmt.Sprintf(`{"device": "%d:0"}`, 200+i))
	}
	for _, tt := range []struct {
		name, match, want string
		kind              error
	}{
		{"no such path", `{"device": "/nonexistent/accel*"}`,
			`p.json: class "a" matcher 1: device "/nonexistent/accel*" matches no device node now (0 paths); check the path, or name the devices by number (e.g. "195:*") to match devices that appear later`,
			ErrDeviceNotFound},
		{"only regular files", `{"pid": 1}, {"device_process": "` + dir + `/accel*"}`,
			`... matcher 2: device_process "` + dir + `/accel*" matches no device node now (1 paths); ...`, ErrDeviceNotFound},
		{"too many sets", strings.Join(nine, ", "),
			`p.json: class "a" matcher 9: more than 8 distinct device and idle pairs in the policy; share one between matchers`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("p.json", []byte(withMatch(tt.match)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Compile("/nonexistent")
			if err == nil {
				t.Fatal("no error")
			}
			checkMessage(t, err, tt.want)
			if !errors.Is(err, ErrInvalidPolicy) || (tt.kind != nil && !errors.Is(err, tt.kind)) {
				t.Errorf("error does not match ErrInvalidPolicy and %v: %v", tt.kind, err)
			}
		})
	}
}

func TestMergeDevices(t *testing.T) {
	one := func(major, minor, block uint32) DeviceRange {
		return DeviceRange{Lo: dev(major, minor), Hi: dev(major, minor), Block: block}
	}
	got := mergeDevices([]DeviceRange{
		one(195, 2, 0), one(195, 0, 0), one(195, 1, 0), one(195, 255, 0), one(195, 1, 0), // nvidia0-2, nvidiactl, a duplicate
		one(8, 0, 1), one(8, 1, 1), one(8, 1, 0), // block sda, sda1; char 8:1 is another device
		{Lo: dev(2, 1<<20-1), Hi: dev(2, 1<<20-1)}, one(3, 0, 0), // the last minor of one major, the first of the next
	})
	want := []DeviceRange{
		{Lo: dev(2, 1<<20-1), Hi: dev(2, 1<<20-1)}, one(3, 0, 0), one(8, 1, 0),
		{Lo: dev(195, 0), Hi: dev(195, 2)}, one(195, 255, 0),
		{Lo: dev(8, 0), Hi: dev(8, 1), Block: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mergeDevices (-want +got):\n%s", diff)
	}
}

func TestDeviceMatcherRoundTrip(t *testing.T) {
	p := Default("infer")
	p.Classes[0].Match = append(p.Classes[0].Match,
		Matcher{Device: "/dev/nvidia*", Idle: 30 * time.Second},
		Matcher{DeviceProcess: "226:128-255"})
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `{"device":"/dev/nvidia*","idle":"30s"}`) {
		t.Errorf("marshalled: %s", data)
	}
	back, err := Parse("back", data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.Classes, back.Classes); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// The README's inference-server policy is the one in testdata, and it
// loads on any machine: its devices are numbers, not globs.
func TestInferenceServerExample(t *testing.T) {
	path := filepath.Join("testdata", "inference-server.json")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```json\n"+string(text)+"```") {
		t.Errorf("README.md does not show %s as it is", path)
	}
	p, err := Load(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := p.Compile("/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	want := []DeviceRange{
		{Lo: dev(195, 0), Hi: dev(195, 253), DevSet: 0},
		{Lo: dev(226, 128), Hi: dev(226, 255), DevSet: 1},
		{Lo: dev(261, 0), Hi: dev(261, 1<<20-1), DevSet: 2},
	}
	if diff := cmp.Diff(want, tab.DeviceRanges); diff != "" {
		t.Errorf("DeviceRanges (-want +got):\n%s", diff)
	}
}
