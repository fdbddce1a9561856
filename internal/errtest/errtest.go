// Package errtest holds what tests of errors meant for users share.
package errtest

import "strings"

// Says reports whether err is nil and want "", or err's message holds
// want: tests pin what an error tells the user, not its whole wording.
func Says(err error, want string) bool {
	if err == nil || want == "" {
		return (err == nil) == (want == "")
	}
	return strings.Contains(err.Error(), want)
}
