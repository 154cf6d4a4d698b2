package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"conch"
	"conch/transcript"
)

func (a *app) transcriptCmd() *cobra.Command {
	var (
		turn   int64
		format string
	)
	cmd := &cobra.Command{
		Use:   "transcript CONVERSATION",
		Short: "Print a conversation's turns in full: messages, tool calls, results, timings",
		Long: `Print every turn of a conversation (channel:id, e.g. cli:alice or matrix:!room:example.org)
as recorded: the messages, the tool calls and their results, model calls with their timings and
token counts, compactions and stops. Turns from before a /reset are included. The model may have
seen a summary instead of older turns; the transcript always shows everything.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := conch.ParseConversationKey(args[0])
			if err != nil {
				return fmt.Errorf("CONVERSATION: %w", err)
			}
			if format != "jsonl" && format != "md" {
				return fmt.Errorf("--format %q: use jsonl or md", format)
			}
			db, _, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			turns, err := transcript.Load(cmd.Context(), db, key, conch.TurnID(turn))
			if err != nil {
				return err
			}
			if format == "md" {
				return transcript.WriteMarkdown(a.stdout, key, turns)
			}
			return transcript.WriteJSONL(a.stdout, turns)
		},
	}
	cmd.Flags().Int64Var(&turn, "turn", 0, "only the turn with this id (as printed in the transcript)")
	cmd.Flags().StringVar(&format, "format", "md", "jsonl (one JSON object per line) or md (Markdown)")
	return cmd
}
