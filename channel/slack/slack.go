// Package slack is conch's Slack channel over slack-go: Socket Mode in (no
// public URL), the Web API out. A DM is a conversation, and so is each
// thread: in channels the bot answers a message that mentions it, in a
// thread under that message, and from then on every message of the thread
// (channel_policy "mention"; "all" answers every message, "deny" none).
//
// Each events_api envelope is acknowledged only after the gateway took its
// message (HandleInbound returned nil): a crash before the ack makes Slack
// deliver it again, and the store refuses the message's second copy by its
// external id (team:channel:ts), so each message is handled exactly once.
// Replies are Markdown rendered to Slack mrkdwn, split at 4,000
// characters, sent as plain text if Slack refuses them. While a turn runs
// its message carries a reaction (":hourglass_flowing_sand:"; a bot cannot
// show "typing" over the Events API, and the assistant thread status works
// only in assistant threads), and progress is one message edited in place
// (chat.update).
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"conch"
)

// Channel is the Slack channel adapter.
type Channel struct {
	opts Options
	log  *slog.Logger
	api  *slack.Client

	// Set by Run before ready is closed; read-only afterwards.
	handler conch.Handler
	team    string
	me      string // the bot's user id
	botID   string
	ready   chan struct{}

	mu      sync.Mutex
	started bool
	threads map[string]bool // thread cursors known to be set
	names   map[string]string
	pending map[conch.ConversationKey][]msgRef // handed over, turn not yet run
	working map[conch.ConversationKey]msgRef   // carries the working reaction
	health  health
	// questions are the messages showing approval questions (approval.go).
	questions map[string]msgRef
}

// msgRef is one Slack message.
type msgRef struct{ channel, ts string }

type health struct {
	connected  bool
	connErr    error
	connErrAt  time.Time
	limited    int
	limitedAt  time.Time
	sendErr    error
	sendErrAt  time.Time
	redelivery int
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
		opts:    opts,
		log:     opts.Logger.With("channel", "slack"),
		ready:   make(chan struct{}),
		threads: map[string]bool{},
		names:   map[string]string{},
		pending: map[conch.ConversationKey][]msgRef{},
		working: map[conch.ConversationKey]msgRef{},
	}
	c.api = slack.New(opts.BotToken, slack.OptionAPIURL(opts.APIURL), slack.OptionAppLevelToken(opts.AppToken),
		slack.OptionHTTPClient(opts.HTTPClient))
	return c, nil
}

// Name implements conch.Channel.
func (c *Channel) Name() conch.ChannelName { return conch.ChannelSlack }

// Ready is closed once Run has checked the bot token.
func (c *Channel) Ready() <-chan struct{} { return c.ready }

// Run checks the bot token (auth.test), then receives events over Socket
// Mode until ctx is done (it returns nil) or Slack refuses a token (it
// returns the error). Other failures are retried for ever and shown by
// Status.
func (c *Channel) Run(ctx context.Context, h conch.Handler) error {
	if h == nil {
		return errors.New("slack run: nil handler")
	}
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("slack run: already running")
	}
	c.started = true
	c.handler = h
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Unlock()

	if err := c.authTest(runCtx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	close(c.ready)
	c.log.Info("slack connected", "team", c.team, "bot", c.me, "channel_policy", c.opts.ChannelPolicy)

	var err error
	if c.opts.Mode == ModeEvents {
		c.log.Info("slack events api", "path", EventsPath)
		<-runCtx.Done() // the HTTP host hands events over (events.go)
	} else {
		err = c.receive(runCtx)
	}
	return err
}

// authTest learns who the bot is, retrying transient failures for ever.
func (c *Channel) authTest(ctx context.Context) error {
	err := c.opts.Backoff.Retry(ctx, func(ctx context.Context, _ int) error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := c.api.AuthTestContext(cctx)
		if err = classify("auth.test", err); err != nil {
			c.noteConn(err)
			return retryWait(err)
		}
		c.team, c.me, c.botID = r.TeamID, r.UserID, r.BotID
		return nil
	}, func(attempt int, err error, wait time.Duration) {
		c.log.Warn("slack auth.test failed, retrying", "attempt", attempt, "wait", wait, "err", err)
	})
	if isAuth(err) {
		return authError(err, "bot_token")
	}
	if err != nil {
		return fmt.Errorf("slack: auth.test: %w", err)
	}
	return nil
}

