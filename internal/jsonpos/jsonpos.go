// Package jsonpos decodes hotlane's JSON input files strictly and reports
// errors where an editor would show them (file:line:column), with a
// "did you mean" for a misspelt name. The task policy, the XDP policy and
// workload files share it, so that their messages read alike.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// LineCol converts a byte offset to a 1-based line and column, counting
// columns in characters as editors do.
func LineCol(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return line, 1 + utf8.RuneCount(before[lineStart:])
}

// Decode decodes data into v, rejecting unknown fields and trailing data.
// Errors name the file and, where the JSON decoder knows it, the line and
// column: "workload.json:3:14: unknown field \"rate\"".
func Decode(name string, data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("%s: empty file; write a JSON object", name)
	}
	at := func(off int64, msg string) error {
		line, col := LineCol(data, int(off))
		return fmt.Errorf("%s:%d:%d: %s", name, line, col, msg)
	}
	if off, msg, ok := CheckSyntax(data); !ok {
		return at(int64(off), msg)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return at(te.Offset, fmt.Sprintf("%s must be %s, not %s", te.Field, te.Type, te.Value))
		}
		// Unknown fields carry no offset; the decoder has just read the key.
		return at(dec.InputOffset(), strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// CheckSyntax checks the syntax of the whole text before anything is
// decoded: json.Unmarshal does, and unlike a Decoder it reports offsets
// from the start of the text. When data is not one JSON value it returns
// the offset of the offending byte (json.SyntaxError points just past it;
// at the end of a truncated text, the end) and a message such as
// "invalid JSON: invalid character 'x' looking for beginning of value".
func CheckSyntax(data []byte) (off int, msg string, ok bool) {
	var raw json.RawMessage
	err := json.Unmarshal(data, &raw)
	if err == nil {
		return 0, "", true
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		// Unmarshal into a RawMessage fails only on syntax; this is a
		// backstop without a position.
		return 0, "invalid JSON: " + err.Error(), false
	}
	off = int(se.Offset)
	if off > 0 && off <= len(data) && !strings.HasPrefix(se.Error(), "unexpected end") {
		off--
	}
	return off, "invalid JSON: " + strings.TrimPrefix(se.Error(), "json: "), false
}

// TokenStart returns where the token a json.Decoder reads next begins, given
// its InputOffset: past the blanks, commas and colons between tokens, which
// the offset does not count yet.
func TokenStart(data []byte, off int) int {
	for off < len(data) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return off
}

// Suggest returns ` (did you mean "x"?)` for the valid name closest to s,
// ignoring case, when it is close enough to be a typo: at most 2 edits,
// and fewer than half of s ("bad" is not a typo of "pid"). Otherwise "".
func Suggest(s string, valid []string) string {
	lower := strings.ToLower(s)
	best, bestDist := "", 3
	for _, v := range valid {
		if d := editDistance(lower, v); d < bestDist && 2*d <= len(s) {
			best, bestDist = v, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the optimal-string-alignment distance between a and b,
// in bytes: Levenshtein's, plus swapping two neighbours as one edit, the
// commonest typo ("icpm" for "icmp").
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
