package main

import (
	"github.com/spf13/cobra"

	"conch/config"
)

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show configuration"}
	cmd.AddCommand(&cobra.Command{
		Use:   "defaults",
		Short: "Print the embedded default configuration (a starting point for conch.toml)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := a.stdout.Write(config.Default())
			return err
		},
	})
	return cmd
}
