package errtest

import (
	"errors"
	"testing"
)

func TestSays(t *testing.T) {
	err := errors.New("--scx \"scx_bogus\" is not one of scx_simple, scx_qmap")
	for _, tt := range []struct {
		err  error
		want string
		says bool
	}{
		{nil, "", true},
		{err, "is not one of", true},
		{err, "", false},
		{nil, "is not one of", false},
		{err, "scx_central", false},
	} {
		if got := Says(tt.err, tt.want); got != tt.says {
			t.Errorf("Says(%v, %q) = %v, want %v", tt.err, tt.want, got, tt.says)
		}
	}
}
