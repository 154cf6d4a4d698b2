// Package discord is conch's Discord channel over discordgo: the Gateway
// in (intents Guilds, GuildMessages, DirectMessages and the privileged
// MessageContent, which must be switched on in the Developer Portal), REST
// out. A DM is a conversation, and so is each server channel and each
// thread: in servers the bot answers a message that mentions it or replies
// to it, and in a thread every message once it was mentioned there
// (guild_policy "mention"; "all" answers everything, "deny" nothing).
//
// Each channel's position (the id of the last message handed over) is a
// store cursor written after HandleInbound returned nil. discordgo resumes
// a dropped Gateway session, and Discord replays what was missed; when a
// session cannot be resumed (a restart, op 9) the channel reads every
// known channel's messages after its position over REST (backfill) before
// it takes live ones, so each message is handed over exactly once, in
// order, across kill -9. Answers are split at 2,000 characters (Discord
// renders the Markdown itself); typing is shown while a turn runs, and
// progress is one message edited in place.
package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"conch"
)

// Intents are the Gateway intents conch asks for. MessageContent is
// privileged: without it (Developer Portal → Bot → Message Content Intent)
// Discord refuses the connection (close code 4014).
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages |
	discordgo.IntentsMessageContent

// Channel is the Discord channel adapter.
type Channel struct {
	opts Options
	log  *slog.Logger
	dg   *discordgo.Session

	// Set by Run before ready is closed; read-only afterwards.
	handler  conch.Handler
	me       *discordgo.User
	ready    chan struct{}
	lifetime context.Context
	bg       sync.WaitGroup
	sessions chan struct{} // a READY: a new session, backfill

	// intake serialises handing messages over (live and backfill), so
	// positions only grow and order is kept.
	intake sync.Mutex

	mu        sync.Mutex
	started   bool
	stopping  bool
	positions map[string]string // channel → last message id handed over
	known     []string          // channels with a position
	kinds     map[string]channelKind
	// questions are the messages showing approval questions (approval.go).
	questions map[string]string
	joined    map[string]bool
	health    health
}

type channelKind struct {
	guild  string
	thread bool
}

type health struct {
	sessions   int
	backfilled int
	limited    int
	limitedAt  time.Time
	sendErr    error
	sendErrAt  time.Time
	readErr    error
	readErrAt  time.Time
}

var (
	_ conch.Channel           = (*Channel)(nil)
	_ conch.TypingChannel     = (*Channel)(nil)
	_ conch.EditingChannel    = (*Channel)(nil)
	_ conch.StatusChannel     = (*Channel)(nil)
	_ conch.AttachmentChannel = (*Channel)(nil)
)

// New checks the options and returns a channel; Run connects it.
func New(opts Options) (*Channel, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	dg, err := discordgo.New("Bot " + opts.Token)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	client := *opts.HTTPClient
	if opts.APIURL != DefaultAPIURL {
		u, err := url.Parse(opts.APIURL)
		if err != nil {
			return nil, fmt.Errorf("discord: api url: %w", err)
		}
		base := client.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		client.Transport = rewrite{base: base, to: u}
	}
	dg.Client = &client
	dg.Identify.Intents = Intents
	dg.SyncEvents = true // in order, in the Gateway's reading goroutine
	dg.ShouldRetryOnRateLimit = false
	dg.MaxRestRetries = 0 // retries are ours (internal/backoff)
	dg.StateEnabled = false
	dg.ShouldReconnectOnError = true
	dg.LogLevel = -1
	c := &Channel{
		opts: opts, log: opts.Logger.With("channel", "discord"), dg: dg,
		ready: make(chan struct{}), sessions: make(chan struct{}, 1),
		positions: map[string]string{}, kinds: map[string]channelKind{}, joined: map[string]bool{},
	}
	dg.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { c.onReady(r) })
	dg.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { c.onCreate(m.Message) })
	dg.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { c.onInteraction(i) })
	return c, nil
}

// rewrite sends requests for discord.com to another API URL.
type rewrite struct {
	base http.RoundTripper
	to   *url.URL
}

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == "discord.com" {
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host, req.Host = r.to.Scheme, r.to.Host, r.to.Host
	}
	return r.base.RoundTrip(req)
}

// Name implements conch.Channel.
func (c *Channel) Name() conch.ChannelName { return conch.ChannelDiscord }

// Ready is closed once Run checked the token.
func (c *Channel) Ready() <-chan struct{} { return c.ready }

