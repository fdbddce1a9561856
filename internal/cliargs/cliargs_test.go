package cliargs

import "testing"

func TestNone(t *testing.T) {
	if err := None(nil); err != nil {
		t.Errorf("None(nil) = %v", err)
	}
	if err := None([]string{"10s", "extra"}); err == nil || err.Error() != `unexpected argument "10s"` {
		t.Errorf("None(10s extra) = %v, want the first named", err)
	}
}
