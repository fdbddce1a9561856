package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A header names this machine and build, and CheckHeader finds each way a
// document can fall short of the shared shape.
func TestHeader(t *testing.T) {
	h := NewHeader("verify", time.Now().Add(-time.Second))
	h.Finish(time.Second, nil)
	var b bytes.Buffer
	if err := WriteJSON(&b, struct {
		Header
		Extra int `json:"extra"`
	}{Header: h, Extra: 1}); err != nil {
		t.Fatal(err)
	}
	if err := CheckHeader(b.Bytes(), "verify"); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if !strings.Contains(b.String(), `"losses": []`) {
		t.Errorf("no losses must read [], not null:\n%s", b.String())
	}
	for _, c := range []struct {
		doc, want string
	}{
		{`[]`, "not one JSON object"},
		{`{"schema_version": 1}`, "missing command, hotlane_version"},
		{strings.Replace(b.String(), `"schema_version": 1`, `"schema_version": 0`, 1), "schema_version 0"},
		{strings.Replace(b.String(), `"losses": []`, `"losses": null`, 1), "losses is null"},
		{strings.Replace(b.String(), `"host": "`+h.Host+`"`, `"host": ""`, 1), "want all three"},
	} {
		if err := CheckHeader([]byte(c.doc), "verify"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckHeader(%.60q…): %v, want %q", c.doc, err, c.want)
		}
	}
	if err := CheckHeader(b.Bytes(), "bench"); err == nil || !strings.Contains(err.Error(), `command "verify", want "bench"`) {
		t.Errorf("another command's document: %v", err)
	}
}
