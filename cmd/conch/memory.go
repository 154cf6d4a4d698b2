package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"conch"
	"conch/sqlite"
)

func (a *app) memoryCmd() *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "List or forget the facts conch remembers about a person",
	}
	cmd.PersistentFlags().StringVar(&user, "user", "", "the person, as channel:id (default: the terminal user, cli:<cli.user>)")
	open := func(cmd *cobra.Command) (*sqlite.DB, conch.UserKey, error) {
		cfg, err := a.loadOperatorConfig()
		if err != nil {
			return nil, conch.UserKey{}, err
		}
		u := conch.UserKey{Channel: conch.ChannelCLI, ID: conch.UserID(cfg.CLI.User)}
		if user != "" {
			ch, id, ok := strings.Cut(user, ":")
			if !ok || ch == "" || id == "" {
				return nil, u, fmt.Errorf("--user %q: want channel:id, e.g. matrix:@alice:example.org", user)
			}
			u = conch.UserKey{Channel: conch.ChannelName(ch), ID: conch.UserID(id)}
		}
		if err := prepareDataDir(cfg.DataDir, false); err != nil {
			return nil, u, err
		}
		db, err := openDataStore(cmd.Context(), cfg.DataDir, a.stderr)
		return db, u, err
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List remembered facts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, u, err := open(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			facts, err := db.Facts(cmd.Context(), u)
			if err != nil {
				return err
			}
			if len(facts) == 0 {
				fmt.Fprintf(a.stdout, "nothing remembered about %s\n", u)
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tUPDATED")
			for _, f := range facts {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Key, f.Value, f.UpdatedAt.Local().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		},
	}, &cobra.Command{
		Use:   "forget KEY",
		Short: "Forget one fact",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, u, err := open(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			ok, err := db.Forget(cmd.Context(), u, args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no fact %q about %s", args[0], u)
			}
			fmt.Fprintf(a.stdout, "forgot %s\n", args[0])
			return nil
		},
	})
	return cmd
}
