package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"conch"
	"conch/channel/internal/markdown"
)

const (
	// callTimeout bounds one Bot API call.
	callTimeout = 60 * time.Second
	// sendRetries is how often a failed send is retried (429 waits as asked).
	sendRetries = 5
	// maxUploadBytes is the Bot API's limit on files a bot sends.
	maxUploadBytes = 50 << 20
	// collapseTimeout bounds collapsing a progress message.
	collapseTimeout = 30 * time.Second
	// editGap is the least time between two edits of a progress message:
	// Telegram allows about one message or edit a second in a chat. The
	// gateway paces progress already; this holds for any pace it picks,
	// including its final flush and our collapse right after.
	editGap = time.Second
)

// progressMsg is the one progress message of a chat's running turn.
type progressMsg struct {
	chat    int64
	id      int
	started time.Time

	// net serialises the calls that change this message (edits from the
	// gateway, a deferred edit after a 429, the final collapse), so they
	// reach Telegram in order. It guards nothing else.
	net sync.Mutex

	mu       sync.Mutex // guards the fields below
	text     string     // latest Markdown
	cooldown time.Time  // Telegram asked to wait (429) until then
	timer    *time.Timer
	done     bool
}

// call runs one Bot API method with retries: 429 waits retry_after, 5xx and
// network errors back off, other 4xx answers return at once.
func (c *Channel) call(ctx context.Context, method string, retries int, fn func(ctx context.Context) error) error {
	p := c.opts.Backoff
	p.Max = retries
	return p.Retry(ctx, func(ctx context.Context, _ int) error {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return retryWait(classify(method, fn(cctx)))
	}, func(attempt int, err error, wait time.Duration) {
		c.noteSend(err)
		c.log.Warn("telegram call failed, retrying", "method", method, "attempt", attempt, "wait", wait, "err", err)
	})
}

// Send implements conch.Channel. Long text is split into several messages;
// only the final answer notifies (notices and progress are silent). In
// groups the answer replies to the message it answers.
func (c *Channel) Send(ctx context.Context, out conch.Outbound) error {
	chat, err := chatOf(out.Key)
	if err != nil {
		return err
	}
	if out.Text == "" {
		return errors.New("telegram send: empty text")
	}
	if out.Kind == conch.OutboundReply {
		c.collapseAsync(chat)
	}
	_, err = c.sendText(ctx, chat, out, false)
	c.noteSend(err)
	return err
}

func (c *Channel) sendText(ctx context.Context, chat int64, out conch.Outbound, single bool) ([]int, error) {
	var parts []string
	if single {
		if s := c.render.single(out.Text, maxMessageLen); s != "" {
			parts = []string{s}
		}
	} else {
		parts = c.render.messages(out.Text, maxMessageLen)
	}
	if len(parts) == 0 { // Markdown that renders to nothing visible
		parts = []string{markdown.TelegramEscape(out.Text)}
	}
	silent := out.Kind != conch.OutboundReply || single
	topic := c.topicFor(chat, out.InReplyTo)
	var ids []int
	for i, part := range parts {
		p := &bot.SendMessageParams{ChatID: chat, MessageThreadID: topic, Text: part, ParseMode: models.ParseModeHTML, DisableNotification: silent}
		if out.Kind != conch.OutboundReply {
			p.LinkPreviewOptions = &models.LinkPreviewOptions{IsDisabled: bot.True()}
		}
		if i == 0 {
			p.ReplyParameters = c.replyTo(chat, out)
		}
		got, err := c.sendMessage(ctx, p)
		ids = append(ids, got...)
		if err != nil {
			return ids, fmt.Errorf("telegram send to %d (part %d of %d): %w", chat, i+1, len(parts), err)
		}
	}
	return ids, nil
}

// replyTo quotes the answered message in groups, where several people
// talk; in a private chat the answer simply follows.
func (c *Channel) replyTo(chat int64, out conch.Outbound) *models.ReplyParameters {
	if chat > 0 || out.InReplyTo == "" {
		return nil
	}
	msgChat, msg, ok := parseExternalID(out.InReplyTo)
	if !ok || msgChat != chat {
		return nil
	}
	return &models.ReplyParameters{MessageID: msg, AllowSendingWithoutReply: true}
}

