package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/hotlane/hotlane/internal/safefile"
	"github.com/hotlane/hotlane/report"
)

// output is a file a command writes when its run ends. Its path is
// checked before the run, so that a bad one fails before anything is
// attached; the file itself is written only at the end, all at once,
// through safefile: a run that fails or is killed leaves an existing file
// as it was. The path "-" is standard output.
type output struct {
	path string
	perm fs.FileMode
}

// Who may read a command's output file; each command says which its
// output needs.
const (
	anyoneReads = safefile.Readable  // figures only
	ownerReads  = safefile.OwnerOnly // names the machine's tasks (comms, pids)
)

// stdoutPath names standard output as an output path, as most tools do.
const stdoutPath = "-"

// newOutput checks that path can be written with mode perm; "" means no
// output (nil).
func newOutput(path string, perm fs.FileMode) (*output, error) {
	switch path {
	case "":
		return nil, nil
	case stdoutPath:
		return &output{path: path}, nil
	}
	if err := safefile.Check(path); err != nil {
		return nil, err
	}
	return &output{path: path, perm: perm}, nil
}

// write writes the file from fn. A nil output writes nothing.
func (o *output) write(fn func(io.Writer) error) error {
	switch {
	case o == nil:
		return nil
	case o.path == stdoutPath:
		return fn(os.Stdout)
	}
	return safefile.Write(o.path, o.perm, fn)
}

// textOut is where a command writes its text report: standard output,
// unless its JSON goes there (--json -), which then has it alone; with
// -q as well, nowhere: JSON is all there is (machine-only).
func textOut(json *output, quiet bool) io.Writer {
	switch {
	case json == nil || json.path != stdoutPath:
		return os.Stdout
	case quiet:
		return io.Discard
	}
	return os.Stderr
}

// requireDir is safefile.CheckDir, then makes the directory, just before
// a long run that ends by writing into it.
func requireDir(flag, path string) error {
	if err := safefile.CheckDir(flag, path); err != nil {
		return err
	}
	return os.MkdirAll(path, 0o755)
}

// ciOutputs are the CI-native forms of a command's bound verdicts: a JUnit
// file (--junit) and GitHub Actions annotations (when GITHUB_ACTIONS=true).
type ciOutputs struct {
	junit *output
	text  io.Writer // where annotations go: beside the text report
}

// createCIOutputs creates the JUnit file, if asked, before the run.
func createCIOutputs(junitPath string, text io.Writer) (*ciOutputs, error) {
	if junitPath == stdoutPath {
		return nil, fmt.Errorf("--junit needs a file name (standard output carries the text report or the JSON)")
	}
	j, err := newOutput(junitPath, anyoneReads)
	if err != nil {
		return nil, err
	}
	return &ciOutputs{junit: j, text: text}, nil
}

// write writes what was asked for from the run's cases.
func (c *ciOutputs) write(name string, started time.Time, cases []report.Case) error {
	if err := c.junit.write(func(w io.Writer) error { return report.WriteJUnit(w, name, started, cases) }); err != nil {
		return err
	}
	if report.InGitHubActions() {
		return report.WriteGitHubAnnotations(c.text, cases)
	}
	return nil
}
