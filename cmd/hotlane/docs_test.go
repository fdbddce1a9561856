package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/policy"
	"github.com/hotlane/hotlane/sched"
)

// cliCommands are the command lines whose help docs/cli.md holds.
var cliCommands = [][]string{
	{"doctor"}, {"run"}, {"verify"}, {"probe", "ioctl"}, {"probe", "dma"}, {"probe", "xdp"},
	{"workload"}, {"bench"}, {"bench", "hooks"}, {"vm"}, {"completion"},
}

const cliReference = "../../docs/cli.md"

// docs/cli.md is every command's -h, as the binary prints it: the
// reference cannot drift from the flags. HOTLANE_UPDATE_DOCS=1 rewrites it.
func TestCLIReferenceIsCurrent(t *testing.T) {
	bin := hotlaneBinary(t)
	var b strings.Builder
	b.WriteString("# hotlane command reference\n\nGenerated from each command's `-h` (`HOTLANE_UPDATE_DOCS=1 go test ./cmd/hotlane -run TestCLIReferenceIsCurrent`); a test fails when it differs from the binary.\n")
	for _, cmd := range cliCommands {
		// Defaults that come from the environment take their plain value.
		stdout, stderr, code := runCLIEnv(t, bin, []string{"HOTLANE_RESULTS=", "HOTLANE_CACHE=/nonexistent"}, append(cmd, "-h")...)
		if code != exitOK || stdout == "" {
			t.Fatalf("hotlane %s -h: exit %d, stdout %q, stderr %q; want the help on standard output", strings.Join(cmd, " "), code, stdout, stderr)
		}
		fmt.Fprintf(&b, "\n## hotlane %s\n\n```text\n%s```\n", strings.Join(cmd, " "), stdout)
	}
	if os.Getenv("HOTLANE_UPDATE_DOCS") == "1" {
		if err := safefile.WriteFile(cliReference, []byte(b.String()), safefile.Readable); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(cliReference)
	if err != nil || string(have) != b.String() {
		t.Errorf("%s is not the binary's help (%v): regenerate it with HOTLANE_UPDATE_DOCS=1 go test ./cmd/hotlane -run TestCLIReferenceIsCurrent", cliReference, err)
	}
}

// userDocs are the documents whose hotlane command lines
// TestREADMEFlagsAreAccepted checks: the README and the pages it sends a
// reader to for the rest (docs/cli.md is the binary's own help).
var userDocs = []string{
	"../../README.md", "../../docs/design.md", "../../docs/metrics.md", "../../docs/policy.md",
	"../../docs/results.md", "../../docs/testing.md",
}

// Every flag the README, or a page of docs/ it links to, gives a hotlane
// command is one that command accepts (its -h lists it).
func TestREADMEFlagsAreAccepted(t *testing.T) {
	bin := hotlaneBinary(t)
	accepted := map[string][]string{}
	// "  --name", "  -q", or "  -d, --duration": a one-letter spelling
	// listed with its long flag.
	flagLine := regexp.MustCompile(`(?m)^  (?:-([a-zA-Z]), )?--?([a-z0-9-]+)`)
	for _, cmd := range cliCommands {
		stdout, _, _ := runCLI(t, bin, append(cmd, "-h")...)
		name := strings.Join(cmd, " ")
		for _, m := range flagLine.FindAllStringSubmatch(stdout, -1) {
			accepted[name] = append(accepted[name], m[2])
			if m[1] != "" {
				accepted[name] = append(accepted[name], m[1])
			}
		}
	}
	// A command line in the README: "hotlane CMD [SUB] ..." up to the end
	// of its code span or line; flags after "--" belong to the guest.
	use := regexp.MustCompile("hotlane ((?:probe |bench )?[a-z]+)([^`\\n]*)")
	flagRE := regexp.MustCompile(`(?:^|\s|\[)--([a-z][a-z0-9-]*)`)
	for _, doc := range userDocs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(doc, "../../")
		checked := 0
		for _, m := range use.FindAllStringSubmatch(string(text), -1) {
			cmd, rest := m[1], m[2]
			flags, ok := accepted[cmd]
			if !ok {
				continue // prose: "hotlane is", "hotlane vm's"...
			}
			if i := strings.Index(rest, " -- "); i >= 0 {
				rest = rest[:i]
			}
			for _, f := range flagRE.FindAllStringSubmatch(rest, -1) {
				checked++
				if f[1] != "version" && !slices.Contains(flags, f[1]) {
					t.Errorf("%s: `hotlane %s ... --%s`: %s has no such flag (%q)", name, cmd, f[1], cmd, strings.TrimSpace(m[0]))
				}
			}
		}
		t.Logf("%s: %d flags on hotlane command lines, all accepted", name, checked)
		// The README shows every way of using hotlane: fewer means the
		// pattern no longer finds its command lines.
		if name == "README.md" && checked < 20 {
			t.Errorf("checked only %d flags in the README: the pattern no longer finds its command lines", checked)
		}
	}
}

// The bound the docs quote is the one `hotlane run` prints at the
// defaults and HZ=250 (the VM kernel's): design.md shows the whole
// startup line, the README its first figure.
func TestDocsQuoteThePrintedBound(t *testing.T) {
	table, err := policy.Default().Compile("")
	if err != nil {
		t.Fatal(err)
	}
	bound := sched.Config{Table: table}.Bound(4 * time.Millisecond)
	want := map[string]string{
		"../../docs/design.md": "hotlane: starvation guard: " + bound.String() + "\n",
		"../../README.md":      fmt.Sprintf("(%d ms with up to 8 normal tasks waiting per CPU, at the\ndefaults and HZ=250)", bound.For(8).Milliseconds()),
	}
	for doc, line := range want {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), line) {
			t.Errorf("%s does not quote the bound hotlane run prints at the defaults; want %q", doc, line)
		}
	}
}
