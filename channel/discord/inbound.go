package discord

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"conch"
)

// knownCommands are the gateway's commands, typed "/stop" or "!stop".
var knownCommands = map[string]bool{"stop": true, "reset": true, "status": true, "help": true}

// take hands one message over if it is for the bot, then moves the
// channel's position past it. Called with c.intake held. An error means
// it was not handed over (the position stays).
func (c *Channel) take(ctx context.Context, m *discordgo.Message) error {
	if p := c.position(m.ChannelID); p != "" && !snowLess(p, m.ID) {
		return nil // handed over already (a replay, or backfill got there first)
	}
	handled, err := c.onMessage(ctx, m)
	if err != nil {
		return err
	}
	c.advance(ctx, m.ChannelID, m.ID, handled)
	return nil
}

var mentionRE = regexp.MustCompile(`<@!?(\d+)>`)

// onMessage turns a message into a conch.Inbound when it is for the bot;
// whether the sender may talk to conch is the gateway's decision. It
// reports whether the message was handed over.
func (c *Channel) onMessage(ctx context.Context, m *discordgo.Message) (bool, error) {
	if m.Author == nil || m.Author.Bot || m.Author.ID == c.me.ID {
		return false, nil
	}
	switch m.Type {
	case discordgo.MessageTypeDefault, discordgo.MessageTypeReply:
	default:
		return false, nil // joins, pins, thread notices
	}
	dm := m.GuildID == ""
	if dm {
		// A direct message's channel is no server's and no thread: its
		// answer needs no GET /channels to know it replies to nothing.
		c.mu.Lock()
		if _, ok := c.kinds[m.ChannelID]; !ok {
			c.kinds[m.ChannelID] = channelKind{}
		}
		c.mu.Unlock()
	}
	if !dm {
		switch c.opts.GuildPolicy {
		case GuildDeny:
			return false, nil
		case GuildMention:
			ok, err := c.addressed(ctx, m)
			if err != nil || !ok {
				return false, err
			}
		}
	}
	text := c.plainText(m.Content)
	atts, notes := c.attachments(m.Attachments)
	switch {
	case text != "":
	case len(atts) > 0:
		text = "[file " + atts[0].Name + "]"
	case len(notes) > 0:
		text = "[file]"
	default:
		return false, nil
	}
	if len(notes) > 0 {
		text += "\n\n" + strings.Join(notes, "\n")
	}
	if len(text) > maxInboundBytes {
		text = strings.ToValidUTF8(text[:maxInboundBytes], "") + "\n[… message cut at 32 KB]"
	}
	in := conch.Inbound{
		Key:         keyOf(m.ChannelID),
		Sender:      conch.UserID(m.Author.ID),
		SenderName:  displayName(m.Author),
		Text:        text,
		ExternalID:  m.ChannelID + ":" + m.ID,
		Attachments: atts,
		ReceivedAt:  m.Timestamp,
	}
	if !dm {
		// The allowlist may name the server too: <guild id>:<user id>.
		in.SenderAliases = []conch.UserID{conch.UserID(m.GuildID + ":" + m.Author.ID)}
	}
	if err := c.know(ctx, m.ChannelID, m.ID); err != nil {
		return false, err
	}
	if err := c.handler.HandleInbound(ctx, in); err != nil {
		if conch.KindOf(err) == conch.KindInvalid {
			c.log.Warn("discord: message refused by the gateway, skipped", "message", in.ExternalID, "err", err)
			return true, nil
		}
		return false, fmt.Errorf("handle message %s: %w", in.ExternalID, err)
	}
	if !dm {
		c.join(ctx, m.ChannelID)
	}
	return true, nil
}

func displayName(u *discordgo.User) string {
	if u.GlobalName != "" {
		return u.GlobalName
	}
	return u.Username
}

// addressed: the message mentions the bot, replies to it, is a command,
// or is in a thread the bot was mentioned in.
func (c *Channel) addressed(ctx context.Context, m *discordgo.Message) (bool, error) {
	for _, u := range m.Mentions {
		if u != nil && u.ID == c.me.ID {
			return true, nil
		}
	}
	if r := m.ReferencedMessage; r != nil && r.Author != nil && r.Author.ID == c.me.ID {
		return true, nil
	}
	if t := c.plainText(m.Content); strings.HasPrefix(t, "/") && knownCommands[strings.TrimPrefix(strings.Fields(t + " x")[0], "/")] {
		return true, nil
	}
	kind, err := c.kind(ctx, m.ChannelID)
	if err != nil || !kind.thread {
		return false, err
	}
	return c.joinedThread(ctx, m.ChannelID)
}

