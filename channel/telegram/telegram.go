// Package telegram is conch's Telegram channel over the Bot API
// (github.com/go-telegram/bot for the methods and wire types, our own
// getUpdates loop): one conversation per private chat and per group.
//
// Updates are long-polled; the offset is stored in conch's cursor store
// only after the gateway took the message (HandleInbound returned nil), so
// a crash loses nothing and a restart does not hand a message over twice.
// Replies are Telegram HTML rendered from Markdown, split at 4096
// characters, sent again as plain text when Telegram refuses the markup.
// While a turn runs the chat shows "typing" and one progress message is
// edited in place; when the turn ends it is collapsed into a work log.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"conch"
)

// Channel is the Telegram channel adapter.
type Channel struct {
	opts   Options
	log    *slog.Logger
	render *renderer
	bot    *bot.Bot

	// Set by Run before ready is closed; read-only afterwards.
	handler  conch.Handler
	me       models.User
	ready    chan struct{}
	lifetime context.Context
	bg       sync.WaitGroup

	mu       sync.Mutex
	started  bool
	stopping bool
	progress map[int64]*progressMsg
	health   health
	// questions are the messages showing approval questions (approval.go).
	questions questionMsgs
	// Forum topics: the topic of each message handed over (by external id,
	// bounded) and of each chat's latest one, so answers, progress and
	// typing appear in the topic that was asked in.
	topics    map[string]int
	lastTopic map[int64]int
}

// maxTopics bounds the memory of messages' topics.
const maxTopics = 4096

// health is what Status reports.
type health struct {
	connected   bool
	pollErr     error
	pollErrAt   time.Time
	pollRetryAt time.Time
	conflicts   int
	limited     int // 429 answers since start
	limitedAt   time.Time
	sendErr     error
	sendErrAt   time.Time
	lastPollOK  time.Time
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
	c := &Channel{
		opts:      opts,
		log:       opts.Logger.With("channel", "telegram"),
		render:    newRenderer(),
		ready:     make(chan struct{}),
		progress:  make(map[int64]*progressMsg),
		topics:    make(map[string]int),
		lastTopic: make(map[int64]int),
	}
	b, err := bot.New(opts.Token,
		bot.WithSkipGetMe(),
		bot.WithServerURL(opts.APIURL),
		bot.WithHTTPClient(opts.PollTimeout, opts.HTTPClient),
		bot.WithErrorsHandler(func(err error) { c.log.Debug("telegram library", "err", err) }),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	c.bot = b
	return c, nil
}

// Name implements conch.Channel.
func (c *Channel) Name() conch.ChannelName { return conch.ChannelTelegram }

// Ready is closed once Run has checked the token (getMe) and polls.
func (c *Channel) Ready() <-chan struct{} { return c.ready }

// Me is the bot's own account, known once Ready is closed.
func (c *Channel) Me() models.User {
	<-c.ready
	return c.me
}

// Run checks the token, registers the commands and polls updates until ctx
// is done (then it returns nil) or Telegram refuses the token (then it
// returns the error). Other failures are retried with backoff for ever and
// shown by Status.
func (c *Channel) Run(ctx context.Context, h conch.Handler) error {
	if h == nil {
		return errors.New("telegram run: nil handler")
	}
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("telegram run: already running")
	}
	c.started = true
	c.handler = h
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.lifetime = runCtx
	c.mu.Unlock()

	me, err := c.getMe(runCtx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	c.me = me
	c.mu.Lock()
	c.health.connected = true
	c.mu.Unlock()
	close(c.ready)
	c.log.Info("telegram connected", "bot", "@"+me.Username, "id", me.ID, "api", c.opts.APIURL, "group_policy", c.opts.GroupPolicy)
	c.goBackground(c.setCommands)

	err = c.poll(runCtx)
	cancel()
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	c.bg.Wait()
	return err
}

// goBackground runs f on Run's lifetime unless Run is ending.
func (c *Channel) goBackground(f func(ctx context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping || c.lifetime == nil {
		return false
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		f(c.lifetime)
	}()
	return true
}

// getMe checks the token, retrying transient failures for ever.
func (c *Channel) getMe(ctx context.Context) (models.User, error) {
	var me *models.User
	err := c.opts.Backoff.Retry(ctx, func(ctx context.Context, _ int) error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		u, err := c.bot.GetMe(cctx)
		if err != nil {
			err = classify("getMe", err)
			if isAuth(err) {
				return backoffPermanent(err)
			}
			c.notePoll(err, time.Time{})
			return retryWait(err)
		}
		me = u
		return nil
	}, func(attempt int, err error, wait time.Duration) {
		c.log.Warn("telegram getMe failed, retrying", "attempt", attempt, "wait", wait, "err", err)
	})
	if err != nil {
		if isAuth(err) {
			return models.User{}, &conch.Error{Kind: conch.KindAuth, User: "Telegram refused the bot token",
				Err: fmt.Errorf("telegram: getMe: %w (check telegram.bot_token: the token BotFather gave)", err)}
		}
		return models.User{}, fmt.Errorf("telegram: getMe: %w", err)
	}
	return *me, nil
}

// Commands are the commands shown in Telegram's menu.
var Commands = []models.BotCommand{
	{Command: "stop", Description: "Stop the current task"},
	{Command: "reset", Description: "Start over: forget this conversation and its computer"},
	{Command: "status", Description: "What is running, and the health of conch"},
	{Command: "usage", Description: "What was used today, and the limits"},
	{Command: "help", Description: "What I can do"},
}

// setCommands registers the command menu (best effort, a few retries).
func (c *Channel) setCommands(ctx context.Context) {
	p := c.opts.Backoff
	p.Max = 5
	err := p.Retry(ctx, func(ctx context.Context, _ int) error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := c.bot.SetMyCommands(cctx, &bot.SetMyCommandsParams{Commands: Commands})
		return retryWait(classify("setMyCommands", err))
	}, nil)
	if err != nil && ctx.Err() == nil {
		c.log.Warn("telegram: setMyCommands failed; the command menu may be missing", "err", err)
	}
}