// receive runs the Socket Mode client and hands its events over one at a
// time, in the order Slack sent them.
func (c *Channel) receive(ctx context.Context) error {
	sm := socketmode.New(c.api, socketmode.OptionLog(slogLogger{c.log}))
	events := make(chan error, 1)
	go func() { events <- c.consume(ctx, sm) }()
	var err error
	for ctx.Err() == nil {
		err = sm.RunContext(ctx)
		if ctx.Err() != nil {
			break
		}
		err = classify("apps.connections.open", err)
		c.noteConn(err)
		if isAuth(err) {
			return authError(err, "app_token")
		}
		c.log.Warn("slack: socket mode ended, reconnecting", "err", err)
		if c.opts.Backoff.Sleep(ctx, max(c.opts.Backoff.Delay(1), retryAfter(err))) != nil {
			break
		}
	}
	<-events
	return nil
}

// consume reads the Socket Mode client's events until ctx ends.
func (c *Channel) consume(ctx context.Context, sm *socketmode.Client) error {
	for {
		var ev socketmode.Event
		select {
		case <-ctx.Done():
			return nil
		case ev = <-sm.Events:
		}
		switch ev.Type {
		case socketmode.EventTypeConnected:
			c.noteConn(nil)
			c.log.Info("slack socket mode connected")
		case socketmode.EventTypeConnectionError:
			if ce, ok := ev.Data.(*slack.ConnectionErrorEvent); ok {
				c.noteConn(classify("apps.connections.open", ce.ErrorObj))
			}
		case socketmode.EventTypeEventsAPI:
			if ev.Request == nil {
				continue
			}
			if ev.Request.RetryAttempt > 0 {
				c.mu.Lock()
				c.health.redelivery++
				c.mu.Unlock()
			}
			if err := c.onEnvelope(ctx, ev.Request.Payload); err != nil {
				// Not acknowledged: Slack delivers the envelope again.
				c.log.Warn("slack: event not handed over; Slack will deliver it again", "envelope", ev.Request.EnvelopeID, "err", err)
				continue
			}
			if err := sm.AckCtx(ctx, ev.Request.EnvelopeID, nil); err != nil && ctx.Err() == nil {
				c.log.Debug("slack: ack", "envelope", ev.Request.EnvelopeID, "err", err)
			}
		case socketmode.EventTypeInteractive:
			if ev.Request != nil {
				c.ackInteractive(ctx, sm, ev.Request)
			}
		case socketmode.EventTypeSlashCommand:
			if ev.Request != nil {
				_ = sm.AckCtx(ctx, ev.Request.EnvelopeID, nil)
			}
		case socketmode.EventTypeErrorBadMessage:
			c.log.Debug("slack: unreadable socket message", "data", ev.Data)
		}
	}
}

func (c *Channel) noteConn(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteLimitLocked(err)
	if err == nil {
		c.health.connected, c.health.connErr = true, nil
		return
	}
	if c.health.connErr == nil {
		c.health.connErrAt = c.opts.Now()
	}
	c.health.connErr = err
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

// Status implements conch.StatusChannel: connection failures, rate limits
// and failing sends. The zero key asks for the channel as a whole.
func (c *Channel) Status(_ context.Context, key conch.ConversationKey) []string {
	if !key.IsZero() && key.Channel != conch.ChannelSlack {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.health
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	var lines []string
	if h.connErr != nil {
		lines = append(lines, fmt.Sprintf("slack: socket mode fails since %s: %s", ts(h.connErrAt), describe(h.connErr)))
	}
	if h.limited > 0 && c.opts.Now().Sub(h.limitedAt) < time.Hour {
		lines = append(lines, fmt.Sprintf("slack: rate limited (429) %d time(s), last at %s; calls wait as Slack asks", h.limited, ts(h.limitedAt)))
	}
	if h.sendErr != nil {
		lines = append(lines, fmt.Sprintf("slack: sending failed at %s: %s", ts(h.sendErrAt), describe(h.sendErr)))
	}
	return lines
}

// Conversation keys: "<team>:<channel>" for a DM outside threads,
// "<team>:<channel>:<thread ts>" for a thread.
func keyOf(team, channel, thread string) conch.ConversationKey {
	id := team + ":" + channel
	if thread != "" {
		id += ":" + thread
	}
	return conch.ConversationKey{Channel: conch.ChannelSlack, ID: id}
}

// place is where a conversation's messages go.
func placeOf(key conch.ConversationKey) (channel, thread string, err error) {
	if key.Channel != conch.ChannelSlack {
		return "", "", fmt.Errorf("slack: conversation %s belongs to another channel", key)
	}
	parts := strings.Split(key.ID, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[1] == "" {
		return "", "", fmt.Errorf("slack: conversation id %q is not team:channel[:thread]", key.ID)
	}
	if len(parts) == 3 {
		thread = parts[2]
	}
	return parts[1], thread, nil
}

// externalID identifies a message: ts is unique per channel.
func externalID(team, channel, ts string) string { return team + ":" + channel + ":" + ts }

// slogLogger carries slack-go's log lines to slog at debug level.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Output(_ int, msg string) error {
	s.l.Debug("slack library", "msg", strings.TrimSpace(msg))
	return nil
}
