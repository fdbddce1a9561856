package loader

import (
	"io"
	"strings"

	"github.com/hotlane/hotlane/internal/cliargs"
)

// A DoctorRequest is what a doctor command line asks for, as given:
// Required checks it, Options and Write say how to probe and report, and
// Unmet whether the features it requires are there. Its errors name the
// command's flags, for they are what the user has to change.
type DoctorRequest struct {
	// Require are the --require values: feature names, each value
	// possibly a comma-separated list.
	Require []string
	NoMount bool
	// JSON asks for the findings as JSON instead of text.
	JSON bool
	// Args are the arguments left after the flags: none are taken.
	Args []string
}

// Required checks the arguments and returns the features required, by
// their names in Probe's report.
func (r DoctorRequest) Required() ([]string, error) {
	if err := cliargs.None(r.Args); err != nil {
		return nil, err
	}
	return ParseFeatureNames(r.Require)
}

// Options are how to probe.
func (r DoctorRequest) Options() ProbeOptions { return ProbeOptions{NoMount: r.NoMount} }

// Write writes feats to w as r asks: JSON or text.
func (r DoctorRequest) Write(w io.Writer, feats *Features) error {
	if r.JSON {
		return feats.WriteJSON(w)
	}
	return feats.WriteText(w)
}

// Unmet says which of the required features feats lacks; "" when it
// has them all.
func Unmet(feats *Features, required []string) string {
	missing := feats.Missing(required)
	if len(missing) == 0 {
		return ""
	}
	names := make([]string, len(missing))
	for i, m := range missing {
		names[i] = m.Name
	}
	return "required feature(s) missing: " + strings.Join(names, ", ")
}
