// Package gateway routes messages from channels to conversations: it checks
// allowlists, stores each inbound message before anything else, answers
// commands, and runs one serial worker per conversation that drives the agent
// loop. On start it resumes turns that a crash interrupted.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"conch"
	"conch/agent"
	"conch/internal/backoff"
)

// Store is what the gateway persists. conch.Store satisfies it.
type Store interface {
	AddInbound(ctx context.Context, in conch.Inbound) (conch.Turn, bool, error)
	StartTurn(ctx context.Context, id conch.TurnID) (conch.Turn, error)
	FinishTurn(ctx context.Context, id conch.TurnID, status conch.TurnStatus, reason string) error
	UnfinishedTurns(ctx context.Context) ([]conch.Turn, error)
	// Turn reads a turn (its message places progress and feeds hooks).
	Turn(ctx context.Context, id conch.TurnID) (conch.Turn, error)
	Conversations(ctx context.Context) ([]conch.ConversationKey, error)
	ResetConversation(ctx context.Context, key conch.ConversationKey) error
	// Cursor and SetCursor keep the outbound id salt.
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, value string) error
	// Mark remembers handled commands (see seenCommand).
	Mark(ctx context.Context, scope, id string) (first bool, err error)
}

// StagedStore is a Store that stores a message before the disk has it
// (sqlite.DB): the gateway queues the turn while the disk syncs, so the
// turn's first steps overlap the fsync, and still acknowledges the message
// only once it is durable and sends no answer before every message stored
// so far is.
type StagedStore interface {
	// StageInbound stores the message as AddInbound does; durable returns
	// once it survives a power loss. With start its turn is stored started
	// (running, its first attempt) in the same commit: the gateway asks it
	// only for a conversation with no other turn waiting or running.
	StageInbound(ctx context.Context, in conch.Inbound, start bool) (t conch.Turn, dup bool, durable func(context.Context) error, err error)
	// WaitDurable returns once every message stored so far is durable.
	WaitDurable(ctx context.Context) error
}

// Runner runs one turn of the agent loop. *agent.Agent satisfies it.
type Runner interface {
	Run(ctx context.Context, in agent.Input) (agent.Result, error)
}

// Hooks runs around each turn (hook.Runner implements it). Hooks never
// fail a turn: they log their own failures. What ran is published as the
// turn's HookRan event when any hook ran.
type Hooks interface {
	// BeforeTurn runs when the turn starts, before the model is called.
	BeforeTurn(ctx context.Context, t conch.Turn) conch.HookRan
	// AfterTurn runs once the turn's answer was delivered (normal) or the
	// turn stopped or failed (not normal).
	AfterTurn(ctx context.Context, t conch.Turn, answer string, normal bool) conch.HookRan
}

// Usage reports what model calls used (usage.Meter implements it).
type Usage interface {
	// Report is the /usage answer for a conversation and its person.
	Report(ctx context.Context, key conch.ConversationKey, person conch.UserKey) string
	// Status is /status's line on the model that answered last ("" for none).
	Status(ctx context.Context, key conch.ConversationKey) string
}