// sendMessage sends HTML, and the same text without markup if Telegram
// cannot parse the HTML (400 "can't parse entities").
func (c *Channel) sendMessage(ctx context.Context, p *bot.SendMessageParams) ([]int, error) {
	var m *models.Message
	err := c.call(ctx, "sendMessage", sendRetries, func(ctx context.Context) error {
		var err error
		m, err = c.bot.SendMessage(ctx, p)
		return err
	})
	if err == nil {
		return []int{m.ID}, nil
	}
	if !isEntityError(err) || p.ParseMode == "" {
		return nil, err
	}
	c.log.Warn("telegram refused the formatting, sending plain text", "chat", p.ChatID, "err", err)
	var ids []int
	for i, piece := range markdown.SplitPlain(markdown.TelegramPlain(p.Text), maxMessageLen) {
		pp := *p
		pp.Text, pp.ParseMode = piece, ""
		if i > 0 {
			pp.ReplyParameters = nil
		}
		err := c.call(ctx, "sendMessage", sendRetries, func(ctx context.Context) error {
			var err error
			m, err = c.bot.SendMessage(ctx, &pp)
			return err
		})
		if err != nil {
			return ids, err
		}
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// SendEditable implements conch.EditingChannel: one silent message (its end
// kept if the text is too long) whose reference Edit accepts. A progress
// message becomes the chat's progress message, collapsed when the turn ends.
func (c *Channel) SendEditable(ctx context.Context, out conch.Outbound) (conch.MessageRef, error) {
	chat, err := chatOf(out.Key)
	if err != nil {
		return conch.MessageRef{}, err
	}
	if out.Text == "" {
		return conch.MessageRef{}, errors.New("telegram send: empty text")
	}
	ids, err := c.sendText(ctx, chat, out, true)
	c.noteSend(err)
	if err != nil {
		return conch.MessageRef{}, err
	}
	if out.Kind == conch.OutboundProgress {
		p := &progressMsg{chat: chat, id: ids[0], started: c.opts.Now(), text: out.Text, cooldown: c.opts.Now().Add(editGap)}
		c.mu.Lock()
		old := c.progress[chat]
		c.progress[chat] = p
		c.mu.Unlock()
		if old != nil {
			c.collapseAsyncMsg(old)
		}
	}
	return conch.MessageRef{Key: out.Key, ID: strconv.Itoa(ids[0])}, nil
}

// Edit implements conch.EditingChannel. Telegram's rate limit on edits
// (429) is honoured without failing the caller: the newest text is kept and
// shown once the wait is over, so no progress is lost and nothing floods.
func (c *Channel) Edit(ctx context.Context, ref conch.MessageRef, text string) error {
	chat, err := chatOf(ref.Key)
	if err != nil {
		return err
	}
	id, err := strconv.Atoi(ref.ID)
	if err != nil || id <= 0 {
		return fmt.Errorf("telegram edit: %q is not a message id", ref.ID)
	}
	if text == "" {
		return errors.New("telegram edit: empty text")
	}
	c.mu.Lock()
	p := c.progress[chat]
	c.mu.Unlock()
	if p == nil || p.id != id {
		return c.editNow(ctx, chat, id, c.render.single(text, maxMessageLen))
	}
	p.mu.Lock()
	p.text = text
	wait := p.cooldown.Sub(c.opts.Now())
	p.mu.Unlock()
	if wait > 0 {
		c.scheduleEdit(p, wait)
		return nil
	}
	return c.editProgress(ctx, p)
}

// editProgress shows a progress message's newest text.
func (c *Channel) editProgress(ctx context.Context, p *progressMsg) error {
	p.net.Lock()
	defer p.net.Unlock()
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return nil
	}
	text := p.text
	p.mu.Unlock()
	err := c.editOnce(ctx, p.chat, p.id, c.render.single(text, maxMessageLen))
	p.mu.Lock()
	p.cooldown = c.opts.Now().Add(editGap)
	p.mu.Unlock()
	if d := retryAfter(err); d > 0 {
		c.noteSend(err)
		p.mu.Lock()
		p.cooldown = c.opts.Now().Add(d)
		p.mu.Unlock()
		c.scheduleEdit(p, d)
		return nil
	}
	return err
}

// scheduleEdit shows the newest text after d (once; later edits join it).
func (c *Channel) scheduleEdit(p *progressMsg, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil || p.done {
		return
	}
	p.timer = time.AfterFunc(d, func() {
		p.mu.Lock()
		p.timer = nil
		p.mu.Unlock()
		c.goBackground(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			if err := c.editProgress(ctx, p); err != nil {
				c.log.Debug("telegram: deferred progress edit", "chat", p.chat, "err", err)
			}
		})
	})
}

