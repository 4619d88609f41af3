package main

import (
	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/version"
)

// addVersion gives writctl --version and a version subcommand (the
// server's version is in `writctl status`).
func addVersion(root *cobra.Command) {
	text := version.Get().Text("writctl", "")
	root.Version = version.Get().String()
	root.SetVersionTemplate(text)
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the build (module version, commit, date); the server's is in `writctl status`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write([]byte(text))
			return err
		},
	})
}