// Options configures a Gateway.
type Options struct {
	Store    Store
	Agent    Runner
	Channels []conch.Channel
	// Allow holds each channel's allowlist. A channel without one accepts
	// nobody (fail closed) unless its policy says otherwise.
	Allow map[conch.ChannelName]Allowlist
	// Policies holds each channel's policy for senders not on its
	// allowlist (PolicyAllowlist when absent).
	Policies map[conch.ChannelName]Policy
	// Runtime, if set, gives each conversation its sandbox; /reset and a
	// closed conversation remove it.
	Runtime conch.Runtime
	Facts   conch.FactStore
	// MaxAttempts is how often a turn is tried in all, counting attempts
	// interrupted by a crash (default 3).
	MaxAttempts int
	// StoreRetry paces a turn that waits for room when the store's disk is
	// full (conch.ErrStoreFull): default 1s, doubling to 30s.
	StoreRetry backoff.Policy
	// Releasers hold something per conversation (terminals, egress
	// bridges); a reset or a closed conversation releases it in each.
	Releasers []conch.Releaser
	// Attachments keeps received files until their turn copies them into
	// the workspace; without it files are refused with a notice.
	Attachments conch.AttachmentStore
	// MaxAttachmentBytes caps one received file (default conch.MaxAttachmentSize).
	MaxAttachmentBytes int64
	// Media, when set, prepares a turn's received pictures and voice for
	// the model when the turn starts (kept with the turn's message when
	// the Store is a conch.AttachmentUpdater); the person is told what
	// was heard.
	Media conch.MediaPreparer
	// Events keeps every conversation's events; nil keeps them in memory.
	Events EventLog
	// ProgressInterval is the least time between two progress messages of
	// a turn on channels that cannot edit (default 2s).
	ProgressInterval time.Duration
	// EditInterval is the least time between two edits of a progress
	// message on channels that edit in place (default 1s).
	EditInterval time.Duration
	// Hooks, when set, runs the conversation's turn hooks around each turn.
	Hooks Hooks
	// Usage, when set, answers /usage and adds a line to /status.
	Usage Usage
	// Approvals keeps the questions tools ask the conversation's people
	// (approval.go); without it a tool that needs an answer refuses.
	Approvals conch.ApprovalStore
	// ApprovalTimeout is how long a question waits before it is denied
	// (default DefaultApprovalTimeout).
	ApprovalTimeout time.Duration
	// Audit records every decision on a question.
	Audit conch.AuditStore
	// StatusSources add lines to /status (the MCP servers' state).
	StatusSources []StatusSource
	Logger        *slog.Logger
	Now           func() time.Time
}

// Gateway is the router. Create it with New, then call Run.
type Gateway struct {
	opts     Options
	channels map[conch.ChannelName]conch.Channel
	log      *slog.Logger
	hub      *Hub
	view     *turnView

	// salt makes outbound ids unique to this store (turn ids restart
	// with a new store; a homeserver remembers transaction ids).
	salt string

	// order serialises storing and queueing a conversation's messages.
	order orderLocks
	// submits hold a turn's channel-facing actions until its submission
	// returned.
	submits submitGates
	// waiters wake tool calls waiting on a question.
	waiters approvalWaiters

	mu  sync.Mutex
	ctx context.Context // lifetime of Run; nil before Run
	// resuming holds the workers back while Run queues the turns a
	// previous run left, so a message stored meanwhile waits its turn.
	resuming bool
	// started is closed once Run has resumed what a previous run left.
	started chan struct{}
	convs   map[conch.ConversationKey]*conversation
	wg      sync.WaitGroup // running workers
	idle    *sync.Cond     // signalled when a worker ends
}

// seenCommand reports whether the command was handled before, and
// remembers it. Messages are de-duplicated by the store with their turns;
// commands are never stored as messages, so their external ids are kept as
// markers (scope markerCommand, id "<channel>:<external id>", kept
// conch.MarkerTTL): a channel that redelivers after a crash cannot repeat a
// /reset.
func (g *Gateway) seenCommand(ctx context.Context, in conch.Inbound) bool {
	if in.ExternalID == "" {
		return false
	}
	first, err := g.opts.Store.Mark(ctx, markerCommand, string(in.Key.Channel)+":"+in.ExternalID)
	if err != nil {
		g.log.Warn("remember handled command", "err", err)
		return false
	}
	return !first
}

// markerCommand is the marker scope of handled commands.
const markerCommand = "command"

var (
	_ conch.Handler             = (*Gateway)(nil)
	_ conch.Submitter           = (*Gateway)(nil)
	_ conch.ConversationControl = (*Gateway)(nil)
)

// Events is the hub that fans out every conversation's events.
func (g *Gateway) Events() *Hub { return g.hub }

