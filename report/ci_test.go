package report

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

func ciCases() []Case {
	return []Case{
		{Suite: "hotlane verify", Class: "inference", Name: "p99<=1ms", Time: 2 * time.Second, Output: "p99 ≤ 480µs, within 1ms"},
		{Suite: "hotlane verify", Class: "inference", Name: "max<=2ms", Time: 2 * time.Second, Failure: "inference max<=2ms failed: max 7.1ms, over 2ms", Output: "max 7.1ms, over 2ms"},
		{Suite: "hotlane verify", Class: "normal/wait", Name: "p50<=10ms", Time: 2 * time.Second, Error: "no samples: checked against nothing"},
	}
}

// The JUnit file is XML a CI system reads back: one test case per case,
// counts that add up, a failure and an error carrying their messages.
func TestWriteJUnit(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJUnit(&b, "hotlane", time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), ciCases()); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name      string `xml:"name,attr"`
			Tests     int    `xml:"tests,attr"`
			Timestamp string `xml:"timestamp,attr"`
			Cases     []struct {
				Name      string `xml:"name,attr"`
				ClassName string `xml:"classname,attr"`
				Failure   *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
				Error *struct {
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("not XML: %v\n%s", err, b.String())
	}
	if got.Tests != 3 || got.Failures != 1 || got.Errors != 1 || len(got.Suites) != 1 || got.Suites[0].Tests != 3 {
		t.Fatalf("counts %+v, want 3 tests, 1 failure, 1 error in one suite\n%s", got, b.String())
	}
	s := got.Suites[0]
	if s.Name != "hotlane verify" || s.Timestamp != "2026-11-23T10:00:00" {
		t.Errorf("suite %q at %q", s.Name, s.Timestamp)
	}
	c := s.Cases
	if c[0].Name != "p99<=1ms" || c[0].ClassName != "hotlane verify.inference" || c[0].Failure != nil || c[0].Error != nil {
		t.Errorf("passing case %+v", c[0])
	}
	if c[1].Failure == nil || !strings.Contains(c[1].Failure.Message, "max 7.1ms, over 2ms") {
		t.Errorf("failing case %+v, want the failure's message", c[1])
	}
	if c[2].Error == nil || c[2].Failure != nil || !strings.Contains(c[2].Error.Message, "no samples") {
		t.Errorf("unchecked case %+v, want an error", c[2])
	}
	if !strings.HasPrefix(b.String(), "<?xml") {
		t.Error("no XML declaration")
	}
}

// One workflow command per case, errors for what failed or went
// unchecked, with the runner's escaping (a newline in a message must not
// end the command; a colon in the title must not end the property).
func TestWriteGitHubAnnotations(t *testing.T) {
	cases := ciCases()
	cases[1].Failure += "\nsecond line 100%"
	var b bytes.Buffer
	if err := WriteGitHubAnnotations(&b, cases); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{
		"::notice title=hotlane verify%3A inference p99<=1ms::passed: p99 ≤ 480µs, within 1ms",
		"::error title=hotlane verify%3A inference max<=2ms::inference max<=2ms failed: max 7.1ms, over 2ms%0Asecond line 100%25",
		"::error title=hotlane verify%3A normal/wait p50<=10ms::no samples: checked against nothing",
	}
	if len(lines) != len(want) {
		t.Fatalf("lines:\n%s", b.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
}