func (c *Channel) offsetCursor() string {
	return "telegram:" + strconv.FormatInt(c.me.ID, 10) + ":offset"
}

// notePoll records a failed poll (err != nil) or a good one.
func (c *Channel) notePoll(err error, retryAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &c.health
	now := c.opts.Now()
	if err == nil {
		h.pollErr, h.lastPollOK = nil, now
		return
	}
	if h.pollErr == nil {
		h.pollErrAt = now
	}
	h.pollErr, h.pollRetryAt = err, retryAt
	var ae *apiError
	if errors.As(err, &ae) {
		switch ae.Code {
		case 409:
			h.conflicts++
		case 429:
			h.limited++
			h.limitedAt = now
		}
	}
}

func (c *Channel) noteSend(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == 429 {
		c.health.limited++
		c.health.limitedAt = c.opts.Now()
	}
	if err == nil {
		c.health.sendErr = nil
		return
	}
	c.health.sendErr, c.health.sendErrAt = err, c.opts.Now()
}

// Status implements conch.StatusChannel: polling failures (another
// process polling the same token, rate limits, an unreachable server) and
// failing sends. The zero key asks for the channel as a whole (doctor).
func (c *Channel) Status(_ context.Context, key conch.ConversationKey) []string {
	if !key.IsZero() && key.Channel != conch.ChannelTelegram {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.health
	var lines []string
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	if !h.connected && h.pollErr != nil {
		lines = append(lines, fmt.Sprintf("telegram: cannot reach the Bot API since %s: %s", ts(h.pollErrAt), describe(h.pollErr)))
	} else if h.pollErr != nil {
		line := fmt.Sprintf("telegram: receiving messages fails since %s: %s", ts(h.pollErrAt), describe(h.pollErr))
		if !h.pollRetryAt.IsZero() {
			line += "; next try " + ts(h.pollRetryAt)
		}
		lines = append(lines, line)
	}
	if h.conflicts > 0 && h.pollErr != nil {
		lines = append(lines, fmt.Sprintf("telegram: %d poll(s) ended by another getUpdates on the same token: stop the other bot instance or webhook", h.conflicts))
	}
	if h.limited > 0 && c.opts.Now().Sub(h.limitedAt) < time.Hour {
		lines = append(lines, fmt.Sprintf("telegram: rate limited by Telegram (429) %d time(s), last at %s; replies wait as Telegram asks", h.limited, ts(h.limitedAt)))
	}
	if h.sendErr != nil {
		lines = append(lines, fmt.Sprintf("telegram: sending failed at %s: %s", ts(h.sendErrAt), describe(h.sendErr)))
	}
	return lines
}

func chatOf(key conch.ConversationKey) (int64, error) {
	if key.Channel != conch.ChannelTelegram {
		return 0, fmt.Errorf("telegram: conversation %s belongs to another channel", key)
	}
	id, err := strconv.ParseInt(key.ID, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("telegram: conversation id %q is not a chat id", key.ID)
	}
	return id, nil
}

func keyOf(chat int64) conch.ConversationKey {
	return conch.ConversationKey{Channel: conch.ChannelTelegram, ID: strconv.FormatInt(chat, 10)}
}