// Run checks the token (GET /users/@me), opens the Gateway and hands
// messages over until ctx is done (it returns nil) or Discord refuses the
// token (it returns the error).
func (c *Channel) Run(ctx context.Context, h conch.Handler) error {
	if h == nil {
		return errors.New("discord run: nil handler")
	}
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("discord run: already running")
	}
	c.started, c.handler = true, h
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.lifetime = runCtx
	c.mu.Unlock()

	err := c.opts.Backoff.Retry(runCtx, func(ctx context.Context, _ int) error {
		u, err := c.dg.User("@me", discordgo.WithContext(ctx))
		if err = classify("GET /users/@me", err); err != nil {
			c.noteRead(err)
			return retryWait(err)
		}
		c.me = u
		return nil
	}, func(attempt int, err error, wait time.Duration) {
		c.log.Warn("discord: token check failed, retrying", "attempt", attempt, "wait", wait, "err", err)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if statusOf(err) == http.StatusUnauthorized {
			return authError(err)
		}
		return fmt.Errorf("discord: %w", err)
	}
	if err := c.loadKnown(runCtx); err != nil {
		return err
	}
	close(c.ready)
	err = c.opts.Backoff.Retry(runCtx, func(ctx context.Context, _ int) error {
		err := c.dg.Open()
		if err != nil {
			c.noteRead(err)
		}
		return err
	}, func(attempt int, err error, wait time.Duration) {
		c.log.Warn("discord: gateway connection failed, retrying", "attempt", attempt, "wait", wait, "err", err)
	})
	if err != nil {
		return nil // ctx ended
	}
	c.log.Info("discord connected", "bot", c.me.Username, "id", c.me.ID, "guild_policy", c.opts.GuildPolicy)
	noReady := time.NewTimer(30 * time.Second)
	defer noReady.Stop()
	for {
		select {
		case <-runCtx.Done():
			c.mu.Lock()
			c.stopping = true
			c.mu.Unlock()
			_ = c.dg.Close()
			c.bg.Wait()
			return nil
		case <-noReady.C:
			c.noteRead(errors.New("no READY from the Gateway within 30 s: is the Message Content Intent on (Developer Portal → Bot → Privileged Gateway Intents)?"))
		case <-c.sessions:
			noReady.Stop()
			c.backfill(runCtx)
		}
	}
}

// onReady: a new Gateway session (not a resume): what was sent while no
// session was open must be read over REST.
func (c *Channel) onReady(r *discordgo.Ready) {
	c.mu.Lock()
	c.health.sessions++
	c.health.readErr = nil
	c.mu.Unlock()
	c.log.Info("discord gateway session", "session", r.SessionID)
	select {
	case c.sessions <- struct{}{}:
	default:
	}
}

// onCreate hands a live message over, retrying while the gateway cannot
// take it (the Gateway read loop waits: order is kept).
func (c *Channel) onCreate(m *discordgo.Message) {
	ctx := c.lifetime
	if ctx == nil || m == nil {
		return
	}
	c.intake.Lock()
	defer c.intake.Unlock()
	_ = c.opts.Backoff.Retry(ctx, func(ctx context.Context, _ int) error {
		err := c.take(ctx, m)
		if err != nil {
			c.noteRead(err)
		}
		return err
	}, func(attempt int, err error, wait time.Duration) {
		c.log.Warn("discord: message not handed over, retrying", "message", m.ID, "attempt", attempt, "wait", wait, "err", err)
	})
}

// backfill reads each known channel's messages after its position and
// hands them over, oldest first.
func (c *Channel) backfill(ctx context.Context) {
	c.intake.Lock()
	defer c.intake.Unlock()
	c.mu.Lock()
	chans := append([]string(nil), c.known...)
	c.mu.Unlock()
	for _, ch := range chans {
		for ctx.Err() == nil {
			after := c.position(ch)
			var msgs []*discordgo.Message
			err := c.call(ctx, "GET /channels/messages", 5, func(ctx context.Context) error {
				var err error
				msgs, err = c.dg.ChannelMessages(ch, 100, "", after, "", discordgo.WithContext(ctx))
				return err
			})
			if err != nil {
				c.log.Warn("discord: backfill failed", "channel", ch, "err", err)
				c.noteRead(err)
				break
			}
			sort.Slice(msgs, func(i, j int) bool { return snowLess(msgs[i].ID, msgs[j].ID) })
			for _, m := range msgs {
				if err := c.opts.Backoff.Retry(ctx, func(ctx context.Context, _ int) error { return c.take(ctx, m) }, nil); err != nil {
					return
				}
				c.mu.Lock()
				c.health.backfilled++
				c.mu.Unlock()
			}
			if len(msgs) < 100 {
				break
			}
		}
	}
}

func snowLess(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x < y
}

