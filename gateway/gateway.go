// Package gateway routes messages from channels to conversations: it checks
// allowlists, stores each inbound message before anything else, answers
// commands, and runs one serial worker per conversation that drives the agent
// loop. On start it resumes turns that a crash interrupted.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"conch"
	"conch/agent"
)

// Store is what the gateway persists. conch.Store satisfies it.
type Store interface {
	AddInbound(ctx context.Context, in conch.Inbound) (conch.Turn, bool, error)
	StartTurn(ctx context.Context, id conch.TurnID) (conch.Turn, error)
	FinishTurn(ctx context.Context, id conch.TurnID, status conch.TurnStatus, reason string) error
	UnfinishedTurns(ctx context.Context) ([]conch.Turn, error)
	History(ctx context.Context, key conch.ConversationKey) ([]conch.Message, error)
	ResetConversation(ctx context.Context, key conch.ConversationKey) error
	// Cursor and SetCursor remember handled commands (see seenCommand).
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, value string) error
}

// Runner runs one turn of the agent loop. *agent.Agent satisfies it.
type Runner interface {
	Run(ctx context.Context, in agent.Input) (agent.Result, error)
}

// Options configures a Gateway.
type Options struct {
	Store    Store
	Agent    Runner
	Channels []conch.Channel
	// Allow holds each channel's allowlist. A channel without one accepts
	// nobody (fail closed).
	Allow map[conch.ChannelName]Allowlist
	// Runtime, if set, gives each conversation its sandbox; /reset and a
	// closed conversation remove it.
	Runtime conch.Runtime
	Facts   conch.FactStore
	// MaxAttempts is how often a turn is tried in all, counting attempts
	// interrupted by a crash (default 3).
	MaxAttempts int
	// ProgressInterval is the least time between two progress messages of
	// a turn on channels that cannot edit (default 2s).
	ProgressInterval time.Duration
	Logger           *slog.Logger
	Now              func() time.Time
}

// Gateway is the router. Create it with New, then call Run.
type Gateway struct {
	opts     Options
	channels map[conch.ChannelName]conch.Channel
	log      *slog.Logger

	mu    sync.Mutex
	ctx   context.Context // lifetime of Run; nil before Run
	convs map[conch.ConversationKey]*conversation
	wg    sync.WaitGroup // running workers
	idle  *sync.Cond     // signalled when a worker ends
}

// seenCommand reports whether the command was handled before, and
// remembers it. Messages are de-duplicated by the store with their turns;
// commands are never stored as messages, so their external ids are kept as
// cursors: a channel that redelivers after a crash cannot repeat a /reset.
func (g *Gateway) seenCommand(ctx context.Context, in conch.Inbound) bool {
	if in.ExternalID == "" {
		return false
	}
	name := "command:" + string(in.Key.Channel) + ":" + in.ExternalID
	v, err := g.opts.Store.Cursor(ctx, name)
	if err != nil {
		g.log.Warn("read handled commands", "err", err)
		return false
	}
	if v != "" {
		return true
	}
	if err := g.opts.Store.SetCursor(ctx, name, g.opts.Now().UTC().Format(time.RFC3339)); err != nil {
		g.log.Warn("remember handled command", "err", err)
	}
	return false
}

var _ conch.Handler = (*Gateway)(nil)

// New returns a Gateway.
func New(opts Options) (*Gateway, error) {
	if opts.Store == nil || opts.Agent == nil {
		return nil, errors.New("gateway: store and agent are required")
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 3
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &Gateway{
		opts:     opts,
		channels: make(map[conch.ChannelName]conch.Channel),
		log:      opts.Logger,
		convs:    make(map[conch.ConversationKey]*conversation),
	}
	g.idle = sync.NewCond(&g.mu)
	for _, ch := range opts.Channels {
		if _, dup := g.channels[ch.Name()]; dup {
			return nil, fmt.Errorf("gateway: two channels named %q", ch.Name())
		}
		g.channels[ch.Name()] = ch
	}
	return g, nil
}

// Run resumes interrupted turns, runs every channel and blocks until ctx is
// done or a channel fails for good; then it stops the channels, lets running
// turns be cancelled (they stay "running" in the store and resume at the
// next start) and waits for the workers.
func (g *Gateway) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g.mu.Lock()
	if g.ctx != nil {
		g.mu.Unlock()
		return errors.New("gateway: already running")
	}
	g.ctx = ctx
	g.mu.Unlock()

	if err := g.resume(ctx); err != nil {
		if ctx.Err() != nil {
			g.wg.Wait()
			return nil
		}
		return err
	}
	errc := make(chan error, len(g.channels))
	for _, ch := range g.channels {
		go func() {
			err := ch.Run(ctx, g)
			if err != nil && ctx.Err() == nil {
				err = fmt.Errorf("channel %s: %w", ch.Name(), err)
				g.log.Error("channel failed", "channel", ch.Name(), "err", err)
				cancel(err)
			}
			errc <- err
		}()
	}
	<-ctx.Done()
	for range g.channels {
		<-errc
	}
	g.wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// WaitIdle blocks until no conversation has work or ctx is done.
func (g *Gateway) WaitIdle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.idle.Broadcast()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.busyLocked() {
		if err := ctx.Err(); err != nil {
			return err
		}
		g.idle.Wait()
	}
	return nil
}

