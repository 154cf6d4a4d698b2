package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"conch/sandbox/sandboxd"
)

// sandboxInitCmd is what a Kubernetes sandbox pod runs: with --install DIR
// (its init container) conch copies itself into DIR and makes DIR/skills
// (the skills volume's mount point); with --unpack DIR --hash H (an exec
// into its skills container) it makes DIR hold the tar on stdin; without
// either, it is a container's process 1 (keeps it alive, reaps orphans).
func (a *app) sandboxInitCmd() *cobra.Command {
	var install, unpack, hash string
	cmd := &cobra.Command{
		Use:    "sandbox-init",
		Short:  "Be process 1 of a sandbox pod, or copy conch into DIR with --install DIR (started by the Kubernetes backend)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case install != "":
				dst, err := sandboxd.InstallSelf(install, "conch")
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "installed", dst)
				return nil
			case unpack != "":
				changed, err := sandboxd.UnpackTree(unpack, hash, cmd.InOrStdin())
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), map[bool]string{true: "unpacked", false: "unchanged"}[changed], hash)
				return nil
			}
			return sandboxd.Init(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&install, "install", "", "copy this executable into `DIR` as conch and exit")
	cmd.Flags().StringVar(&unpack, "unpack", "", "make `DIR` hold the tar read from stdin and exit")
	cmd.Flags().StringVar(&hash, "hash", "", "with --unpack: the tree's hash (an unchanged one is not unpacked again)")
	return cmd
}