// know makes ch a known channel before its first message, id, is handed
// over, positioned just before it. Known only after the hand-over, a
// channel whose first message was stored just before conch was killed
// would never be read again: backfill reads known channels only, so what
// was written there while conch was down would be lost. Positioned before
// id, the backfill after a restart hands id over again (the gateway drops
// a message it stored already) and then what came after. The channel is
// known in memory only once the store has it: an error leaves it unknown,
// and the message is not handed over (take tries again).
func (c *Channel) know(ctx context.Context, ch, id string) error {
	n, err := strconv.ParseUint(id, 10, 64)
	c.mu.Lock()
	_, known := c.positions[ch]
	list, _ := json.Marshal(append(slices.Clone(c.known), ch))
	c.mu.Unlock()
	if known || err != nil || n == 0 {
		return nil
	}
	before := strconv.FormatUint(n-1, 10)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.opts.Cursors.SetCursor(sctx, c.positionCursor(ch), before); err != nil {
		return fmt.Errorf("store the position of channel %s: %w", ch, err)
	}
	if err := c.opts.Cursors.SetCursor(sctx, c.knownCursor(), string(list)); err != nil {
		return fmt.Errorf("store the known channels: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.positions[ch]; !ok { // take runs one message at a time
		c.positions[ch] = before
		c.known = append(c.known, ch)
	}
	return nil
}

func (c *Channel) knownCursor() string { return "discord:" + c.me.ID + ":channels" }

func (c *Channel) positionCursor(ch string) string { return "discord:" + c.me.ID + ":position:" + ch }

// loadKnown reads the channels that have a position.
func (c *Channel) loadKnown(ctx context.Context) error {
	v, err := c.opts.Cursors.Cursor(ctx, c.knownCursor())
	if err != nil {
		return fmt.Errorf("discord: load channels: %w", err)
	}
	var known []string
	if v != "" {
		if err := json.Unmarshal([]byte(v), &known); err != nil {
			return fmt.Errorf("discord: stored channels %q: %w", v, err)
		}
	}
	c.mu.Lock()
	c.known = known
	c.mu.Unlock()
	for _, ch := range known {
		p, err := c.opts.Cursors.Cursor(ctx, c.positionCursor(ch))
		if err != nil {
			return fmt.Errorf("discord: load position: %w", err)
		}
		c.mu.Lock()
		c.positions[ch] = p
		c.mu.Unlock()
	}
	return nil
}

func (c *Channel) position(ch string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.positions[ch]
}

// advance stores a channel's position after the message id (handed over,
// or seen and ignored in a known channel). The first handed-over message
// makes a channel known.
func (c *Channel) advance(ctx context.Context, ch, id string, handled bool) {
	c.mu.Lock()
	_, isKnown := c.positions[ch]
	if !isKnown && !handled {
		c.mu.Unlock()
		return
	}
	c.positions[ch] = id
	var list []byte
	if !isKnown {
		c.known = append(c.known, ch)
		list, _ = json.Marshal(c.known)
	}
	c.mu.Unlock()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.opts.Cursors.SetCursor(sctx, c.positionCursor(ch), id); err != nil {
		c.log.Error("discord: store position", "channel", ch, "err", err)
	}
	if list != nil {
		if err := c.opts.Cursors.SetCursor(sctx, c.knownCursor(), string(list)); err != nil {
			c.log.Error("discord: store channels", "err", err)
		}
	}
}

func (c *Channel) noteRead(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteLimitLocked(err)
	if c.health.readErr == nil {
		c.health.readErrAt = c.opts.Now()
	}
	c.health.readErr = err
}

func (c *Channel) noteSend(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteLimitLocked(err)
	if err == nil {
		c.health.sendErr = nil
		return
	}
	c.health.sendErr, c.health.sendErrAt = err, c.opts.Now()
}

func (c *Channel) noteLimitLocked(err error) {
	if retryAfter(err) > 0 {
		c.health.limited++
		c.health.limitedAt = c.opts.Now()
	}
}

// Status implements conch.StatusChannel.
func (c *Channel) Status(_ context.Context, key conch.ConversationKey) []string {
	if !key.IsZero() && key.Channel != conch.ChannelDiscord {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.health
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	var lines []string
	if h.readErr != nil {
		lines = append(lines, fmt.Sprintf("discord: receiving fails since %s: %s", ts(h.readErrAt), describe(h.readErr)))
	}
	if h.limited > 0 && c.opts.Now().Sub(h.limitedAt) < time.Hour {
		lines = append(lines, fmt.Sprintf("discord: rate limited (429) %d time(s), last at %s; calls wait as Discord asks", h.limited, ts(h.limitedAt)))
	}
	if h.sendErr != nil {
		lines = append(lines, fmt.Sprintf("discord: sending failed at %s: %s", ts(h.sendErrAt), describe(h.sendErr)))
	}
	return lines
}

func channelOf(key conch.ConversationKey) (string, error) {
	if key.Channel != conch.ChannelDiscord {
		return "", fmt.Errorf("discord: conversation %s belongs to another channel", key)
	}
	if _, err := strconv.ParseUint(key.ID, 10, 64); err != nil {
		return "", fmt.Errorf("discord: conversation id %q is not a channel id", key.ID)
	}
	return key.ID, nil
}

func keyOf(ch string) conch.ConversationKey {
	return conch.ConversationKey{Channel: conch.ChannelDiscord, ID: ch}
}