// New returns a Gateway.
func New(opts Options) (*Gateway, error) {
	if opts.Store == nil || opts.Agent == nil {
		return nil, errors.New("gateway: store and agent are required")
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 3
	}
	if opts.StoreRetry.Base <= 0 {
		opts.StoreRetry.Base = time.Second
	}
	if opts.StoreRetry.Cap <= 0 {
		opts.StoreRetry.Cap = 30 * time.Second
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 2 * time.Second
	}
	if opts.EditInterval <= 0 {
		opts.EditInterval = time.Second
	}
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = DefaultApprovalTimeout
	}
	if opts.MaxAttachmentBytes <= 0 {
		opts.MaxAttachmentBytes = conch.MaxAttachmentSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Allow == nil {
		opts.Allow = map[conch.ChannelName]Allowlist{}
	}
	g := &Gateway{
		opts:     opts,
		channels: make(map[conch.ChannelName]conch.Channel),
		log:      opts.Logger,
		convs:    make(map[conch.ConversationKey]*conversation),
		started:  make(chan struct{}),
	}
	g.hub = NewHub(opts.Events, opts.Logger, opts.Now)
	g.view = newTurnView(g)
	g.hub.Observe(g.view.observe)
	g.idle = sync.NewCond(&g.mu)
	for _, ch := range opts.Channels {
		if _, dup := g.channels[ch.Name()]; dup {
			return nil, fmt.Errorf("gateway: two channels named %q", ch.Name())
		}
		g.channels[ch.Name()] = ch
	}
	return g, nil
}

// Attached is a channel the gateway runs, with its allowlist.
type Attached struct {
	Channel conch.Channel
	Allow   Allowlist
}

