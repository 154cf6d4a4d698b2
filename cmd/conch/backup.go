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
run conch restore FILE.`,
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

func (a *app) restoreCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Put a backup (conch backup FILE) in place of the store; conch must be stopped",
		Long: `Put a backup made by conch backup in place of the data dir's store. Refused while
a conch runs on the data dir. The store it replaces is kept in <data_dir>/backups/;
a backup made by an older conch is upgraded (kept there as it was, too).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.restore(cmd.Context(), args[0]) },
	}
}
