// Package cliargs holds the rules about command-line arguments that the
// requests of several commands share.
package cliargs

import "fmt"

// None is an error naming the first of args, the arguments left after a
// command's flags, when the command takes none: a misspelt flag value or
// a missing -- shows up here.
func None(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	return nil
}
