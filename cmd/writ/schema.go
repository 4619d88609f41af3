package main

import "github.com/spf13/cobra"

// schemaCmd groups the commands about a schema as a whole.
func (c *cli) schemaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "compare two schemas (diff) or draw their machines (graph)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &usageErr{err: errNoSubcommand, path: cmd.CommandPath()}
		},
	}
	var asJSON bool
	diff := &cobra.Command{
		Use:   "diff [--json] OLD NEW",
		Short: "which changes between two schema directories are compatible with a rolling upgrade; exits 1 on any BLOCKED or INCOMPLETE finding",
		Args:  cobra.ExactArgs(2),
		Run:   func(_ *cobra.Command, args []string) { c.code = cmdSchemaDiff(args, asJSON, c.out, c.errw) },
	}
	diff.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.AddCommand(diff, c.graphCmd())
	return cmd
}
