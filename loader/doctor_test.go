package loader

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hotlane/hotlane/internal/errtest"
)

func TestDoctorRequestRequired(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  DoctorRequest
		want []string
		err  string // in the error; "" for none
	}{
		{"nothing required", DoctorRequest{}, nil, ""},
		{"lists, aliases and repeats", DoctorRequest{Require: []string{"sched_ext,root", "BTF", "caps"}}, []string{FeatureSchedExt, FeatureCaps, FeatureBTF}, ""},
		{"an unknown feature", DoctorRequest{Require: []string{"sched-ext"}}, nil, `unknown feature "sched-ext"; valid names: caps, btf`},
		{"an argument left over", DoctorRequest{Args: []string{"sched_ext"}}, nil, `unexpected argument "sched_ext"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.req.Required()
			if !errtest.Says(err, tt.err) || !slices.Equal(got, tt.want) {
				t.Errorf("Required() = %v, %v; want %v, %q", got, err, tt.want, tt.err)
			}
		})
	}
	if _, err := (DoctorRequest{Require: []string{"bogus"}}).Required(); !errors.Is(err, ErrUnknownFeature) {
		t.Errorf("Required() of an unknown feature = %v, want ErrUnknownFeature", err)
	}
}

func TestDoctorRequestOptions(t *testing.T) {
	if !(DoctorRequest{NoMount: true}).Options().NoMount || (DoctorRequest{}).Options().NoMount {
		t.Error("Options() does not carry NoMount")
	}
}

func TestDoctorRequestWrite(t *testing.T) {
	feats := &Features{Checks: []Feature{{Name: FeatureBTF, Available: true}}}
	var text, js strings.Builder
	if err := (DoctorRequest{}).Write(&text, feats); err != nil || !strings.Contains(text.String(), "btf") || strings.HasPrefix(text.String(), "{") {
		t.Errorf("text: %q, %v", text.String(), err)
	}
	if err := (DoctorRequest{JSON: true}).Write(&js, feats); err != nil || !strings.HasPrefix(js.String(), "{") {
		t.Errorf("JSON: %q, %v", js.String(), err)
	}
}

func TestUnmet(t *testing.T) {
	feats := &Features{Checks: []Feature{{Name: FeatureBTF, Available: true}, {Name: FeatureSchedExt}}}
	if got := Unmet(feats, []string{FeatureBTF}); got != "" {
		t.Errorf("Unmet() with every feature there = %q", got)
	}
	if got, want := Unmet(feats, []string{FeatureSchedExt, FeatureBTF, FeatureXDP}), "required feature(s) missing: sched_ext, xdp"; got != want {
		t.Errorf("Unmet() = %q, want %q (a feature not probed counts as missing)", got, want)
	}
}
