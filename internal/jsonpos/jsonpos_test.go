package jsonpos

import (
	"strings"
	"testing"
)

func TestLineCol(t *testing.T) {
	data := []byte("{\n  \"é\": 1,\n  \"x\": 2}")
	for _, tc := range []struct{ off, line, col int }{
		{0, 1, 1},
		{2, 2, 1},
		{9, 2, 7},    // columns count characters: é is two bytes, one column
		{-5, 1, 1},   // clamped to the text
		{999, 3, 10}, // past the end: the end
	} {
		if line, col := LineCol(data, tc.off); line != tc.line || col != tc.col {
			t.Errorf("LineCol(%d) = %d:%d, want %d:%d", tc.off, line, col, tc.line, tc.col)
		}
	}
}

func TestCheckSyntax(t *testing.T) {
	for _, tc := range []struct {
		in      string
		ok      bool
		off     int
		message string
	}{
		{`{"a": [1, 2]}`, true, 0, ""},
		// The offending byte itself, not the one after it.
		{`{"a": x}`, false, 6, "invalid character 'x'"},
		{"{\"a\": 1,\n}", false, 9, "invalid character '}'"},
		// A truncated text: the error is at its end.
		{`{"a": [1`, false, 8, "unexpected end of JSON input"},
	} {
		off, msg, ok := CheckSyntax([]byte(tc.in))
		if ok != tc.ok || (!ok && (off != tc.off || !strings.Contains(msg, tc.message) || !strings.HasPrefix(msg, "invalid JSON: "))) {
			t.Errorf("CheckSyntax(%q) = %d, %q, %v; want %d, %q, %v", tc.in, off, msg, ok, tc.off, tc.message, tc.ok)
		}
	}
}

func TestTokenStart(t *testing.T) {
	data := []byte(`{"a" : 1 ,  "b": 2}`)
	for off, want := range map[int]int{4: 7, 8: 12, 0: 0, 19: 19} {
		if got := TokenStart(data, off); got != want {
			t.Errorf("TokenStart(%d) = %d, want %d", off, got, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	valid := []string{"comm_prefix", "comm", "pid", "tgid", "cgroup", "sched_ext", "icmp", "icmpv6", "drop"}
	for key, want := range map[string]string{
		"comm_prefx": ` (did you mean "comm_prefix"?)`,
		"PID":        ` (did you mean "pid"?)`,  // case is not a typo
		"Drop":       ` (did you mean "drop"?)`, // nor even a different name
		"cgrp":       ` (did you mean "cgroup"?)`,
		"schedext":   ` (did you mean "sched_ext"?)`,
		"icpm":       ` (did you mean "icmp"?)`, // two letters swapped: one edit
		"icmp6":      ` (did you mean "icmp"?)`,
		"priority":   ``,
		"bad":        ``, // two edits from "pid", but that is most of it
	} {
		if got := Suggest(key, valid); got != want {
			t.Errorf("Suggest(%q) = %q; want %q", key, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"icmp", "icmp", 0},
		{"icpm", "icmp", 1},
		{"udp", "", 3},
		{"kitten", "sitting", 3},
		{"ca", "abc", 3}, // OSA, not full Damerau: no edit of a swapped pair
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
