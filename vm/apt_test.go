package vm

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
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

// TestHostMirror holds the runner's mirror lookup and scripts/deps.sh's to
// the same answer over the source layouts Debian machines have: deb822
// only (a new bookworm machine), one-line only (an upgraded one), both, a
// third-party source listed first, and none usable.
func TestHostMirror(t *testing.T) {
	const (
		securityDeb822 = "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
		debianDeb822   = "Types: deb\n# a comment\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n"
		thirdParty     = "Types: deb\nURIs: https://deb.vendor.example/node_20.x\nSuites: nodistro\nComponents: main\n"
		oneLine        = "deb http://other.example/debian-security bookworm-security main\n" +
			"deb [arch=amd64 signed-by=/k.gpg] http://other.example/debian bookworm main\n"
	)
	for _, tc := range []struct {
		name  string
		files map[string]string // relative to the fixture's etc directory
		want  string            // "" for none
	}{
		{"deb822 only", map[string]string{"sources.list.d/debian.sources": securityDeb822 + debianDeb822}, "http://mirror.example/debian"},
		{"one-line only", map[string]string{"sources.list": oneLine}, "http://other.example/debian"},
		{"one-line in sources.list.d", map[string]string{"sources.list.d/debian.list": oneLine}, "http://other.example/debian"},
		{"third party first", map[string]string{"sources.list.d/a-vendor.sources": thirdParty, "sources.list.d/debian.sources": debianDeb822}, "http://mirror.example/debian"},
		{"security only", map[string]string{"sources.list.d/debian.sources": securityDeb822}, ""},
		{"nothing", map[string]string{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etc := t.TempDir()
			if err := os.MkdirAll(filepath.Join(etc, "sources.list.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(etc, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := hostMirror(context.Background(), etc)
			if tc.want == "" {
				if err == nil {
					t.Errorf("hostMirror = %q, want an error", got)
				}
			} else if err != nil || got != tc.want {
				t.Errorf("hostMirror = %q, %v; want %q", got, err, tc.want)
			}

			cmd := exec.Command("bash", "../scripts/deps.sh", "--print-mirror")
			cmd.Env = append(os.Environ(), "HOTLANE_APT_ETC="+etc)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			script := strings.TrimSpace(string(out))
			if tc.want == "" {
				if err == nil || !strings.Contains(stderr.String(), "no Debian mirror") {
					t.Errorf("deps.sh --print-mirror = %q, %v, stderr %q; want exit 1 naming the problem", script, err, stderr.String())
				}
			} else if err != nil || script != tc.want {
				t.Errorf("deps.sh --print-mirror = %q, %v (%s); want %q", script, err, stderr.String(), tc.want)
			}
		})
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
