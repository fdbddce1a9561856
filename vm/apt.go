package vm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/hotlane/hotlane/internal/safefile"
)

// knownSuites are the Debian suites the runner will fetch kernels from.
func knownSuites() []string {
	return []string{"bookworm-backports", "trixie", "trixie-backports", "forky", "sid", "unstable", "experimental"}
}

// ErrUnknownSuite is returned for a suite name Debian does not have.
var ErrUnknownSuite = errors.New("unknown Debian suite")

// apt runs apt-get and apt-cache against a private sources list and state
// directory under the cache, so the host's own apt configuration and
// package lists are never touched.
type apt struct {
	dir   string // root of the private apt tree
	suite string
}

func newApt(ctx context.Context, cacheDir, suite string) (*apt, error) {
	if !validSuite(suite) {
		return nil, fmt.Errorf("%w %q: use one of %s", ErrUnknownSuite, suite, strings.Join(knownSuites(), ", "))
	}
	a := &apt{dir: filepath.Join(cacheDir, "apt", suite), suite: suite}
	for _, d := range []string{"state/lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d", "debs"} {
		if err := os.MkdirAll(filepath.Join(a.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	mirror, err := hostMirror(ctx, "/etc/apt")
	if err != nil {
		return nil, err
	}
	src := fmt.Sprintf("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n", mirror, suite)
	if err := safefile.WriteFile(filepath.Join(a.dir, "etc/sources.list"), []byte(src), safefile.Readable); err != nil {
		return nil, err
	}
	return a, nil
}

func validSuite(s string) bool {
	for _, k := range knownSuites() {
		if s == k {
			return true
		}
	}
	return false
}

func (a *apt) options() []string {
	return []string{
		"-o", "Dir::State=" + filepath.Join(a.dir, "state"),
		"-o", "Dir::Cache=" + filepath.Join(a.dir, "cache"),
		"-o", "Dir::Etc::SourceList=" + filepath.Join(a.dir, "etc/sources.list"),
		"-o", "Dir::Etc::SourceParts=" + filepath.Join(a.dir, "etc/sources.list.d"),
		"-o", "Dir::Etc::Preferences=" + filepath.Join(a.dir, "etc/preferences"),
		"-o", "Dir::Etc::PreferencesParts=" + filepath.Join(a.dir, "etc/preferences.d"),
		"-o", "Debug::NoLocking=1",
		// apt drops to the _apt user for downloads, which cannot write
		// into a cache under root's home.
		"-o", "APT::Sandbox::User=root",
	}
}

func (a *apt) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	if _, err := exec.LookPath(tool); err != nil {
		return nil, fmt.Errorf("%s not found: the VM runner fetches kernels with apt, so it needs a Debian or Ubuntu host", tool)
	}
	cmd := exec.CommandContext(ctx, tool, append(a.options(), args...)...)
	cmd.Dir = filepath.Join(a.dir, "debs")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, lastLines(stderr.String(), 3))
	}
	return out, nil
}

func (a *apt) update(ctx context.Context) error {
	_, err := a.run(ctx, "apt-get", "-q", "update")
	return err
}

// newestPackage returns the highest-versioned package whose name matches
// the regular expression.
func (a *apt) newestPackage(ctx context.Context, regex string) (string, error) {
	out, err := a.run(ctx, "apt-cache", "search", "--names-only", regex)
	if err != nil {
		return "", err
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no package matching %q in %s", regex, a.suite)
	}
	sort.Slice(names, func(i, j int) bool { return versionLess(names[i], names[j]) })
	return names[len(names)-1], nil
}

// download fetches one package's .deb and returns its path.
func (a *apt) download(ctx context.Context, pkg string) (string, error) {
	debs := filepath.Join(a.dir, "debs")
	old, _ := filepath.Glob(filepath.Join(debs, pkg+"_*.deb"))
	for _, f := range old {
		os.Remove(f)
	}
	if _, err := a.run(ctx, "apt-get", "-q", "download", pkg); err != nil {
		return "", err
	}
	got, _ := filepath.Glob(filepath.Join(debs, pkg+"_*.deb"))
	if len(got) != 1 {
		return "", fmt.Errorf("apt-get download %s: expected one .deb in %s, found %d", pkg, debs, len(got))
	}
	return got[0], nil
}

