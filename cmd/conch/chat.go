package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"conch"
	"conch/channel/cli"
	"conch/gateway"
	"conch/obs"
)

func (a *app) chatCmd() *cobra.Command {
	var conversation string
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk to conch in the terminal",
		Long: `Talk to conch in the terminal. The conversation and its computer persist across runs.

When standard input is not a terminal, each line is one message; each reply
is printed to standard output, progress and notices to standard error, and
conch exits when the input ends and every reply is out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.chat(cmd.Context(), conversation)
		},
	}
	cmd.Flags().StringVar(&conversation, "conversation", "local", "conversation id (each has its own history and computer)")
	cmd.Flags().BoolVar(&a.newStore, "new-store", false, "start with an empty store even though the data dir was used before")
	return cmd
}

func (a *app) chat(ctx context.Context, conversation string) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	// Logs go to a file: the terminal is for the conversation.
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "logs"), 0o700); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	logFile := obs.RotatingFile(filepath.Join(cfg.DataDir, "logs", "chat.log"), 20, 5, 30)
	defer logFile.Close()
	d, err := a.build(ctx, cfg, logFile)
	if err != nil {
		return err
	}
	defer d.Close()
	ctx, stop := stopWhenStoreFails(ctx, d.db, d.log)
	defer stop()
	if err := a.startRuntime(ctx, d, func(s string) { fmt.Fprintln(a.stderr, "sandbox image:", s) }); err != nil {
		return err
	}
	user := conch.UserID(cfg.CLI.User)
	ch := &cli.Channel{
		In: a.stdin, Out: a.stdout, Err: a.stderr,
		Key:  conch.ConversationKey{Channel: conch.ChannelCLI, ID: conversation},
		User: user,
	}
	if isTerminal(a.stdin) {
		ch.Prompt = "> "
		fmt.Fprintf(a.stderr, "conch chat (%s/%s). /help for commands, Ctrl-D to leave.\n", cfg.Model.Provider, cfg.Model.Name)
	}
	// The channel ends at EOF; the gateway then finishes the queued turns.
	eof := &eofChannel{Channel: ch, done: make(chan struct{})}
	gw, err := newGateway(d)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := countFailedTurns(runCtx, gw, ch.Key)
	errc := make(chan error, 1)
	go func() {
		errc <- gw.Run(runCtx, gateway.Attached{Channel: eof, Allow: gateway.NewAllowlist(string(user))})
	}()
	select {
	case <-eof.done:
		if err := gw.WaitIdle(ctx); err != nil {
			cancel()
			<-errc
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause // the store failed (stopWhenStoreFails)
			}
			return nil // interrupted: unfinished turns resume next time
		}
		cancel()
		if err := <-errc; err != nil {
			return err
		}
		if n := failed(); n > 0 {
			// A script piping messages in must learn that answers are missing.
			return fmt.Errorf("%d message(s) could not be answered (the reasons are above; details in %s)",
				n, filepath.Join(cfg.DataDir, "logs", "chat.log"))
		}
		return nil
	case err := <-errc:
		if err != nil && !errors.Is(err, cli.ErrEOF) {
			return err
		}
		return nil
	}
}

// eofChannel turns the end of input into a signal instead of a channel
// failure, so the queued turns can finish.
type eofChannel struct {
	*cli.Channel
	done chan struct{}
}

func (e *eofChannel) Run(ctx context.Context, h conch.Handler) error {
	err := e.Channel.Run(ctx, h)
	if errors.Is(err, cli.ErrEOF) {
		close(e.done)
		<-ctx.Done()
		return nil
	}
	return err
}

func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// countFailedTurns follows the conversation's events until ctx ends and
// returns a func telling how many turns ended with an error; call it after
// ctx ended, so that every event was counted.
func countFailedTurns(ctx context.Context, gw *gateway.Gateway, key conch.ConversationKey) func() int {
	var mu sync.Mutex
	n := 0
	sub, err := gw.Events().Subscribe(ctx, key, -1)
	if err != nil {
		return func() int { return 0 }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub {
			if ts, ok := ev.Data.(conch.TurnState); ok && ts.Status == conch.TurnStopped && strings.HasPrefix(ts.Reason, "error_") {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}
	}()
	return func() int {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}
