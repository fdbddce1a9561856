package hookbench

import (
	"errors"
	"slices"
	"testing"

	"github.com/hotlane/hotlane/internal/errtest"
)

func TestRequestConfig(t *testing.T) {
	for _, tt := range []struct {
		name  string
		req   Request
		kinds []Kind
		want  string // in the error; "" for none
	}{
		{"every kind by default", Request{}, Kinds(), ""},
		{"the kinds named, once each", Request{Hooks: "tp_btf,fentry,tp_btf"}, []Kind{TpBTF, FEntry}, ""},
		{"an unknown kind", Request{Hooks: "fentry,kfunc"}, nil, `--hooks: unknown hook kind "kfunc": want one of`},
		{"an argument left over", Request{Args: []string{"fentry"}}, nil, `unexpected argument "fentry"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.req.Config()
			if !errtest.Says(err, tt.want) || !slices.Equal(cfg.Kinds, tt.kinds) {
				t.Errorf("Config() = %v, %v; want kinds %v, error %q", cfg.Kinds, err, tt.kinds, tt.want)
			}
		})
	}
	cfg, err := Request{Calls: 1000, Rounds: 3}.Config()
	if err != nil || cfg.Calls != 1000 || cfg.Rounds != 3 {
		t.Errorf("Config() = %+v, %v; want 1000 calls in 3 rounds", cfg, err)
	}
	if _, err := (Request{Hooks: "kfunc"}).Config(); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("Config() of an unknown kind = %v, want ErrUnknownKind", err)
	}
}
