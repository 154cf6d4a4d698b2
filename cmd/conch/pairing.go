package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"conch"
	"conch/gateway"
	"conch/sqlite"
)

func (a *app) pairingCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pairing",
		Short: "Approve people who asked to talk to conch (channels with dm_policy = pairing)",
		Long: `On a channel with dm_policy = pairing, a sender who is not on the allowlist
gets a one-time code and nothing else. Approve the code here; the sender is
then admitted (also by a running conch up) until revoked.`,
	}
	cmd.AddCommand(a.pairingListCmd(), a.pairingApproveCmd(), a.pairingRevokeCmd())
	return cmd
}

// openPairings opens the store for the pairing subcommands.
func (a *app) openPairings(cmd *cobra.Command) (*sqlite.DB, error) {
	db, _, err := a.openStore(cmd.Context())
	return db, err
}

// pairingListCmd is conch pairing list.
func (a *app) pairingListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List pending codes and approved senders",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.openPairings(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			approved, pending, err := gateway.Pairings{Store: db}.List(cmd.Context(), db)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "STATE\tCODE\tCHANNEL\tSENDER\tNAME\tSINCE")
			now := time.Now()
			for _, p := range pending {
				fmt.Fprintf(tw, "pending\t%s\t%s\t%s\t%s\t%s\n", p.Code, p.Channel, p.Sender, p.Name, ago(now, p.Created))
			}
			for _, p := range approved {
				fmt.Fprintf(tw, "approved\t%s\t%s\t%s\t%s\t%s\n", p.Code, p.Channel, p.Sender, p.Name, ago(now, p.Approved))
			}
			return tw.Flush()
		},
	}
}

// pairingApproveCmd is conch pairing approve CODE.
func (a *app) pairingApproveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "approve CODE",
		Short: "Admit the sender a code was given to",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := a.openPairings(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			p, err := gateway.Pairings{Store: db}.Approve(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "approved %s on %s; they can write now\n", p.Sender, p.Channel)
			return nil
		},
	}
}

// pairingRevokeCmd is conch pairing revoke CHANNEL:SENDER.
func (a *app) pairingRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke CHANNEL:SENDER",
		Short: "Withdraw an approval (e.g. telegram:123456789)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := conch.ParseConversationKey(args[0])
			if err != nil {
				return fmt.Errorf("want CHANNEL:SENDER, e.g. telegram:123456789: %w", err)
			}
			db, err := a.openPairings(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			ok, err := gateway.Pairings{Store: db}.Revoke(cmd.Context(), key.Channel, conch.UserID(key.ID))
			if err != nil {
				return err
			}
			if !ok {
				return conch.Errorf(conch.KindNotFound, "%s was not approved", args[0])
			}
			fmt.Fprintf(a.stdout, "revoked %s\n", args[0])
			return nil
		},
	}
}
