// Package jsonpos decodes hotlane's JSON input files strictly and reports
// errors where an editor would show them: file:line:column.
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
	// Unmarshal checks the syntax of the whole text first and reports
	// offsets from its start.
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off := se.Offset
			if off > 0 && !strings.HasPrefix(se.Error(), "unexpected end") {
				off-- // Offset is just past the offending byte
			}
			return at(off, "invalid JSON: "+strings.TrimPrefix(se.Error(), "json: "))
		}
		return fmt.Errorf("%s: invalid JSON: %w", name, err)
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
