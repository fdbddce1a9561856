package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Case is one checked claim for a CI system: a bound clause, say. A case
// with a Failure failed; with an Error it could not be checked.
type Case struct {
	// Suite groups cases (a JUnit testsuite, e.g. "hotlane verify"),
	// Class is what was checked (e.g. "inference"), Name the claim
	// (e.g. "p99<=5ms").
	Suite, Class, Name string
	Time               time.Duration
	// Failure and Error are messages for people; Output is detail (the
	// measured value and how it was read).
	Failure, Error, Output string
}

// junitSuites is the JUnit XML report layout most CI systems read
// (Jenkins, GitLab, GitHub actions that publish test reports).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Hostname  string      `xml:"hostname,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// WriteJUnit writes cases as a JUnit XML report named name, one testsuite
// per Case.Suite in order of first appearance; started is when the run
// began (the suites' timestamp).
func WriteJUnit(w io.Writer, name string, started time.Time, cases []Case) error {
	host, _ := os.Hostname()
	out := junitSuites{Name: name}
	index := map[string]int{}
	var total time.Duration
	for _, c := range cases {
		i, ok := index[c.Suite]
		if !ok {
			i = len(out.Suites)
			index[c.Suite] = i
			out.Suites = append(out.Suites, junitSuite{Name: c.Suite, Hostname: host})
			if !started.IsZero() {
				out.Suites[i].Timestamp = started.UTC().Format("2006-01-02T15:04:05")
			}
		}
		s := &out.Suites[i]
		jc := junitCase{Name: c.Name, ClassName: strings.TrimSpace(c.Suite + "." + c.Class), Time: seconds(c.Time), SystemOut: c.Output}
		switch {
		case c.Error != "":
			jc.Error = &junitMessage{Message: c.Error, Type: "error", Text: c.Error}
			s.Errors++
			out.Errors++
		case c.Failure != "":
			jc.Failure = &junitMessage{Message: c.Failure, Type: "bound", Text: c.Failure}
			s.Failures++
			out.Failures++
		}
		s.Cases = append(s.Cases, jc)
		s.Tests++
		out.Tests++
		total = max(total, c.Time)
	}
	for i := range out.Suites {
		out.Suites[i].Time = seconds(total)
	}
	out.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteGitHubAnnotations writes one GitHub Actions workflow command per
// case that failed or could not be checked (::error), so that the run's
// summary shows them, and a ::notice per case that passed. GitHub reads
// them from standard output; GITHUB_ACTIONS=true says a step runs there.
func WriteGitHubAnnotations(w io.Writer, cases []Case) error {
	for _, c := range cases {
		level, msg := "notice", "passed"
		switch {
		case c.Error != "":
			level, msg = "error", c.Error
		case c.Failure != "":
			level, msg = "error", c.Failure
		}
		if c.Output != "" && level == "notice" {
			msg += ": " + c.Output
		}
		title := strings.TrimSpace(c.Suite + ": " + c.Class + " " + c.Name)
		if _, err := fmt.Fprintf(w, "::%s title=%s::%s\n", level, escapeProperty(title), escapeData(msg)); err != nil {
			return err
		}
	}
	return nil
}

// InGitHubActions reports whether this runs as a GitHub Actions step.
func InGitHubActions() bool { return os.Getenv("GITHUB_ACTIONS") == "true" }

// escapeData and escapeProperty escape a workflow command's message and
// property values as the Actions runner expects.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
