package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/slack-go/slack"

	"conch"
	"conch/channel/internal/markdown"
	"conch/internal/backoff"
)

const (
	// callTimeout bounds one Web API call.
	callTimeout = 60 * time.Second
	// sendRetries is how often a failed send is retried (429 waits as asked).
	sendRetries = 5
	// maxUploadBytes is Slack's limit on one uploaded file (1 GB).
	maxUploadBytes = 1 << 30
)

// call runs one Web API method with retries: a 429 waits Retry-After,
// transient errors back off, other errors return at once.
func (c *Channel) call(ctx context.Context, method string, retries int, fn func(ctx context.Context) error) error {
	p := c.opts.Backoff
	p.Max = retries
	err := p.Retry(ctx, func(ctx context.Context, _ int) error {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		err := fn(cctx)
		var po errPermanentOpen
		if errors.As(err, &po) {
			return backoff.Permanent(err)
		}
		return retryWait(classify(method, err))
	}, func(attempt int, err error, wait time.Duration) {
		c.noteSend(err)
		c.log.Warn("slack call failed, retrying", "method", method, "attempt", attempt, "wait", wait, "err", err)
	})
	return err
}

// Send implements conch.Channel: Markdown as mrkdwn, split into several
// messages when long; in the conversation's thread, if it has one.
func (c *Channel) Send(ctx context.Context, out conch.Outbound) error {
	channel, thread, err := placeOf(out.Key)
	if err != nil {
		return err
	}
	if out.Text == "" {
		return errors.New("slack send: empty text")
	}
	_, err = c.sendText(ctx, channel, thread, markdown.SlackMessages(out.Text, markdown.SlackMaxText))
	c.noteSend(err)
	return err
}

// sendText posts parts in order; if Slack refuses a part's text (not a
// token or channel problem), the part goes again as plain text.
func (c *Channel) sendText(ctx context.Context, channel, thread string, parts []string) (string, error) {
	var first string
	for i, part := range parts {
		ts, err := c.post(ctx, channel, thread, part, true)
		if err != nil && isContentError(err) {
			c.log.Warn("slack refused the formatting, sending plain text", "channel", channel, "err", err)
			for _, p := range markdown.SplitSlackText(markdown.SlackPlain(part), markdown.SlackMaxText) {
				if ts, err = c.post(ctx, channel, thread, p, false); err != nil {
					break
				}
			}
		}
		if err != nil {
			return first, fmt.Errorf("slack send to %s (part %d of %d): %w", channel, i+1, len(parts), err)
		}
		if first == "" {
			first = ts
		}
	}
	return first, nil
}

// isContentError: Slack refused the message's content, not the request.
func isContentError(err error) bool {
	switch codeOf(err) {
	case "msg_too_long", "invalid_blocks", "invalid_arguments", "no_text", "invalid_attachments":
		return true
	}
	return false
}

func (c *Channel) post(ctx context.Context, channel, thread, text string, mrkdwn bool) (string, error) {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false), slack.MsgOptionDisableLinkUnfurl()}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	if !mrkdwn {
		opts = append(opts, slack.MsgOptionDisableMarkdown())
	}
	var ts string
	err := c.call(ctx, "chat.postMessage", sendRetries, func(ctx context.Context) error {
		var err error
		_, ts, err = c.api.PostMessageContext(ctx, channel, opts...)
		return err
	})
	return ts, err
}

// SendEditable implements conch.EditingChannel: one message (its end kept
// if the text is too long) that Edit replaces with chat.update.
func (c *Channel) SendEditable(ctx context.Context, out conch.Outbound) (conch.MessageRef, error) {
	channel, thread, err := placeOf(out.Key)
	if err != nil {
		return conch.MessageRef{}, err
	}
	if out.Text == "" {
		return conch.MessageRef{}, errors.New("slack send: empty text")
	}
	ts, err := c.sendText(ctx, channel, thread, []string{markdown.SlackSingle(out.Text, markdown.SlackMaxText)})
	c.noteSend(err)
	if err != nil {
		return conch.MessageRef{}, err
	}
	return conch.MessageRef{Key: out.Key, ID: ts}, nil
}

