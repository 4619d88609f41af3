package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// usageErr is a flag or argument error; its line names the help to read.
type usageErr struct {
	err  error
	path string
}

func (e *usageErr) Error() string { return fmt.Sprintf("%v: see `%s --help`", e.err, e.path) }
func (e *usageErr) Unwrap() error { return e.err }

// withUsageFix makes every flag and argument error of cmd and its
// subcommands one line that ends with the command's --help.
func withUsageFix(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageErr{err: err, path: c.CommandPath()} })
	for _, c := range append([]*cobra.Command{cmd}, cmd.Commands()...) {
		if c.Args == nil {
			continue
		}
		args := c.Args
		c.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return &usageErr{err: err, path: c.CommandPath()}
			}
			return nil
		}
	}
}
