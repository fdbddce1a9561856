// Package cstr converts the fixed-size, NUL-terminated char arrays of BPF
// records (task comms, device names, exit reasons) to Go strings.
package cstr

// String returns the C string held in b: the bytes before the first NUL,
// or all of b when it has none (a name that fills its array exactly).
// bpf2go renders C's char as int8, hand-written mirrors use byte; both
// are accepted so that each caller converts nothing itself.
func String[T ~byte | ~int8](b []T) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}