// editOnce edits a message once (no retries: progress is best effort and
// the next edit carries the full text); plain text if the HTML is refused.
func (c *Channel) editOnce(ctx context.Context, chat int64, id int, html string) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.bot.EditMessageText(cctx, &bot.EditMessageTextParams{ChatID: chat, MessageID: id, Text: html, ParseMode: models.ParseModeHTML,
		LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: bot.True()}})
	err = classify("editMessageText", err)
	if isEntityError(err) {
		plain := markdown.SplitPlain(markdown.TelegramPlain(html), maxMessageLen)
		if len(plain) == 0 {
			return nil
		}
		_, err = c.bot.EditMessageText(cctx, &bot.EditMessageTextParams{ChatID: chat, MessageID: id, Text: plain[0],
			LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: bot.True()}})
		err = classify("editMessageText", err)
	}
	if isNotModified(err) {
		return nil
	}
	return err
}

func (c *Channel) editNow(ctx context.Context, chat int64, id int, html string) error {
	err := c.editOnce(ctx, chat, id, html)
	if retryAfter(err) > 0 {
		c.noteSend(err)
	}
	return err
}

func (c *Channel) collapseAsync(chat int64) {
	c.mu.Lock()
	p := c.progress[chat]
	delete(c.progress, chat)
	c.mu.Unlock()
	if p != nil {
		c.collapseAsyncMsg(p)
	}
}

// collapseAsyncMsg turns a finished turn's progress message into a work
// log folded into an expandable quote, without holding up the answer.
func (c *Channel) collapseAsyncMsg(p *progressMsg) {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	text, wait := p.text, p.cooldown.Sub(c.opts.Now())
	p.mu.Unlock()
	html := collapsedHTML(c.render, text, c.opts.Now().Sub(p.started))
	started := c.goBackground(func(ctx context.Context) {
		p.net.Lock()
		defer p.net.Unlock()
		if wait > 0 && wait < collapseTimeout {
			if err := c.opts.Backoff.Sleep(ctx, wait); err != nil {
				return
			}
		}
		ctx, cancel := context.WithTimeout(ctx, collapseTimeout)
		defer cancel()
		if err := c.editNow(ctx, p.chat, p.id, html); err != nil {
			c.log.Debug("telegram: collapse progress", "chat", p.chat, "err", err)
		}
	})
	if !started {
		c.log.Debug("telegram: progress not collapsed, channel stopping", "chat", p.chat)
	}
}

// collapsedHTML is the work log: a one-line header, the steps in an
// expandable quote (Telegram shows its first lines and "show more").
func collapsedHTML(r *renderer, text string, took time.Duration) string {
	steps := markdown.TelegramPlain(r.single(text, maxMessageLen-200))
	took = took.Round(time.Second)
	if took < time.Second {
		took = time.Second
	}
	return "<i>Work log · " + markdown.TelegramEscape(took.String()) + "</i>\n<blockquote expandable>" + markdown.TelegramEscape(steps) + "</blockquote>"
}

// SetTyping implements conch.TypingChannel: one "typing" action (Telegram
// shows it for 5 s or until the bot sends a message; the gateway renews it
// every TypingEvery). Turning it off also collapses the turn's progress
// message: it means the turn is over.
func (c *Channel) SetTyping(ctx context.Context, key conch.ConversationKey, typing bool) error {
	chat, err := chatOf(key)
	if err != nil {
		return err
	}
	if !typing {
		c.collapseAsync(chat)
		return nil
	}
	return c.chatAction(ctx, chat, models.ChatActionTyping)
}

// TypingEvery implements conch.TypingChannel.
func (c *Channel) TypingEvery() time.Duration { return c.opts.TypingEvery }

func (c *Channel) chatAction(ctx context.Context, chat int64, action models.ChatAction) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := c.bot.SendChatAction(cctx, &bot.SendChatActionParams{ChatID: chat, MessageThreadID: c.topicFor(chat, ""), Action: action})
	if err = classify("sendChatAction", err); err != nil {
		return fmt.Errorf("telegram typing in %d: %w", chat, err)
	}
	return nil
}

// errPermanentOpen: the file to send cannot be read; retrying is pointless.
type errPermanentOpen struct{ err error }

func (e errPermanentOpen) Error() string { return "open: " + e.err.Error() }
func (e errPermanentOpen) Unwrap() error { return e.err }

// reader hides the concrete type of a file being uploaded: the library
// calls reflect.Value.IsNil on InputFileUpload.Data, which panics for a
// struct such as the one io.NopCloser returns.
type reader struct{ r io.Reader }

func (r *reader) Read(p []byte) (int, error) { return r.r.Read(p) }
