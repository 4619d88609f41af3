package main

import "github.com/spf13/cobra"

// withUsageFix makes every flag and argument error of cmd and its
// subcommands one line (exit 2) that names the failing command's --help.
func withUsageFix(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fail(exitUsage, "%v: see `%s --help`", err, c.CommandPath())
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(c *cobra.Command, a []string) error {
				if err := args(c, a); err != nil {
					return fail(exitUsage, "%v: see `%s --help`", err, c.CommandPath())
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
}