// Edit implements conch.EditingChannel. A rate limit (chat.update is Tier
// 3, about 50 a minute) is waited out as Slack asks; the gateway's
// progress throttle keeps edits well below it.
func (c *Channel) Edit(ctx context.Context, ref conch.MessageRef, text string) error {
	channel, _, err := placeOf(ref.Key)
	if err != nil {
		return err
	}
	if ref.ID == "" {
		return errors.New("slack edit: no message ts")
	}
	if text == "" {
		return errors.New("slack edit: empty text")
	}
	body := markdown.SlackSingle(text, markdown.SlackMaxText)
	err = c.call(ctx, "chat.update", 2, func(ctx context.Context) error {
		_, _, _, err := c.api.UpdateMessageContext(ctx, channel, ref.ID, slack.MsgOptionText(body, false))
		return err
	})
	if isContentError(err) {
		plain := markdown.SplitSlackText(markdown.SlackPlain(body), markdown.SlackMaxText)
		err = c.call(ctx, "chat.update", 2, func(ctx context.Context) error {
			_, _, _, err := c.api.UpdateMessageContext(ctx, channel, ref.ID, slack.MsgOptionText(plain[len(plain)-1], false),
				slack.MsgOptionDisableMarkdown())
			return err
		})
	}
	c.noteSend(err)
	return err
}

// SetTyping implements conch.TypingChannel. Slack has no typing indicator
// for bots on the Events API, so the message being worked on carries a
// reaction (Options.WorkingReaction) until its turn ends. The message is
// the conversation's oldest one handed over and not yet worked on (turns
// run in arrival order); a turn resumed after a restart shows none.
// TypingEvery implements conch.TypingChannel: the reaction stays until it
// is removed, so it is never shown again during a turn.
func (c *Channel) TypingEvery() time.Duration { return 0 }

func (c *Channel) SetTyping(ctx context.Context, key conch.ConversationKey, typing bool) error {
	if _, _, err := placeOf(key); err != nil {
		return err
	}
	if c.opts.WorkingReaction == "-" {
		return nil
	}
	c.mu.Lock()
	var ref msgRef
	var ok bool
	if typing {
		if q := c.pending[key]; len(q) > 0 {
			ref, ok = q[0], true
			if len(q) == 1 {
				delete(c.pending, key)
			} else {
				c.pending[key] = q[1:]
			}
			c.working[key] = ref
		}
	} else {
		ref, ok = c.working[key]
		delete(c.working, key)
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	item := slack.NewRefToMessage(ref.channel, ref.ts)
	name := c.opts.WorkingReaction
	var err error
	if typing {
		err = c.call(ctx, "reactions.add", 2, func(ctx context.Context) error { return c.api.AddReactionContext(ctx, name, item) })
		if codeOf(err) == "already_reacted" {
			err = nil
		}
	} else {
		err = c.call(ctx, "reactions.remove", 2, func(ctx context.Context) error { return c.api.RemoveReactionContext(ctx, name, item) })
		if codeOf(err) == "no_reaction" {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("slack working reaction on %s: %w", ref.ts, err)
	}
	return nil
}

// SendAttachments implements conch.AttachmentChannel: the text (if any),
// then each file uploaded into the conversation (files.getUploadURLExternal,
// the upload, files.completeUploadExternal).
func (c *Channel) SendAttachments(ctx context.Context, out conch.Outbound) error {
	channel, thread, err := placeOf(out.Key)
	if err != nil {
		return err
	}
	if out.Text != "" {
		if err := c.Send(ctx, out); err != nil {
			return err
		}
	}
	for _, a := range out.Attachments {
		if a.Open == nil {
			return fmt.Errorf("slack send file %q: nothing to read", a.Name)
		}
		if a.Size > maxUploadBytes {
			return conch.Errorf(conch.KindInvalid, "slack send file %q: %s is over Slack's 1 GB limit", a.Name, size(a.Size))
		}
		name := conch.SafeName(a.Name, "file")
		err := c.call(ctx, "files.upload", sendRetries, func(ctx context.Context) error {
			rc, err := a.Open(ctx)
			if err != nil {
				return errPermanentOpen{err}
			}
			defer rc.Close()
			data, err := io.ReadAll(io.LimitReader(rc, maxUploadBytes+1))
			if err != nil {
				return errPermanentOpen{err}
			}
			if len(data) == 0 {
				return errPermanentOpen{errors.New("empty file")}
			}
			_, err = c.api.UploadFileContext(ctx, slack.UploadFileParameters{
				Filename: name, Title: name, FileSize: len(data), Content: string(data),
				Channel: channel, ThreadTimestamp: thread,
			})
			return err
		})
		var po errPermanentOpen
		if errors.As(err, &po) {
			return fmt.Errorf("slack send file %q: %w", a.Name, po.err)
		}
		c.noteSend(err)
		if err != nil {
			return fmt.Errorf("slack send file %q to %s: %w", a.Name, channel, err)
		}
	}
	return nil
}

// errPermanentOpen: the file to send cannot be read; retrying is pointless.
type errPermanentOpen struct{ err error }

func (e errPermanentOpen) Error() string { return "open: " + e.err.Error() }
func (e errPermanentOpen) Unwrap() error { return e.err }
