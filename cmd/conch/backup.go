package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) backupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the store to FILE, while conch runs",
		Long: `Write a consistent copy of the store (conversations, facts, sandboxes,
events) to FILE. It is safe while conch up runs. To restore, stop conch and
put the copy in place of <data_dir>/conch.db.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, _, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.Backup(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "store copied to %s\n", args[0])
			return nil
		},
	}
}
