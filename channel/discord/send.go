package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"conch"
	"conch/channel/internal/markdown"
	"conch/internal/backoff"
)

const (
	// maxContent is Discord's limit on a message's content.
	maxContent = 2000
	// callTimeout bounds one REST call.
	callTimeout = 60 * time.Second
	// sendRetries is how often a failed send is retried (429 waits as asked).
	sendRetries = 5
	// maxUploadBytes is Discord's upload limit for bots in servers without
	// boosts.
	maxUploadBytes = 10 << 20
)

// call runs one REST request with retries: a 429 waits retry_after (the
// buckets' X-RateLimit-* headers are honoured by discordgo before it
// sends), 5xx and network errors back off, other answers return at once.
func (c *Channel) call(ctx context.Context, op string, retries int, fn func(ctx context.Context) error) error {
	p := c.opts.Backoff
	p.Max = retries
	return p.Retry(ctx, func(ctx context.Context, _ int) error {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		err := fn(cctx)
		var po errPermanentOpen
		if errors.As(err, &po) {
			return backoff.Permanent(err)
		}
		return retryWait(classify(op, err))
	}, func(attempt int, err error, wait time.Duration) {
		c.noteSend(err)
		c.log.Warn("discord call failed, retrying", "op", op, "attempt", attempt, "wait", wait, "err", err)
	})
}

// Send implements conch.Channel: Markdown (Discord renders it) split into
// messages of at most 2,000 characters; in servers the first part replies
// to the message it answers.
func (c *Channel) Send(ctx context.Context, out conch.Outbound) error {
	ch, err := channelOf(out.Key)
	if err != nil {
		return err
	}
	if out.Text == "" {
		return errors.New("discord send: empty text")
	}
	_, err = c.sendParts(ctx, ch, splitMarkdown(out.Text, maxContent), c.replyRef(ctx, ch, out.InReplyTo))
	c.noteSend(err)
	return err
}

// replyRef is the message an answer replies to, in server channels. The
// channel's kind is asked for when not known yet: a message that mentions
// the bot is taken without it, and its answer can be sent before anything
// else asked (the reply then went out without its reference).
func (c *Channel) replyRef(ctx context.Context, ch, inReplyTo string) *discordgo.MessageReference {
	msgCh, id, ok := strings.Cut(inReplyTo, ":")
	if !ok || msgCh != ch {
		return nil
	}
	k, err := c.kind(ctx, ch)
	if err != nil {
		c.log.Warn("discord: answer sent without its reply reference", "channel", ch, "err", err)
		return nil
	}
	if k.guild == "" {
		return nil
	}
	f := false
	return &discordgo.MessageReference{MessageID: id, ChannelID: ch, FailIfNotExists: &f}
}

func (c *Channel) sendParts(ctx context.Context, ch string, parts []string, ref *discordgo.MessageReference) (string, error) {
	var first string
	for i, part := range parts {
		ms := &discordgo.MessageSend{Content: part, AllowedMentions: &discordgo.MessageAllowedMentions{}}
		if i == 0 {
			ms.Reference = ref
		}
		var m *discordgo.Message
		err := c.call(ctx, "POST /channels/messages", sendRetries, func(ctx context.Context) error {
			var err error
			m, err = c.dg.ChannelMessageSendComplex(ch, ms, discordgo.WithContext(ctx))
			return err
		})
		if err != nil {
			return first, fmt.Errorf("discord send to %s (part %d of %d): %w", ch, i+1, len(parts), err)
		}
		if first == "" {
			first = m.ID
		}
	}
	return first, nil
}

// SendEditable implements conch.EditingChannel: one message (its end kept
// if too long) that Edit replaces.
func (c *Channel) SendEditable(ctx context.Context, out conch.Outbound) (conch.MessageRef, error) {
	ch, err := channelOf(out.Key)
	if err != nil {
		return conch.MessageRef{}, err
	}
	if out.Text == "" {
		return conch.MessageRef{}, errors.New("discord send: empty text")
	}
	id, err := c.sendParts(ctx, ch, []string{tail(out.Text, maxContent)}, nil)
	c.noteSend(err)
	if err != nil {
		return conch.MessageRef{}, err
	}
	return conch.MessageRef{Key: out.Key, ID: id}, nil
}