// hostMirror returns the Debian mirror the host's own apt uses (sources
// under etcDir, normally /etc/apt), so the runner fetches from wherever
// this machine is allowed to. apt itself parses the sources, deb822 and
// one-line alike; the choice is the first source carrying a Debian suite
// that is not a security archive. scripts/deps.sh makes the same choice
// the same way, and a test holds the two to it.
func hostMirror(ctx context.Context, etcDir string) (string, error) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", errors.New("apt-get not found: the VM runner fetches kernels with apt, so it needs a Debian or Ubuntu host")
	}
	out, err := exec.CommandContext(ctx, "apt-get",
		"-o", "Dir::Etc="+etcDir,
		"-o", "Dir::Etc::SourceList="+filepath.Join(etcDir, "sources.list"),
		"-o", "Dir::Etc::SourceParts="+filepath.Join(etcDir, "sources.list.d"),
		"indextargets", "--no-release-info", "--format", "$(REPO_URI) $(RELEASE)").Output()
	if err != nil {
		return "", fmt.Errorf("apt-get indextargets (reading the apt sources under %s): %w", etcDir, err)
	}
	if m := pickMirror(string(out)); m != "" {
		return m, nil
	}
	return "", fmt.Errorf("no Debian mirror in the apt sources under %s (sources.list, sources.list.d/*.list or *.sources): the VM runner fetches kernels from the mirror the host's apt uses", etcDir)
}

// debianSuite matches the suites of Debian's main archive.
var debianSuite = regexp.MustCompile(`^(buster|bullseye|bookworm|trixie|forky|duke|sid|unstable|testing|stable|oldstable)(-updates|-backports)?$`)

// pickMirror chooses from apt-get indextargets lines "URI SUITE".
func pickMirror(indextargets string) string {
	for _, line := range strings.Split(indextargets, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.Contains(f[0], "security") || !debianSuite.MatchString(f[1]) {
			continue
		}
		return strings.TrimSuffix(f[0], "/")
	}
	return ""
}

// versionLess orders kernel package names by the version embedded in
// them (linux-binary-7.2.9+deb13-… < linux-binary-7.2.13+deb14-…),
// comparing digit runs numerically.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		da, ra := leadingDigits(a)
		db, rb := leadingDigits(b)
		switch {
		case da != "" && db != "":
			if len(strings.TrimLeft(da, "0")) != len(strings.TrimLeft(db, "0")) {
				return len(strings.TrimLeft(da, "0")) < len(strings.TrimLeft(db, "0"))
			}
			if da != db {
				return da < db
			}
			a, b = ra, rb
		case a[0] != b[0]:
			return a[0] < b[0]
		default:
			a, b = a[1:], b[1:]
		}
	}
	return len(a) < len(b)
}

func leadingDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i], s[i:]
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// fetchDeb downloads package pkg from suite through the private apt state
// (updating its package list first) and returns the .deb's path; why, if
// set, says what it is for in the progress line.
func fetchDeb(ctx context.Context, cacheDir, suite, pkg, why string, log io.Writer) (string, error) {
	a, err := newApt(ctx, cacheDir, suite)
	if err != nil {
		return "", err
	}
	if why != "" {
		why = " for " + why
	}
	fmt.Fprintf(log, "hotlane: fetching %s from %s%s (private apt state in %s)\n", pkg, suite, why, a.dir)
	if err := a.update(ctx); err != nil {
		return "", err
	}
	return a.download(ctx, pkg)
}

// FetchProgram downloads package pkg from suite through the private apt
// state, unpacks it into the cache once per version, and returns the path
// of the program at path inside it (e.g. "/usr/bin/prometheus"). Tests use
// it for outside tools newer than the host's release has, as the VM kernel
// is fetched; the host's own packages are never touched.
func FetchProgram(ctx context.Context, cacheDir, suite, pkg, path string, log io.Writer) (string, error) {
	if !debianPackageName.MatchString(pkg) {
		return "", fmt.Errorf("%q is not a Debian package name", pkg)
	}
	if cached, _ := filepath.Glob(filepath.Join(cacheDir, "tools", pkg+"_*", path)); len(cached) > 0 {
		sort.Strings(cached)
		return cached[len(cached)-1], nil
	}
	deb, err := fetchDeb(ctx, cacheDir, suite, pkg, "", log)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, "tools", strings.TrimSuffix(filepath.Base(deb), ".deb"))
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg-deb -x %s: %v: %s", deb, err, lastLines(string(out), 3))
	}
	if _, err := os.Stat(filepath.Join(tmp, path)); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("%s has no %s", filepath.Base(deb), path)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, path), nil
}
