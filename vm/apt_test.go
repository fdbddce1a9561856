package vm

import (
	"context"
	"errors"
	"io"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVersionLess(t *testing.T) {
	got := []string{
		"linux-binary-7.2.13+deb14-cloud-amd64",
		"linux-binary-7.2.9+deb13-cloud-amd64",
		"linux-binary-7.3.4+deb13-cloud-amd64",
		"linux-binary-7.2.12+deb13-cloud-amd64",
		"linux-binary-6.12.1+deb13-cloud-amd64",
	}
	sort.Slice(got, func(i, j int) bool { return versionLess(got[i], got[j]) })
	want := []string{
		"linux-binary-6.12.1+deb13-cloud-amd64",
		"linux-binary-7.2.9+deb13-cloud-amd64",
		"linux-binary-7.2.12+deb13-cloud-amd64",
		"linux-binary-7.2.13+deb14-cloud-amd64",
		"linux-binary-7.3.4+deb13-cloud-amd64",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestHostMirror(t *testing.T) {
	deb822 := `Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
# comment
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
`
	if got := mirrorFromDeb822(deb822); got != "http://mirror.example/debian" {
		t.Errorf("mirrorFromDeb822 = %q", got)
	}
	oneLine := "deb http://mirror.example/debian-security bookworm-security main\n" +
		"deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n"
	if got := mirrorFromOneLine(oneLine); got != "http://mirror.example/debian" {
		t.Errorf("mirrorFromOneLine = %q", got)
	}
}

func TestResolveKernelBadInput(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	for _, tc := range []struct {
		spec string
		want error
	}{
		{"/nonexistent/vmlinuz", ErrKernelNotFound},
		{"bogus-suite", ErrUnknownSuite},
		{"bogus/linux-binary-1.0", ErrUnknownSuite},
	} {
		if _, err := ResolveKernel(ctx, cache, tc.spec, io.Discard); !errors.Is(err, tc.want) {
			t.Errorf("ResolveKernel(%q) = %v, want %v", tc.spec, err, tc.want)
		}
	}
}
