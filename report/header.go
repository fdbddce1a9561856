package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotlane/hotlane/version"
)

// SchemaVersion is the version of the JSON documents hotlane writes. It
// changes when a field is renamed, removed or changes meaning; adding a
// field does not change it. docs/json.md describes the shared fields.
const SchemaVersion = 1

// Header is what every JSON document hotlane writes begins with, whatever
// the command: embedded first in each command's result, so its fields sit
// at the top level and a fleet's collector can read any of them alike.
type Header struct {
	SchemaVersion int    `json:"schema_version"`
	Command       string `json:"command"` // "verify", "probe ioctl", …
	Hotlane       string `json:"hotlane_version"`
	Host          string `json:"host"`   // the node name, as uname(2) gives it
	Kernel        string `json:"kernel"` // the kernel release, as uname -r prints it
	// StartedAt is when the measurement began (wall clock, UTC), Elapsed
	// how long it ran: for a stats line, since the scheduler started.
	StartedAt time.Time     `json:"started_at"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	// Losses lists every kind of event the command can drop, zero counts
	// included: an empty list means it cannot drop any.
	Losses Losses `json:"losses"`
	// Interrupted says a signal ended the measurement before the
	// duration it was asked to run, Planned (0: until stopped, when a
	// signal is the normal end and never an interruption).
	Interrupted bool          `json:"interrupted"`
	Planned     time.Duration `json:"planned_ns,omitempty"`
}

// NewHeader starts the header of command's document at started, with this
// machine's name and kernel release.
func NewHeader(command string, started time.Time) Header {
	h := Header{
		SchemaVersion: SchemaVersion,
		Command:       command,
		Hotlane:       version.Read().String(),
		StartedAt:     started.UTC().Round(time.Millisecond),
		Losses:        Losses{},
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		h.Host = unix.ByteSliceToString(u.Nodename[:])
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	} else if name, err := os.Hostname(); err == nil {
		h.Host = name
	}
	return h
}

// Finish sets how long the measurement ran and what it lost.
func (h *Header) Finish(elapsed time.Duration, losses Losses) {
	h.Elapsed = elapsed
	if losses == nil {
		losses = Losses{}
	}
	h.Losses = losses
}

// MarshalJSON writes no losses as [], never null: a reader tells "none
// possible" from "not reported" by the key alone.
func (l Losses) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]Loss(l))
}

// HeaderKeys are the JSON keys every document has (docs/json.md).
func HeaderKeys() []string {
	return []string{"schema_version", "command", "hotlane_version", "host", "kernel", "started_at", "elapsed_ns", "losses", "interrupted"}
}

// CheckHeader says what is wrong with the header of doc, a JSON document
// command wrote, or nil: every key present, the schema version current,
// the command, host and kernel named, a start time and no null losses.
func CheckHeader(doc []byte, command string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(doc, &fields); err != nil {
		return fmt.Errorf("not one JSON object: %w", err)
	}
	var missing []string
	for _, k := range HeaderKeys() {
		if _, ok := fields[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	var h Header
	if err := json.Unmarshal(doc, &h); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	switch {
	case h.SchemaVersion != SchemaVersion:
		return fmt.Errorf("schema_version %d, want %d", h.SchemaVersion, SchemaVersion)
	case h.Command != command:
		return fmt.Errorf("command %q, want %q", h.Command, command)
	case h.Host == "" || h.Kernel == "" || h.Hotlane == "":
		return fmt.Errorf("host %q, kernel %q, hotlane_version %q: want all three", h.Host, h.Kernel, h.Hotlane)
	case h.StartedAt.IsZero() || h.Elapsed < 0:
		return fmt.Errorf("started_at %v, elapsed_ns %d", h.StartedAt, h.Elapsed)
	case string(fields["losses"]) == "null":
		return errors.New("losses is null, want a list")
	}
	return nil
}
