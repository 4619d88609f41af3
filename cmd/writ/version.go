package main

import (
	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/version"
)

// versionText is the build and the embedded jobs schema's fingerprint.
func versionText() string {
	return version.Get().Text("writ", jobsgen.Catalog().Fingerprint())
}

func (c *cli) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the build (module version, commit, date) and the embedded schema's fingerprint (also --version)",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			_, _ = c.out.Write([]byte(versionText()))
		},
	}
}
