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

func TestParseExample(t *testing.T) {
	p, err := Load(context.Background(), filepath.Join("testdata", "inference.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Policy{
		Source: filepath.Join("testdata", "inference.json"),
		Classes: []Class{
			{
				Name: "inference", HighPriority: true, Preempt: true,
				Slice: 2 * time.Millisecond, Weight: 100,
				Match: []Matcher{
					{CommPrefix: "infer"},
					{ProcessComm: "triton", Cgroup: "/inference.slice"},
					{SchedExt: true},
				},
			},
			{Name: "normal", Slice: 5 * time.Millisecond, Weight: 100},
		},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"inference", "normal"}, p.ClassNames()); diff != "" {
		t.Errorf("ClassNames (-want +got):\n%s", diff)
	}
	if id, ok := p.Class("normal"); !ok || id != 1 {
		t.Errorf(`Class("normal") = %d, %v; want 1, true`, id, ok)
	}
	if _, ok := p.Class("nope"); ok {
		t.Error(`Class("nope") found a class`)
	}
}

func TestParseDefaults(t *testing.T) {
	p, err := Parse("p.json", []byte(`{"classes": [
		{"name": "hi", "high_priority": true, "match": [{"pid": 7}]},
		{"name": "lo", "match": [{"tgid": 8}]},
		{"name": "rest"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Class{
		{Name: "hi", HighPriority: true, Preempt: true, Slice: DefaultHighPrioritySlice, Weight: DefaultWeight, Match: []Matcher{{PID: 7}}},
		{Name: "lo", Slice: DefaultSlice, Weight: DefaultWeight, Match: []Matcher{{TGID: 8}}},
		{Name: "rest", Slice: DefaultSlice, Weight: DefaultWeight},
	}
	if diff := cmp.Diff(want, p.Classes); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
}

// A high-priority class that does not mention preempt preempts: without
// it a lane task waits for a fair task's tick at every wake-up, slower
// than no lane (#42). Other classes do not, and an explicit false stays,
// through a round trip too.
func TestPreemptDefault(t *testing.T) {
	p, err := Parse("p.json", []byte(`{"classes": [
		{"name": "lane", "high_priority": true, "match": [{"pid": 1}]},
		{"name": "quiet", "high_priority": true, "preempt": false, "match": [{"pid": 2}]},
		{"name": "loud", "high_priority": true, "preempt": true, "match": [{"pid": 3}]},
		{"name": "batch", "match": [{"pid": 4}]},
		{"name": "batch2", "preempt": false, "match": [{"pid": 5}]},
		{"name": "rest"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"lane": true, "quiet": false, "loud": true, "batch": false, "batch2": false, "rest": false}
	check := func(what string, p *Policy) {
		t.Helper()
		for _, c := range p.Classes {
			if c.Preempt != want[c.Name] {
				t.Errorf("%s: class %s: preempt %v, want %v", what, c.Name, c.Preempt, want[c.Name])
			}
		}
	}
	check("parsed", p)
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("back", data)
	if err != nil {
		t.Fatalf("parse the marshalled policy: %v\n%s", err, data)
	}
	check("marshalled and parsed back", back)
	tab, err := p.Compile("/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range tab.Classes {
		if (c.Preempt == 1) != want[tab.Names[i]] {
			t.Errorf("compiled class %s: preempt %d, want %v", tab.Names[i], c.Preempt, want[tab.Names[i]])
		}
	}
}

// Describe says, after defaults, what the scheduler does with a class and
// which tasks are in it.
func TestDescribe(t *testing.T) {
	p, err := Parse("p.json", []byte(`{"classes": [
		{"name": "inference", "high_priority": true, "match": [{"comm_prefix": "infer"}, {"device": "195:*"}]},
		{"name": "quiet", "high_priority": true, "preempt": false, "slice": "500us", "match": [
			{"process_comm": "triton", "cgroup": "/inference.slice"}, {"pid": 7}, {"tgid": 8},
			{"sched_ext": true}, {"device_process": "226:128-255", "idle": "30s"}, {"comm": "x", "process_comm_prefix": "py"}]},
		{"name": "batch", "weight": 20, "slice": "20ms", "match": [{"comm_prefix": "make"}]},
		{"name": "normal", "slice": "2.5ms"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`inference: high priority, preempts lower classes, 2 ms slice, matched by: comm prefix "infer" or device 195:* (thread)`,
		`quiet: high priority, preempts only fair tasks that have run their minimum slice (else waits for a free CPU or a fair task's next tick), 500 µs slice, matched by: ` +
			`process comm "triton" and cgroup /inference.slice (subtree) or pid 7 (thread) or tgid 8 (process) or chose SCHED_EXT or ` +
			`device 226:128-255 (process, until idle 30s) or comm "x" and process comm prefix "py"`,
		`batch: fair queue, weight 20, 20 ms slice, matched by: comm prefix "make"`,
		`normal: fair queue, weight 100, 2.5 ms slice, matched by: every task no other class takes`,
	}
	var got []string
	for _, c := range p.Classes {
		got = append(got, c.Describe())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}
	// The built-in policy reads as the user expects of a lane.
	if got, want := Default("llama").Classes[0].Describe(), `inference: high priority, preempts lower classes, 2 ms slice, matched by: comm prefix "llama"`; got != want {
		t.Errorf("Default: %q, want %q", got, want)
	}
}

func TestDefault(t *testing.T) {
	for _, tt := range []struct {
		comms []string
		want  []Matcher
	}{
		{nil, []Matcher{{CommPrefix: "infer"}}},
		{[]string{"llama", "vllm", "llama"}, []Matcher{{CommPrefix: "llama"}, {CommPrefix: "vllm"}}},
	} {
		p := Default(tt.comms...)
		if err := p.Validate(); err != nil {
			t.Fatalf("Default(%q): %v", tt.comms, err)
		}
		want := &Policy{Source: "default policy", Classes: []Class{
			{Name: "inference", HighPriority: true, Preempt: true, Slice: 2 * time.Millisecond, Weight: 100, Match: tt.want},
			{Name: "normal", Slice: 5 * time.Millisecond, Weight: 100},
		}}
		if diff := cmp.Diff(want, p); diff != "" {
			t.Errorf("Default(%q) (-want +got):\n%s", tt.comms, diff)
		}
	}
	// The documented default file is the built-in policy.
	p, err := Load(context.Background(), filepath.Join("testdata", "default.json"))
	if err != nil {
		t.Fatal(err)
	}
	p.Source = "default policy"
	if diff := cmp.Diff(Default(), p); diff != "" {
		t.Errorf("testdata/default.json differs from Default() (-want +got):\n%s", diff)
	}
}

func TestDefaultInvalidComm(t *testing.T) {
	_, err := Default("a-very-long-inference-name").Compile(t.TempDir())
	if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), `default policy: class "inference" matcher 1: comm_prefix "a-very-long-inference-name" is 26 bytes`) {
		t.Errorf("got %v", err)
	}
}

// TestMarshalRoundTrip checks that a policy written out as JSON parses back
// to itself, so that the default policy can be dumped and edited.
func TestMarshalRoundTrip(t *testing.T) {
	for _, name := range []string{"inference.json", "tiers.json", "inference-server.json", "device-lane.json"} {
		p, err := Load(context.Background(), filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse(p.Source, data)
		if err != nil {
			t.Fatalf("%s: parse of marshalled policy: %v\n%s", name, err, data)
		}
		if diff := cmp.Diff(p, q); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", name, diff)
		}
	}
}

func TestUnmarshalEmbedded(t *testing.T) {
	var cfg struct {
		Policy *Policy `json:"policy"`
	}
	err := json.Unmarshal([]byte(`{"policy": {"classes": [{"name": "x", "weight": 5}]}}`), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Policy.Classes[0].Weight != 5 || cfg.Policy.Classes[0].Slice != DefaultSlice {
		t.Errorf("got %+v", cfg.Policy.Classes)
	}
	err = json.Unmarshal([]byte(`{"policy": {"classes": []}}`), &cfg)
	if !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("empty embedded policy: got %v, want ErrInvalidPolicy", err)
	}
}

// class returns the JSON of n classes named c1..cn, the last a catch-all.
func classes(n int) string {
	var cs []string
	for i := 1; i < n; i++ {
		cs = append(cs, fmt.Sprintf(`{"name": "c%d", "match": [{"pid": %d}]}`, i, i))
	}
	cs = append(cs, fmt.Sprintf(`{"name": "c%d"}`, n))
	return `{"classes": [` + strings.Join(cs, ", ") + `]}`
}

// withMatch returns a policy whose first class "a" has the given matchers.
func withMatch(match string) string {
	return `{"classes": [{"name": "a", "match": [` + match + `]}, {"name": "rest"}]}`
}

func TestParseErrors(t *testing.T) {
	manyMatchers := strings.Repeat(`{"pid": 1}, `, 32) + `{"pid": 2}`
	for _, tt := range []struct {
		name string
		in   string
		want string // the whole message, or a part of it if it ends in "..."
		kind error  // a sentinel the error must match besides ErrInvalidPolicy
		// Where the error points, if anywhere.
		line, col, class, matcher int
	}{
		{name: "empty file", in: " \n", want: `p.json: empty policy; write a JSON object such as {"classes": [{"name": "normal"}]}`},
		{name: "no classes", in: `{"classes": []}`, want: `p.json: no classes; ...`},
		{name: "no classes key", in: `{}`, want: `p.json: no classes; ...`},
		{name: "null", in: `null`, want: `p.json: no classes; ...`},
		// Refused at the class too many, before the rest is read.
		{name: "nine classes", in: classes(9), want: "p.json:1:326: class 9: more than 8 classes; at most 8 are supported, merge some", line: 1, col: 326, class: 9},
		{name: "eight classes is fine", in: classes(8)},
		{name: "catch-all with matchers", in: `{"classes": [{"name": "a", "match": [{"pid": 1}]}, {"name": "b", "match": [{"pid": 2}]}]}`,
			want: `p.json: class "b": the last class is the catch-all and must have no "match"; ...`, kind: ErrNoCatchAll, class: 2},
		{name: "single class with matchers", in: `{"classes": [{"name": "a", "match": [{"pid": 1}]}]}`,
			want: `p.json: class "a": the last class is the catch-all ...`, kind: ErrNoCatchAll, class: 1},
		{name: "catch-all high priority", in: `{"classes": [{"name": "a", "high_priority": true}]}`,
			want: `p.json: class "a": the catch-all class cannot be high_priority, ...`, class: 1},
		{name: "non-last without matchers", in: `{"classes": [{"name": "a"}, {"name": "b"}]}`,
			want: `p.json: class "a": no "match", but only the last class may be the catch-all; add matchers or move the class to the end`, class: 1},
		{name: "non-last with empty match", in: `{"classes": [{"name": "a", "match": []}, {"name": "b"}]}`,
			want: `p.json: class "a": no "match", ...`, class: 1},
		{name: "duplicate names", in: `{"classes": [{"name": "a", "match": [{"pid": 1}]}, {"name": "a"}]}`,
			want: `p.json: class "a": duplicate class name; class 1 already has it, rename one`, class: 2},
		{name: "missing name", in: `{"classes": [{"match": [{"pid": 1}]}, {"name": "b"}]}`,
			want: `p.json: class 1: "name" is missing; give the class a name such as "inference"`, class: 1},
		{name: "name too long", in: `{"classes": [{"name": "abcdefghijklmnop"}]}`,
			want: `p.json: class "abcdefghijklmnop": name "abcdefghijklmnop" is 16 characters; use at most 15`, class: 1},
		{name: "name bad character", in: `{"classes": [{"name": "Normal"}]}`,
			want: `p.json: class "Normal": name "Normal" has 'N'; use only a-z, 0-9, _ and -`, class: 1},
		{name: "comm too long", in: withMatch(`{"comm": "0123456789abcdef"}`),
			want: `p.json: class "a" matcher 1: comm "0123456789abcdef" is 16 bytes; the kernel keeps only 15 bytes of a task name, shorten it`, class: 1, matcher: 1},
		{name: "comm 15 bytes is fine", in: withMatch(`{"comm": "0123456789abcde"}`)},
		{name: "process comm prefix too long", in: withMatch(`{"pid": 1}, {"process_comm_prefix": "0123456789abcdefg"}`),
			want: `p.json: class "a" matcher 2: process_comm_prefix "0123456789abcdefg" is 17 bytes; ...`, class: 1, matcher: 2},
		{name: "comm with NUL", in: withMatch(`{"comm": "a\u0000b"}`), want: `... contains a NUL byte, which no task name has`, class: 1, matcher: 1},
		{name: "empty comm prefix", in: withMatch(`{"comm_prefix": ""}`),
			want: `p.json: class "a" matcher 1: comm_prefix is empty; give a name or leave the field out`, class: 1, matcher: 1},
		{name: "comm and comm_prefix", in: withMatch(`{"comm": "x", "comm_prefix": "y"}`),
			want: `p.json: class "a" matcher 1: both comm and comm_prefix are set; ...`, class: 1, matcher: 1},
		{name: "process comm and prefix", in: withMatch(`{"process_comm": "x", "process_comm_prefix": "y"}`),
			want: `p.json: class "a" matcher 1: both process_comm and process_comm_prefix are set; ...`, class: 1, matcher: 1},
		{name: "empty matcher", in: withMatch(`{"pid": 1}, {}`),
			want: `p.json: class "a" matcher 2: the matcher has no fields; give at least one of comm_prefix, comm, process_comm_prefix, process_comm, pid, tgid, cgroup, sched_ext, device, device_process`, class: 1, matcher: 2},
		{name: "null matcher fields", in: withMatch(`{"pid": null}`), want: `p.json: class "a" matcher 1: the matcher has no fields; ...`, class: 1, matcher: 1},
		{name: "pid zero", in: withMatch(`{"pid": 0}`), want: `p.json: class "a" matcher 1: pid 0 is out of range; use 1 to 4194304`, class: 1, matcher: 1},
		{name: "tgid negative", in: withMatch(`{"tgid": -5}`), want: `p.json: class "a" matcher 1: tgid -5 is out of range; use 1 to 4194304`, class: 1, matcher: 1},
		{name: "pid too big", in: withMatch(`{"pid": 4194305}`), want: `... pid 4194305 is out of range; ...`, class: 1, matcher: 1},
		{name: "sched_ext false", in: withMatch(`{"sched_ext": false}`),
			want: `p.json: class "a" matcher 1: "sched_ext": false cannot be matched; leave the field out to match tasks of any scheduling policy`, class: 1, matcher: 1},
		{name: "cgroup relative", in: withMatch(`{"cgroup": "inference.slice"}`),
			want: `p.json: class "a" matcher 1: cgroup "inference.slice" must start with "/"; ...`, class: 1, matcher: 1},
		{name: "cgroup not clean", in: withMatch(`{"cgroup": "/a/../b/"}`),
			want: `p.json: class "a" matcher 1: cgroup "/a/../b/" is not a clean path; write it as "/b"`, class: 1, matcher: 1},
		{name: "device glob", in: withMatch(`{"device": "/dev/nvidia*", "idle": "30s"}`)},
		{name: "device numbers", in: withMatch(`{"device_process": "195:*"}, {"device": "226:128-255"}, {"device": "10:200", "comm_prefix": "py"}`)},
		{name: "device and device_process", in: withMatch(`{"device": "1:3", "device_process": "1:3"}`),
			want: `p.json: class "a" matcher 1: both device and device_process are set; keep one (device_process matches the whole process)`, class: 1, matcher: 1},
		{name: "device not a glob or number", in: withMatch(`{"device": "nvidia0"}`),
			want: `p.json: class "a" matcher 1: device "nvidia0" is neither a path glob nor a device number; write e.g. "/dev/nvidia*", "195:0", "226:128-255" or "195:*"`, class: 1, matcher: 1},
		{name: "device bad glob", in: withMatch(`{"device_process": "/dev/[nv"}`),
			want: `p.json: class "a" matcher 1: device_process "/dev/[nv" is not a valid glob: syntax error in pattern`, class: 1, matcher: 1},
		{name: "device range backwards", in: withMatch(`{"device": "226:255-128"}`),
			want: `... device "226:255-128": the range runs backwards; write the smaller minor first`, class: 1, matcher: 1},
		{name: "device major too big", in: withMatch(`{"device": "4096:0"}`),
			want: `... device "4096:0": major 4096 is above the kernel's limit of 4095`, class: 1, matcher: 1},
		{name: "device minor too big", in: withMatch(`{"device": "1:0-1048576"}`),
			want: `... device "1:0-1048576": minor 1048576 is above the kernel's limit of 1048575`, class: 1, matcher: 1},
		{name: "empty device", in: withMatch(`{"device": ""}`),
			want: `p.json: class "a" matcher 1: device is empty; give a name or leave the field out`, class: 1, matcher: 1},
		{name: "idle alone", in: withMatch(`{"pid": 1, "idle": "5s"}`),
			want: `p.json: class "a" matcher 1: idle is set without device or device_process; it says when a device matcher stops matching`, class: 1, matcher: 1},
		{name: "idle not a duration", in: withMatch(`{"device": "1:3", "idle": "5 s"}`),
			want: `p.json: class "a" matcher 1: idle "5 s" is not a duration; write e.g. "30s" or "5m"`, class: 1, matcher: 1},
		{name: "idle zero", in: withMatch(`{"device": "1:3", "idle": "0s"}`),
			want: `... idle "0s" must be positive; leave it out to match for the task's life`, class: 1, matcher: 1},
		{name: "idle too long", in: withMatch(`{"device": "1:3", "idle": "25h"}`),
			want: `... idle 25h0m0s is out of range; use 1ms to 24h0m0s, or leave it out to match for the task's life`, class: 1, matcher: 1},
		{name: "idle a number", in: "{\"classes\": [{\"name\": \"a\", \"match\": [{\"device\": \"1:3\", \"idle\": 30}]}, {\"name\": \"b\"}]}",
			want: `p.json:1:64: class 1 matcher 1: "idle" must be a duration string such as "30s", not a number`, line: 1, col: 64, class: 1, matcher: 1},
		{name: "too many matchers", in: withMatch(manyMatchers), want: "... matcher 33: more than 32 matchers in all; at most 32 are supported, ...", line: 1, col: 422, class: 1, matcher: 33},
		{name: "slice too short", in: `{"classes": [{"name": "a", "slice": "99us"}]}`,
			want: `p.json: class "a": slice 99µs is out of range; use 100µs to 100ms`, class: 1},
		{name: "slice too long", in: `{"classes": [{"name": "a", "slice": "1s"}]}`, want: `... slice 1s is out of range; ...`, class: 1},
		{name: "slice negative", in: `{"classes": [{"name": "a", "slice": "-2ms"}]}`, want: `... slice -2ms is out of range; ...`, class: 1},
		{name: "slice bounds are fine", in: `{"classes": [{"name": "a", "slice": "100us", "match": [{"pid": 1}]}, {"name": "b", "slice": "100ms"}]}`},
		{name: "slice not a duration", in: `{"classes": [{"name": "a", "slice": "2 ms"}]}`,
			want: `p.json: class "a": slice "2 ms" is not a duration; write e.g. "2ms" or "500us"`, class: 1},
		{name: "slice a number", in: "{\"classes\": [\n  {\"name\": \"a\", \"slice\": 2000000}]}",
			want: `p.json:2:26: class 1: "slice" must be a duration string such as "2ms", not a number`, line: 2, col: 26, class: 1},
		{name: "weight zero", in: `{"classes": [{"name": "a", "weight": 0}]}`, want: `p.json: class "a": weight 0 is out of range; use 1 to 10000`, class: 1},
		{name: "weight too big", in: `{"classes": [{"name": "a", "weight": 10001}]}`, want: `... weight 10001 is out of range; ...`, class: 1},
		{name: "weight huge", in: `{"classes": [{"name": "a", "weight": 99999999999}]}`, want: `... weight 99999999999 is out of range; ...`, class: 1},
		{name: "weight fraction", in: `{"classes": [{"name": "a", "weight": 1.5}]}`,
			want: `p.json:1:38: class 1: "weight" must be a whole number, not number 1.5`, line: 1, col: 38, class: 1},
		{name: "weight string", in: `{"classes": [{"name": "a", "weight": "100"}]}`,
			want: `p.json:1:38: class 1: "weight" must be a whole number, not a string`, line: 1, col: 38, class: 1},
		{name: "preempt without high priority", in: `{"classes": [{"name": "a", "preempt": true, "match": [{"pid": 1}]}, {"name": "b"}]}`,
			want: `p.json: class "a": preempt needs "high_priority": true; only high-priority tasks preempt`, class: 1},
		{name: "pid string", in: "{\"classes\": [{\"name\": \"a\", \"match\": [\n\t{\"pid\": 1},\n\t{\"pid\": \"12\"}]}]}",
			want: `p.json:3:10: class 1 matcher 2: "pid" must be a whole number, not a string`, line: 3, col: 10, class: 1, matcher: 2},
		{name: "name not a string", in: `{"classes": [{"name": {"x": 1}}]}`,
			want: `p.json:1:23: class 1: "name" must be a string, not an object`, line: 1, col: 23, class: 1},
		{name: "match not a list", in: `{"classes": [{"name": "a", "match": {"pid": 1}}]}`,
			want: `p.json:1:37: class 1: "match" must be a list [...], not an object`, line: 1, col: 37, class: 1},
		{name: "classes not a list", in: `{"classes": {"name": "a"}}`,
			want: `p.json:1:13: "classes" must be a list [...], not an object`, line: 1, col: 13},
		{name: "high_priority not a bool", in: `{"classes": [{"name": "a", "high_priority": "yes"}]}`,
			want: `p.json:1:45: class 1: "high_priority" must be true or false, not a string`, line: 1, col: 45, class: 1},
		{name: "policy not an object", in: `[{"name": "a"}]`,
			want: `p.json:1:1: a policy is a JSON object such as {"classes": [...]}, not an array`, line: 1, col: 1},
		{name: "unknown matcher field", in: "{\n  \"classes\": [\n    {\"name\": \"a\", \"match\": [\n      {\"pid\": 1},\n      {\"comm_prefx\": \"infer\"}\n    ]},\n    {\"name\": \"b\"}\n  ]\n}",
			want: `p.json:5:8: class 1 matcher 2: unknown field "comm_prefx" (did you mean "comm_prefix"?); valid matcher fields: comm_prefix, comm, process_comm_prefix, process_comm, pid, tgid, cgroup, sched_ext, device, device_process, idle`,
			line: 5, col: 8, class: 1, matcher: 2},
		{name: "unknown class field", in: `{"classes": [{"name": "a"}, {"name": "b", "prio": 1}]}`,
			want: `p.json:1:43: class 2: unknown field "prio"; valid class fields: name, high_priority, preempt, slice, weight, match`, line: 1, col: 43, class: 2},
		{name: "unknown top-level field", in: `{"classes": [{"name": "a"}], "clases": []}`,
			want: `p.json:1:30: unknown field "clases" (did you mean "classes"?); valid policy fields: classes`, line: 1, col: 30},
		{name: "field in wrong case", in: `{"classes": [{"Name": "a"}]}`,
			want: `p.json:1:15: class 1: unknown field "Name" (did you mean "name"?); ...`, line: 1, col: 15, class: 1},
		{name: "unknown field after multibyte text", in: `{"classes": [{"name": "a", "match": [{"comm": "ü", "bad": 1}]}]}`,
			want: `p.json:1:52: class 1 matcher 1: unknown field "bad"; ...`, line: 1, col: 52, class: 1, matcher: 1},
		{name: "duplicate field", in: "{\"classes\": [{\"name\": \"a\",\n \"name\": \"b\"}]}",
			want: `p.json:2:2: class 1: duplicate field "name" (first at 1:15); keep one`, line: 2, col: 2, class: 1},
		{name: "syntax error", in: "{\"classes\": [\n  {\"name\": \"a\",}\n]}",
			want: `p.json:2:16: invalid JSON: invalid character '}' looking for beginning of object key string`, line: 2, col: 16},
		{name: "missing colon", in: `{"classes" []}`, want: `p.json:1:12: invalid JSON: invalid character '[' after object key`, line: 1, col: 12},
		{name: "truncated", in: "{\"classes\": [\n", want: `p.json:2:1: invalid JSON: unexpected end of JSON input`, line: 2, col: 1},
		{name: "trailing data", in: `{"classes": [{"name": "a"}]} {}`,
			want: `p.json:1:30: invalid JSON: invalid character '{' after top-level value`, line: 1, col: 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.json", []byte(tt.in))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			checkMessage(t, err, tt.want)
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("error does not match ErrInvalidPolicy: %v", err)
			}
			if tt.kind != nil && !errors.Is(err, tt.kind) {
				t.Errorf("error does not match %v: %v", tt.kind, err)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error is %T, not *Error", err)
			}
			got := [4]int{pe.Line, pe.Column, pe.Class, pe.Matcher}
			if want := [4]int{tt.line, tt.col, tt.class, tt.matcher}; got != want {
				t.Errorf("line, column, class, matcher = %v; want %v", got, want)
			}
		})
	}
}

// checkMessage compares an error message with want, which may start and/or
// end with "..." to match only part of it. Messages are one line.
func checkMessage(t *testing.T, err error, want string) {
	t.Helper()
	got := err.Error()
	if strings.Contains(got, "\n") {
		t.Errorf("message has several lines: %q", got)
	}
	prefix, suffix := strings.HasSuffix(want, "..."), strings.HasPrefix(want, "...")
	w := strings.TrimSuffix(strings.TrimPrefix(want, "..."), "...")
	var ok bool
	switch {
	case prefix && suffix:
		ok = strings.Contains(got, w)
	case prefix:
		ok = strings.HasPrefix(got, w)
	case suffix:
		ok = strings.HasSuffix(got, w)
	default:
		ok = got == w
	}
	if !ok {
		t.Errorf("error\n got: %s\nwant: %s", got, want)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(context.Background(), filepath.Join(dir, "missing.json"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: got %v", err)
	}
	_, err = Load(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: got %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, maxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(context.Background(), big)
	if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: got %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"classes": [{"name": "a", "weight": 0}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(context.Background(), bad)
	checkMessage(t, err, bad+`: class "a": weight 0 is out of range; use 1 to 10000`)
}

func TestValidateProgrammatic(t *testing.T) {
	// Policies built in Go get the same checks; zero knobs are not defaults.
	p := &Policy{Classes: []Class{{Name: "only"}}}
	err := p.Validate()
	checkMessage(t, err, `class "only": slice 0s is out of range; use 100µs to 100ms`)
	p = &Policy{Classes: []Class{
		{Name: "a", Slice: time.Millisecond, Weight: 1, Match: []Matcher{{PID: MaxPID + 1}}},
		{Name: "b", Slice: time.Millisecond, Weight: 1},
	}}
	checkMessage(t, p.Validate(), `class "a" matcher 1: pid 4194305 is above the kernel's limit of 4194304`)
	if err := (&Policy{}).Validate(); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("empty policy: got %v", err)
	}
}
