package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"conch"
	"conch/schedule"
)

// schedulesCmd is `conch schedules list|cancel`: the operator's view of the
// conversations' scheduled wakes and watches. It works on the store while
// conch up runs; a cancelled entry does not fire (the scheduler reads the
// store before each firing).
func (a *app) schedulesCmd() *cobra.Command {
	var conv string
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "List or cancel the conversations' scheduled wakes and watches",
	}
	cmd.PersistentFlags().StringVar(&conv, "conversation", "", "only this conversation, as channel:id")
	cmd.AddCommand(a.schedulesListCmd(&conv), a.schedulesCancelCmd(&conv))
	return cmd
}

// openSchedules opens the store and a scheduler over it, and parses
// --conversation (conv) into the key to filter by; the returned func closes
// the store.
func (a *app) openSchedules(cmd *cobra.Command, conv string) (*schedule.Scheduler, conch.ConversationKey, func(), error) {
	var key conch.ConversationKey
	if conv != "" {
		var err error
		if key, err = conch.ParseConversationKey(conv); err != nil {
			return nil, key, nil, fmt.Errorf("--conversation: %w (e.g. matrix:!room:example.org)", err)
		}
	}
	cfg, err := a.loadOperatorConfig()
	if err != nil {
		return nil, key, nil, err
	}
	if err := prepareDataDir(cfg.DataDir, false); err != nil {
		return nil, key, nil, err
	}
	db, err := openDataStore(cmd.Context(), cfg.DataDir, a.stderr)
	if err != nil {
		return nil, key, nil, err
	}
	s, err := schedule.New(schedule.Options{Store: db})
	if err != nil {
		db.Close()
		return nil, key, nil, err
	}
	return s, key, func() { db.Close() }, nil
}

// schedulesListCmd is conch schedules list.
func (a *app) schedulesListCmd(conv *string) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List scheduled wakes and watches",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, key, done, err := a.openSchedules(cmd, *conv)
			if err != nil {
				return err
			}
			defer done()
			es, err := s.List(cmd.Context(), key)
			if err != nil {
				return err
			}
			if len(es) == 0 {
				fmt.Fprintln(a.stdout, "no scheduled wakes or watches")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tCONVERSATION\tWHEN\tCREATED\tMESSAGE")
			for _, e := range es {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.ID, e.Key, schedule.Describe(e), e.CreatedAt.UTC().Format(time.RFC3339), clipLine(e.Message, 60))
			}
			return tw.Flush()
		},
	}
}

// schedulesCancelCmd is conch schedules cancel ID.
func (a *app) schedulesCancelCmd(conv *string) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a scheduled wake or watch",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, key, done, err := a.openSchedules(cmd, *conv)
			if err != nil {
				return err
			}
			defer done()
			ok, err := s.Cancel(cmd.Context(), key, args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no scheduled wake or watch %q (see conch schedules list)", args[0])
			}
			fmt.Fprintf(a.stdout, "cancelled %s\n", args[0])
			return nil
		},
	}
}

func clipLine(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' {
			r = r[:i]
			break
		}
	}
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return string(r)
}
