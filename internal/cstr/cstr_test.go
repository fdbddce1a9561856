package cstr

import "testing"

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{[]byte("infer\x00\x00\x00"), "infer"},
		{[]byte("infer\x00junk"), "infer"}, // what follows the NUL is not the name
		{[]byte("0123456789abcdef"), "0123456789abcdef"},
		{[]byte{0, 'x'}, ""},
		{nil, ""},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// bpf2go renders char arrays as int8: bytes above 0x7f (UTF-8 in a comm)
// are negative there and must come back as the same bytes.
func TestStringInt8(t *testing.T) {
	var comm [16]int8
	for i, c := range []byte("kw-é") {
		comm[i] = int8(c)
	}
	if got := String(comm[:]); got != "kw-é" {
		t.Errorf("String(int8 %v) = %q, want %q", comm, got, "kw-é")
	}
}