// Edit implements conch.EditingChannel.
func (c *Channel) Edit(ctx context.Context, ref conch.MessageRef, text string) error {
	ch, err := channelOf(ref.Key)
	if err != nil {
		return err
	}
	if ref.ID == "" || text == "" {
		return errors.New("discord edit: no message id or empty text")
	}
	body := tail(text, maxContent)
	err = c.call(ctx, "PATCH /channels/messages", 2, func(ctx context.Context) error {
		_, err := c.dg.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: ref.ID, Channel: ch, Content: &body,
			AllowedMentions: &discordgo.MessageAllowedMentions{}}, discordgo.WithContext(ctx))
		return err
	})
	c.noteSend(err)
	return err
}

// SetTyping implements conch.TypingChannel: one typing trigger (Discord
// shows it for about 10 s or until the bot sends; the gateway renews it every
// TypingEvery). Typing cannot be cleared: off does nothing.
func (c *Channel) SetTyping(ctx context.Context, key conch.ConversationKey, typing bool) error {
	ch, err := channelOf(key)
	if err != nil {
		return err
	}
	if !typing {
		return nil
	}
	return c.typingOnce(ctx, ch)
}

// TypingEvery implements conch.TypingChannel.
func (c *Channel) TypingEvery() time.Duration { return c.opts.TypingEvery }

func (c *Channel) typingOnce(ctx context.Context, ch string) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := classify("POST /channels/typing", c.dg.ChannelTyping(ch, discordgo.WithContext(cctx))); err != nil {
		return fmt.Errorf("discord typing in %s: %w", ch, err)
	}
	return nil
}

// SendAttachments implements conch.AttachmentChannel: the text (if any),
// then the files, up to 10 a message.
func (c *Channel) SendAttachments(ctx context.Context, out conch.Outbound) error {
	ch, err := channelOf(out.Key)
	if err != nil {
		return err
	}
	if out.Text != "" {
		if err := c.Send(ctx, out); err != nil {
			return err
		}
	}
	for start := 0; start < len(out.Attachments); start += 10 {
		batch := out.Attachments[start:min(start+10, len(out.Attachments))]
		for _, a := range batch {
			if a.Open == nil {
				return fmt.Errorf("discord send file %q: nothing to read", a.Name)
			}
			if a.Size > maxUploadBytes {
				return conch.Errorf(conch.KindInvalid, "discord send file %q: %s is over Discord's 10 MB limit for bots", a.Name, size(a.Size))
			}
		}
		err := c.call(ctx, "POST /channels/messages", sendRetries, func(ctx context.Context) error {
			ms := &discordgo.MessageSend{AllowedMentions: &discordgo.MessageAllowedMentions{}}
			for _, a := range batch {
				rc, err := a.Open(ctx)
				if err != nil {
					return errPermanentOpen{err}
				}
				defer rc.Close()
				ms.Files = append(ms.Files, &discordgo.File{Name: conch.SafeName(a.Name, "file"), ContentType: a.MediaType, Reader: rc})
			}
			_, err := c.dg.ChannelMessageSendComplex(ch, ms, discordgo.WithContext(ctx))
			return err
		})
		var po errPermanentOpen
		if errors.As(err, &po) {
			return fmt.Errorf("discord send file: %w", po.err)
		}
		c.noteSend(err)
		if err != nil {
			return fmt.Errorf("discord send files to %s: %w", ch, err)
		}
	}
	return nil
}

type errPermanentOpen struct{ err error }

func (e errPermanentOpen) Error() string { return "open: " + e.err.Error() }
func (e errPermanentOpen) Unwrap() error { return e.err }

// tail keeps the end of a long text (progress grows at the bottom).
func tail(s string, limit int) string {
	parts := splitMarkdown(s, limit-2)
	switch len(parts) {
	case 0:
		return s
	case 1:
		return parts[0]
	}
	return "…\n" + parts[len(parts)-1]
}

// splitMarkdown cuts Markdown into pieces Discord takes, block-aware (the
// channels' one splitter). It measures bytes, which are never fewer than
// the characters Discord counts, so a piece is never over the limit.
func splitMarkdown(s string, limit int) []string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if s == "" {
		return nil
	}
	return markdown.SplitSource(s, limit)
}