// Run attaches the channels (beside Options.Channels), resumes interrupted
// turns, runs every channel and blocks until ctx is done or a channel fails
// for good; then it stops the channels, lets running turns be cancelled
// (they stay "running" in the store and resume at the next start) and waits
// for the workers. Channels are built after the gateway, with it as their
// event source and control, and attached here.
func (g *Gateway) Run(ctx context.Context, channels ...Attached) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g.mu.Lock()
	if g.ctx != nil {
		g.mu.Unlock()
		return errors.New("gateway: already running")
	}
	for _, a := range channels {
		name := a.Channel.Name()
		if _, dup := g.channels[name]; dup {
			g.mu.Unlock()
			return fmt.Errorf("gateway: two channels named %q", name)
		}
		g.channels[name] = a.Channel
		g.opts.Allow[name] = a.Allow
	}
	g.ctx = ctx
	g.resuming = true
	g.mu.Unlock()
	g.view.start(ctx)
	defer g.view.wait()

	if err := g.loadSalt(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	g.settleApprovals(ctx)
	if err := g.resume(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := g.view.recoverHooks(ctx); err != nil {
		g.log.Warn("post-turn hooks not recovered", "err", err)
	}
	g.startWorkers()
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
	// The events published last are written before Run returns (the store
	// may be closed next); one the disk has no room for is given up.
	g.hub.StopRetrying()
	_ = g.hub.Flush(context.Background())
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// WaitIdle blocks until no conversation has work (post-turn hooks
// included) and every event published is kept and sent, or ctx is done.
func (g *Gateway) WaitIdle(ctx context.Context) error {
	g.mu.Lock()
	running, started := g.ctx != nil, g.started
	g.mu.Unlock()
	if running {
		select {
		case <-started:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := g.waitWorkers(ctx); err != nil {
		return err
	}
	if err := g.view.waitAllHooks(ctx); err != nil {
		return err
	}
	return g.hub.Flush(ctx)
}

func (g *Gateway) waitWorkers(ctx context.Context) error {
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
		if c.busy || c.holding != 0 {
			return true
		}
	}
	return false
}

// startWorkers ends the resume phase: every conversation with queued turns
// gets its worker.
func (g *Gateway) startWorkers() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.resuming = false
	close(g.started)
	for _, c := range g.convs {
		if len(c.queue) > 0 && !c.busy {
			c.start()
		}
	}
}

// resume queues the turns a previous run left unfinished, oldest first.
func (g *Gateway) resume(ctx context.Context) error {
	turns, err := g.opts.Store.UnfinishedTurns(ctx)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	for _, t := range turns {
		if _, err := g.enqueue(ctx, t, false, false); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	if len(turns) > 0 {
		g.log.Info("resuming interrupted turns", "count", len(turns))
	}
	return nil
}

// alreadyQueued is enqueue's position for a turn that was queued already
// (or that Run's resume will queue).
const alreadyQueued = -1

// enqueue adds a turn to its conversation's queue and returns its position
// among waiting turns (0 = runs now, alreadyQueued = it was there).
//
// With announce it publishes the turn's pending state before any worker can
// take it, so its running state always comes after. Publishing keeps the
// event (a store write): it happens outside g.mu, which every conversation
// shares, while the turn is held (conversation.holding) — its worker does
// not take it until it is announced. With started, the turn was stored
// started (StagedStore): its worker does not start it again.
func (g *Gateway) enqueue(ctx context.Context, t conch.Turn, announce, started bool) (int, error) {
	g.mu.Lock()
	pos, announcePos, c := g.enqueueLocked(t)
	if started && c != nil && pos != alreadyQueued {
		c.started = t.ID
	}
	if !announce || announcePos < 0 {
		g.mu.Unlock()
		return pos, nil
	}
	c.holding = t.ID
	g.mu.Unlock()

	g.hub.Publish(ctx, t.Key, t.ID, conch.TurnState{Status: conch.TurnPending, Queued: announcePos})

	g.mu.Lock()
	defer g.mu.Unlock()
	c.holding = 0
	if !c.busy && !g.resuming && g.ctx != nil && len(c.queue) > 0 {
		c.start()
	}
	g.idle.Broadcast() // WaitIdle counts a held turn as work
	return pos, nil
}

// enqueueLocked queues t; the caller holds g.mu. It returns enqueue's
// position, the position to announce (-1: none) and the conversation.
func (g *Gateway) enqueueLocked(t conch.Turn) (pos, announce int, c *conversation) {
	if g.ctx == nil {
		// Not running yet: the turn is stored, and Run's resume queues it
		// (resume reads the store after ctx is set, so nothing is missed).
		return alreadyQueued, -1, nil
	}
	c = g.convs[t.Key]
	if c == nil {
		c = &conversation{g: g, key: t.Key}
		g.convs[t.Key] = c
	}
	// A message stored while resume reads the unfinished turns reaches
	// here twice (from resume and from its submission): once is enough.
	if c.cur != nil && c.cur.turn.ID == t.ID {
		return alreadyQueued, -1, c
	}
	for i, q := range c.queue {
		if q.ID == t.ID {
			// Queued by resume, which announces nothing: the submission
			// announces it, so its pending state is published once.
			pos := i + 1
			if c.cur == nil || c.cur.answered {
				pos--
			}
			return alreadyQueued, pos, c
		}
	}
	// Turns run in turn-id (arrival) order: a resumed turn may be queued
	// after a newer one that was submitted while resume read the store.
	i := slices.IndexFunc(c.queue, func(q conch.Turn) bool { return q.ID > t.ID })
	if i < 0 {
		i = len(c.queue)
	}
	c.queue = slices.Insert(c.queue, i, t)
	if c.busy || g.resuming {
		// A turn whose answer is already out is only being recorded: the
		// message does not wait behind it in any way worth a notice.
		pos := i + 1
		if c.cur == nil || c.cur.answered {
			pos--
		}
		return pos, pos, c
	}
	return 0, 0, c
}

// send delivers a message, logging failures: a reply that cannot be
// delivered must not take the worker down. Replies and notices are
// published as events first, so subscribers (the web chat, the dashboard)
// see them even when the channel is down.
func (g *Gateway) send(ctx context.Context, turn conch.TurnID, out conch.Outbound) bool {
	return g.sendKept(ctx, turn, out, false)
}

// sendKept is send for an answer whose event may already be kept: a turn
// resumed after a crash delivers its stored answer to the channel again
// (delivery is at least once), but publishes it only when the event log
// does not have it yet (the web chat shows the log: it would show the
// answer twice).
func (g *Gateway) sendKept(ctx context.Context, turn conch.TurnID, out conch.Outbound, kept bool) bool {
	if !g.mayReach(ctx, out.Key, turn, out.Kind.String()) {
		return false
	}
	switch out.Kind {
	case conch.OutboundReply:
		// The turn's progress and typing end before its answer goes out.
		g.view.settle(out.Key, turn)
		if !kept {
			g.hub.Publish(ctx, out.Key, turn, conch.MessageEvent{Role: conch.RoleAssistant, Text: out.Text, Attachments: out.Attachments})
		}
	case conch.OutboundNotice:
		g.hub.Publish(ctx, out.Key, turn, conch.NoticeEvent{Text: out.Text})
	}
	ch, ok := g.channels[out.Key.Channel]
	if !ok {
		g.log.Error("no channel for conversation", "conversation", out.Key)
		return false
	}
	var err error
	if ac, ok := ch.(conch.AttachmentChannel); ok && len(out.Attachments) > 0 {
		// Text and files are several calls the channel makes (and retries)
		// one by one; only Matrix deduplicates them by the message's id, so
		// trying the whole message again here would repeat the parts that
		// went out. One attempt; the channel's own retries cover each part.
		err = ac.SendAttachments(ctx, out)
	} else {
		if len(out.Attachments) > 0 {
			out.Text = joinText(out.Text, describeSent(out.Attachments))
			out.Attachments = nil
		}
		policy := backoff.Policy{Base: 500 * time.Millisecond, Max: 2}
		err = policy.Retry(ctx, func(ctx context.Context, _ int) error {
			return ch.Send(ctx, out)
		}, func(attempt int, err error, _ time.Duration) {
			g.log.Warn("send failed", "conversation", out.Key, "kind", out.Kind, "attempt", attempt, "err", err)
		})
	}
	if err != nil {
		g.log.Error("message not delivered", "conversation", out.Key, "kind", out.Kind, "err", err)
		return false
	}
	return true
}

// mayReach waits until something of turn (what) may reach the channel:
// not before the channel heard that its message was stored (submitGates),
// and nothing to a message a power loss could still take back (the channel
// would deliver it again and it would be answered twice). It logs why not.
func (g *Gateway) mayReach(ctx context.Context, key conch.ConversationKey, turn conch.TurnID, what string) bool {
	if err := g.submits.wait(ctx, turn); err != nil {
		g.log.Warn("not sent: its message's submission failed or was cut short", "conversation", key, "what", what, "err", err)
		return false
	}
	if st, ok := g.opts.Store.(StagedStore); ok {
		if err := st.WaitDurable(ctx); err != nil {
			g.log.Error("not sent: the store cannot make messages durable", "conversation", key, "what", what, "err", err)
			return false
		}
	}
	return true
}

// joinText appends note to text with a blank line between.
func joinText(text, note string) string {
	switch {
	case note == "":
		return text
	case text == "":
		return note
	}
	return text + "\n\n" + note
}

// outboundSaltCursor names the store's outbound id salt.
const outboundSaltCursor = "gateway:outbound-salt"

// loadSalt reads the store's outbound id salt, creating it on first use.
func (g *Gateway) loadSalt(ctx context.Context) error {
	salt, err := g.opts.Store.Cursor(ctx, outboundSaltCursor)
	if err != nil {
		return fmt.Errorf("outbound ids: %w", err)
	}
	if salt == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("outbound ids: %w", err)
		}
		salt = hex.EncodeToString(b[:])
		if err := g.opts.Store.SetCursor(ctx, outboundSaltCursor, salt); err != nil {
			return fmt.Errorf("outbound ids: %w", err)
		}
	}
	g.salt = salt
	return nil
}

// outboundID is the stable id of a turn's message of a kind.
func (g *Gateway) outboundID(turn conch.TurnID, kind conch.OutboundKind) string {
	return fmt.Sprintf("conch.%s.t%d.%s", g.salt, turn, kind)
}
