// Package version says which build of hotlane is running: the module
// version and the commit it was built from, as the Go toolchain stamped
// them into the binary.
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info is what a build says about itself.
type Info struct {
	// Module is the main module's version: a tag or pseudo-version when
	// built with `go install module@version`, "(devel)" in a checkout.
	Module string `json:"module"`
	// Revision is the VCS commit, with Modified set when the work tree
	// had changes; both empty when the build did not stamp them.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Module: "unknown"}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Module: bi.Main.Version, Go: bi.GoVersion}
	if in.Module == "" {
		in.Module = "unknown"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is one line: "hotlane VERSION (commit REV[, modified], TIME) GO".
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hotlane %s", in.Module)
	if in.Revision != "" {
		fmt.Fprintf(&b, " (commit %s", in.Revision)
		if in.Modified {
			b.WriteString(", modified")
		}
		if in.Time != "" {
			fmt.Fprintf(&b, ", %s", in.Time)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " %s", in.Go)
	return b.String()
}
