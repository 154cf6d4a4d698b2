package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"conch/sandbox/sandboxd"
)

// sandboxInitCmd is what a Kubernetes sandbox pod runs: with --install DIR
// (its init container) conch copies itself into DIR; without it, it is the
// sandbox container's process 1 (keeps it alive, reaps orphans).
func (a *app) sandboxInitCmd() *cobra.Command {
	var install string
	cmd := &cobra.Command{
		Use:    "sandbox-init",
		Short:  "Be process 1 of a sandbox pod, or copy conch into DIR with --install DIR (started by the Kubernetes backend)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if install != "" {
				dst, err := sandboxd.InstallSelf(install, "conch")
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "installed", dst)
				return nil
			}
			return sandboxd.Init(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&install, "install", "", "copy this executable into `DIR` as conch and exit")
	return cmd
}
