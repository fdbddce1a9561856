package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks that Parse never panics, that every error is a one-line
// *Error matching ErrInvalidPolicy, and that every accepted policy validates,
// survives a JSON round trip and compiles. Seeds: testdata/*.json and
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	root := f.TempDir() // an empty cgroup root: only "/" exists
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.json", data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("error %T does not match ErrInvalidPolicy: %v", err, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error message has several lines: %q", err.Error())
			}
			if p != nil {
				t.Fatal("Parse returned a policy and an error")
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted policy does not validate: %v", err)
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse("fuzz.json", out)
		if err != nil {
			t.Fatalf("marshalled policy does not parse: %v\n%s", err, out)
		}
		if diff := cmp.Diff(p, q); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}

		cgroups, devices, matchers := 0, 0, 0
		for _, c := range p.Classes {
			for _, m := range c.Match {
				matchers++
				if m.Cgroup != "" && m.Cgroup != "/" {
					cgroups++
				}
				if m.Device != "" || m.DeviceProcess != "" {
					devices++
				}
			}
		}
		tab, err := p.Compile(root)
		if cgroups > 0 {
			if err != nil && !errors.Is(err, ErrCgroupNotFound) {
				t.Fatalf("compile: %v", err)
			}
			return
		}
		// Device globs are resolved against this machine's /dev, and the
		// device sets' limits count ranges after that: Compile may refuse
		// a policy Parse took, but only with a policy error that says why.
		var perr *Error
		if devices > 0 && err != nil {
			if !errors.As(err, &perr) || perr.Msg == "" {
				t.Fatalf("compile: %v (%T), want a *policy.Error", err, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		if len(tab.Rules) != matchers || len(tab.Classes) != len(p.Classes) || len(tab.Names) != len(p.Classes) {
			t.Fatalf("table has %d rules, %d classes, %d names; policy %d matchers, %d classes",
				len(tab.Rules), len(tab.Classes), len(tab.Names), matchers, len(p.Classes))
		}
		last := uint32(len(p.Classes) - 1)
		for i, r := range tab.Rules {
			if r.Kinds == 0 || r.ClassID >= last || i > 0 && r.ClassID < tab.Rules[i-1].ClassID {
				t.Fatalf("rule %d is %+v", i, r)
			}
		}
	})
}
