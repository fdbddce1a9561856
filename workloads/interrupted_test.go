package workloads

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/report"
	"github.com/hotlane/hotlane/verify"
)

// A bench a signal cut short reports its rounds but no verdict: the text
// says INTERRUPTED, the JSON "interrupted" with pass false, and every CI
// case is an error, even where the bound held.
func TestReportInterrupted(t *testing.T) {
	bounds, err := verify.ParseBounds("inference:p99<=1s", "inference")
	if err != nil {
		t.Fatal(err)
	}
	rep := NewReport(testStart, testRuns(), nil, ScxSimple, bounds)
	if !rep.Pass || rep.Verdict != report.VerdictPass {
		t.Fatalf("the test's runs do not pass (pass %v, verdict %s): nothing to interrupt", rep.Pass, rep.Verdict)
	}
	rep.Interrupt()
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "verdict: INTERRUPTED") {
		t.Errorf("text report:\n%s", text.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Interrupted bool   `json:"interrupted"`
		Pass        bool   `json:"pass"`
		Verdict     string `json:"verdict"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Interrupted || doc.Pass || doc.Verdict != "interrupted" {
		t.Errorf("JSON: interrupted %v, pass %v, verdict %q", doc.Interrupted, doc.Pass, doc.Verdict)
	}
	for _, c := range rep.Cases(time.Second) {
		if c.Error == "" || c.Failure != "" {
			t.Errorf("case %s %s: error %q, failure %q: want the interruption as an error", c.Class, c.Name, c.Error, c.Failure)
		}
	}
}
