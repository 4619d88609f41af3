package main

import (
	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/version"
)

// addVersion gives writd --version and a version subcommand.
func addVersion(root *cobra.Command, fingerprint string) {
	text := version.Get().Text("writd", fingerprint)
	root.Version = version.Get().String()
	root.SetVersionTemplate(text)
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the build (module version, commit, date) and the embedded schema's fingerprint",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write([]byte(text))
			return err
		},
	})
}