func (g *Gateway) busyLocked() bool {
	for _, c := range g.convs {
		if c.busy {
			return true
		}
	}
	return false
}

// HandleInbound implements conch.Handler: allowlist, commands, then the
// message is stored and queued. It returns once the message is durable.
func (g *Gateway) HandleInbound(ctx context.Context, in conch.Inbound) error {
	if in.Key.IsZero() || in.Key.ID == "" {
		return conch.Errorf(conch.KindInvalid, "message without a conversation")
	}
	if al, ok := g.opts.Allow[in.Key.Channel]; !ok || !al.Allows(in.Sender) {
		// Unknown senders get nothing at all.
		g.log.Debug("dropped message from sender not on the allowlist", "channel", in.Key.Channel, "sender", in.Sender)
		return nil
	}
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = g.opts.Now()
	}
	if cmd, ok := parseCommand(in.Text); ok {
		if g.seenCommand(ctx, in) {
			g.log.Info("ignored redelivered command", "conversation", in.Key, "external_id", in.ExternalID)
			return nil
		}
		return g.command(ctx, in, cmd)
	}
	if strings.TrimSpace(in.Text) == "" {
		g.log.Info("ignored empty message", "conversation", in.Key, "sender", in.Sender)
		return nil
	}
	turn, dup, err := g.opts.Store.AddInbound(ctx, in)
	if err != nil {
		return fmt.Errorf("store inbound: %w", err)
	}
	if dup {
		g.log.Info("ignored redelivered message", "conversation", in.Key, "external_id", in.ExternalID, "turn", turn.ID)
		return nil
	}
	pos, err := g.enqueue(turn)
	if err != nil {
		return err
	}
	if pos > 0 {
		g.send(ctx, conch.Outbound{Key: in.Key, Kind: conch.OutboundNotice, Text: fmt.Sprintf("queued (position %d)", pos), InReplyTo: in.ExternalID, Thread: in.Thread})
	}
	return nil
}

// ConversationClosed implements conch.Handler: the worker is stopped, queued
// turns are dropped and the sandbox removed.
func (g *Gateway) ConversationClosed(ctx context.Context, key conch.ConversationKey) error {
	g.mu.Lock()
	c := g.convs[key]
	delete(g.convs, key)
	g.mu.Unlock()
	if c != nil {
		c.close(errClosed)
	}
	if err := g.opts.Store.ResetConversation(ctx, key); err != nil {
		return fmt.Errorf("close %s: %w", key, err)
	}
	if g.opts.Runtime != nil {
		if err := g.opts.Runtime.Remove(ctx, key); err != nil {
			return fmt.Errorf("close %s: remove sandbox: %w", key, err)
		}
	}
	g.log.Info("conversation closed", "conversation", key)
	return nil
}

// resume queues the turns a previous run left unfinished, oldest first.
func (g *Gateway) resume(ctx context.Context) error {
	turns, err := g.opts.Store.UnfinishedTurns(ctx)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	for _, t := range turns {
		if _, err := g.enqueue(t); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	if len(turns) > 0 {
		g.log.Info("resuming interrupted turns", "count", len(turns))
	}
	return nil
}

// enqueue adds a turn to its conversation's queue and returns its position
// among waiting turns (0 = runs now).
func (g *Gateway) enqueue(t conch.Turn) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx == nil {
		return 0, errors.New("gateway: not running")
	}
	c := g.convs[t.Key]
	if c == nil {
		c = &conversation{g: g, key: t.Key}
		g.convs[t.Key] = c
	}
	c.queue = append(c.queue, t)
	if c.busy {
		// A turn whose answer is already out is only being recorded: the
		// message does not wait behind it in any way worth a notice.
		pos := len(c.queue)
		if c.cur == nil || c.cur.answered {
			pos--
		}
		return pos, nil
	}
	c.busy = true
	g.wg.Add(1)
	go c.work(g.ctx)
	return 0, nil
}

// send delivers a message, logging failures: a reply that cannot be
// delivered must not take the worker down.
func (g *Gateway) send(ctx context.Context, out conch.Outbound) bool {
	ch, ok := g.channels[out.Key.Channel]
	if !ok {
		g.log.Error("no channel for conversation", "conversation", out.Key)
		return false
	}
	var err error
	for attempt := range 3 {
		if err = ch.Send(ctx, out); err == nil {
			return true
		}
		if ctx.Err() != nil {
			break
		}
		g.log.Warn("send failed", "conversation", out.Key, "kind", out.Kind, "attempt", attempt+1, "err", err)
		select {
		case <-time.After(time.Duration(attempt+1) * 500 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	g.log.Error("message not delivered", "conversation", out.Key, "kind", out.Kind, "err", err)
	return false
}