// kind is a channel's server and whether it is a thread (GET
// /channels/{id}, cached).
func (c *Channel) kind(ctx context.Context, ch string) (channelKind, error) {
	c.mu.Lock()
	k, ok := c.kinds[ch]
	c.mu.Unlock()
	if ok {
		return k, nil
	}
	var info *discordgo.Channel
	err := c.call(ctx, "GET /channels", 3, func(ctx context.Context) error {
		var err error
		info, err = c.dg.Channel(ch, discordgo.WithContext(ctx))
		return err
	})
	if err != nil {
		return channelKind{}, fmt.Errorf("discord: channel %s: %w", ch, err)
	}
	k = channelKind{guild: info.GuildID, thread: info.IsThread()}
	c.mu.Lock()
	c.kinds[ch] = k
	c.mu.Unlock()
	return k, nil
}

func (c *Channel) threadCursor(ch string) string { return "discord:" + c.me.ID + ":thread:" + ch }

func (c *Channel) joinedThread(ctx context.Context, ch string) (bool, error) {
	c.mu.Lock()
	j := c.joined[ch]
	c.mu.Unlock()
	if j {
		return true, nil
	}
	v, err := c.opts.Cursors.Cursor(ctx, c.threadCursor(ch))
	if err != nil {
		return false, fmt.Errorf("discord: load thread: %w", err)
	}
	if v != "" {
		c.mu.Lock()
		c.joined[ch] = true
		c.mu.Unlock()
	}
	return v != "", nil
}

// join records that the bot answers every message of a thread from now on
// (for other server channels it stays mention-only).
func (c *Channel) join(ctx context.Context, ch string) {
	kind, err := c.kind(ctx, ch)
	if err != nil || !kind.thread {
		return
	}
	c.mu.Lock()
	known := c.joined[ch]
	c.joined[ch] = true
	c.mu.Unlock()
	if known {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.opts.Cursors.SetCursor(sctx, c.threadCursor(ch), "1"); err != nil {
		c.log.Error("discord: store thread", "thread", ch, "err", err)
	}
}

// plainText drops the bot's own mention and turns "!stop" into "/stop".
func (c *Channel) plainText(s string) string {
	s = mentionRE.ReplaceAllStringFunc(s, func(m string) string {
		if mentionRE.FindStringSubmatch(m)[1] == c.me.ID {
			return ""
		}
		return m
	})
	s = strings.TrimLeft(strings.TrimSpace(s), ":, ")
	if cmd, ok := strings.CutPrefix(s, "!"); ok {
		word, rest, _ := strings.Cut(cmd, " ")
		if knownCommands[strings.ToLower(word)] {
			s = "/" + strings.ToLower(word)
			if rest != "" {
				s += " " + rest
			}
		}
	}
	return s
}

// attachments describes a message's files as conch attachments read from
// Discord's CDN when opened; a file over the size cap becomes a note.
func (c *Channel) attachments(files []*discordgo.MessageAttachment) ([]conch.Attachment, []string) {
	var atts []conch.Attachment
	var notes []string
	for i, f := range files {
		if f == nil {
			continue
		}
		name := conch.SafeName(f.Filename, fmt.Sprintf("file_%d", i+1))
		if int64(f.Size) > c.opts.MaxFileBytes {
			notes = append(notes, fmt.Sprintf("[The file %s (%s) was not received: larger than the %s limit (discord.max_file_bytes).]", name, size(int64(f.Size)), size(c.opts.MaxFileBytes)))
			continue
		}
		u := f.URL
		atts = append(atts, conch.Attachment{Name: name, MediaType: f.ContentType, Size: int64(f.Size),
			Open: func(ctx context.Context) (io.ReadCloser, error) { return c.download(ctx, u) }})
	}
	return atts, notes
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// download reads an attachment from the CDN (no token: its URL is signed).
func (c *Channel) download(ctx context.Context, u string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("discord: download file: bad URL")
	}
	resp, err := c.dg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("discord: download file: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("discord: download file: HTTP %d", resp.StatusCode)
	}
	return &cappedReader{rc: resp.Body, left: c.opts.MaxFileBytes}, nil
}

type cappedReader struct {
	rc   io.ReadCloser
	left int64
}

func (r *cappedReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return n, conch.Errorf(conch.KindInvalid, "discord: file is larger than discord.max_file_bytes")
	}
	return n, err
}

func (r *cappedReader) Close() error { return r.rc.Close() }
