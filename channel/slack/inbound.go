package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"conch"
)

// knownCommands are the gateway's commands. Slack's clients take a message
// starting with "/" as a slash command of their own, so people type them
// with "!" ("!stop"); the channel hands them over as "/stop".
var knownCommands = map[string]bool{"stop": true, "reset": true, "status": true, "help": true}

// callback is an Events API event_callback (the payload of an events_api
// envelope).
type callback struct {
	Type    string `json:"type"`
	TeamID  string `json:"team_id"`
	EventID string `json:"event_id"`
	Event   event  `json:"event"`
}

type event struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
	User        string `json:"user"`
	BotID       string `json:"bot_id"`
	Team        string `json:"team"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Files       []file `json:"files"`
}

type file struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Mimetype           string `json:"mimetype"`
	Size               int64  `json:"size"`
	Mode               string `json:"mode"`
	URLPrivateDownload string `json:"url_private_download"`
}

// onEnvelope hands one event over. An error means it was not handed over:
// the envelope stays unacknowledged and Slack delivers it again.
func (c *Channel) onEnvelope(ctx context.Context, payload []byte) error {
	var cb callback
	if err := json.Unmarshal(payload, &cb); err != nil {
		c.log.Warn("slack: unreadable event, skipped", "err", err)
		return nil
	}
	if cb.Type != "event_callback" {
		return nil
	}
	switch cb.Event.Type {
	case "message", "app_mention":
		return c.onMessage(ctx, cb.TeamID, cb.Event)
	case "member_left_channel", "channel_left", "group_left":
		// The bot left a channel: its threads stay (the person may invite
		// it back); nothing to close.
	}
	return nil
}

var mentionRE = regexp.MustCompile(`<@([UW][A-Z0-9]+)(?:\|[^>]*)?>`)

// onMessage turns a message into a conch.Inbound. Whether the sender may
// talk to conch is the gateway's decision: every message addressed to the
// bot is passed on with Sender = the Slack user id and the alias
// team:user.
func (c *Channel) onMessage(ctx context.Context, team string, e event) error {
	switch e.Subtype {
	case "", "file_share", "thread_broadcast":
	default:
		return nil // edits, deletions, joins, bot messages
	}
	if e.BotID != "" || e.User == "" || e.User == c.me || e.TS == "" || e.Channel == "" {
		return nil
	}
	if team == "" {
		team = c.team
	}
	dm := e.ChannelType == "im" || (e.ChannelType == "" && strings.HasPrefix(e.Channel, "D"))
	inThread := e.ThreadTS != "" && e.ThreadTS != e.TS
	mentioned := e.Type == "app_mention" || c.mentions(e.Text)
	var key conch.ConversationKey
	switch {
	case dm && inThread:
		key = keyOf(team, e.Channel, e.ThreadTS)
	case dm:
		key = keyOf(team, e.Channel, "")
	case c.opts.ChannelPolicy == ChannelDeny:
		c.log.Debug("slack channel message dropped: slack.channel_policy = deny", "channel", e.Channel)
		return nil
	case inThread:
		joined, err := c.inThread(ctx, team, e.Channel, e.ThreadTS)
		if err != nil {
			return err
		}
		if !mentioned && !joined && c.opts.ChannelPolicy != ChannelAll {
			return nil
		}
		key = keyOf(team, e.Channel, e.ThreadTS)
	default:
		if !mentioned && c.opts.ChannelPolicy != ChannelAll {
			return nil
		}
		key = keyOf(team, e.Channel, e.TS) // the answer starts a thread under it
	}
	text := c.plainText(e.Text)
	atts, notes := c.attachments(e.Files)
	switch {
	case text != "":
	case len(atts) > 0:
		text = "[file " + atts[0].Name + "]"
	case len(notes) > 0:
		text = "[file]"
	default:
		return nil
	}
	if len(notes) > 0 {
		text += "\n\n" + strings.Join(notes, "\n")
	}
	if len(text) > maxInboundBytes {
		text = strings.ToValidUTF8(text[:maxInboundBytes], "") + "\n[… message cut at 32 KB]"
	}
	in := conch.Inbound{
		Key:    key,
		Sender: conch.UserID(e.User),
		// The allowlist may name the workspace too: T123:U456.
		SenderAliases: []conch.UserID{conch.UserID(team + ":" + e.User)},
		SenderName:    c.userName(ctx, e.User),
		Text:          text,
		ExternalID:    externalID(team, e.Channel, e.TS),
		Attachments:   atts,
		ReceivedAt:    tsTime(e.TS),
	}
	// Noted before the hand-over: the turn may start, and show itself on
	// this message, before HandleInbound returns. The thread joined stays
	// joined should the hand-over fail (Slack delivers the message again).
	if !dm {
		_, thread, _ := placeOf(key)
		c.joinThread(ctx, team, e.Channel, thread)
	}
	ref := msgRef{channel: e.Channel, ts: e.TS}
	noted := !strings.HasPrefix(text, "/") && c.notePending(key, ref)
	if err := c.handler.HandleInbound(ctx, in); err != nil {
		if noted {
			c.dropPending(key, ref)
		}
		if conch.KindOf(err) == conch.KindInvalid {
			// Refused for good (a file over the gateway's limit): fetching
			// it again cannot help.
			c.log.Warn("slack: message refused by the gateway, skipped", "message", in.ExternalID, "err", err)
			return nil
		}
		return fmt.Errorf("handle message %s: %w", in.ExternalID, err)
	}
	return nil
}

// notePending queues ref as the next message of key that a turn shows
// itself on (the working reaction); false when it is queued already.
func (c *Channel) notePending(key conch.ConversationKey, ref msgRef) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.pending[key]
	for _, r := range q {
		if r.ts == ref.ts {
			return false
		}
	}
	c.pending[key] = append(q, ref)
	return true
}

// dropPending takes ref out of key's queue (its hand-over failed).
func (c *Channel) dropPending(key conch.ConversationKey, ref msgRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := slices.DeleteFunc(slices.Clone(c.pending[key]), func(r msgRef) bool { return r == ref })
	if len(q) == 0 {
		delete(c.pending, key)
		return
	}
	c.pending[key] = q
}

func (c *Channel) mentions(text string) bool {
	for _, m := range mentionRE.FindAllStringSubmatch(text, -1) {
		if m[1] == c.me {
			return true
		}
	}
	return false
}

func threadCursor(team, channel, thread string) string {
	return "slack:" + team + ":thread:" + channel + ":" + thread
}

// inThread reports whether the bot is in a channel thread: it was
// mentioned in it (kept as a store cursor, so it survives restarts).
func (c *Channel) inThread(ctx context.Context, team, channel, thread string) (bool, error) {
	name := threadCursor(team, channel, thread)
	c.mu.Lock()
	known := c.threads[name]
	c.mu.Unlock()
	if known {
		return true, nil
	}
	v, err := c.opts.Cursors.Cursor(ctx, name)
	if err != nil {
		return false, fmt.Errorf("slack: load thread %s: %w", name, err)
	}
	if v != "" {
		c.mu.Lock()
		c.threads[name] = true
		c.mu.Unlock()
	}
	return v != "", nil
}

// joinThread records that the bot answers in a thread from now on.
func (c *Channel) joinThread(ctx context.Context, team, channel, thread string) {
	name := threadCursor(team, channel, thread)
	c.mu.Lock()
	known := c.threads[name]
	c.threads[name] = true
	c.mu.Unlock()
	if known {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.opts.Cursors.SetCursor(sctx, name, "1"); err != nil {
		c.log.Error("slack: store thread", "thread", name, "err", err)
	}
}

var linkRE = regexp.MustCompile(`<([^<>|]+)(?:\|([^<>]*))?>`)

// plainText turns Slack's message text into what the model reads: the
// bot's own mention dropped, links as "label (url)", other mentions kept,
// entities unescaped; "!stop" and the like become the gateway's commands.
func (c *Channel) plainText(s string) string {
	s = mentionRE.ReplaceAllStringFunc(s, func(m string) string {
		if sub := mentionRE.FindStringSubmatch(m); sub[1] == c.me {
			return ""
		}
		return m
	})
	s = linkRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := linkRE.FindStringSubmatch(m)
		target, label := sub[1], sub[2]
		switch {
		case strings.HasPrefix(target, "@"), strings.HasPrefix(target, "#"), strings.HasPrefix(target, "!"):
			return m
		case label == "" || label == target || label == strings.TrimPrefix(target, "mailto:"):
			return strings.TrimPrefix(target, "mailto:")
		}
		return label + " (" + target + ")"
	})
	s = strings.TrimSpace(html.UnescapeString(s))
	s = strings.TrimLeft(s, ":, ")
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

// userName is the sender's display name (users.info, cached; best effort).
func (c *Channel) userName(ctx context.Context, user string) string {
	c.mu.Lock()
	name, ok := c.names[user]
	c.mu.Unlock()
	if ok {
		return name
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u, err := c.api.GetUserInfoContext(cctx, user)
	if err != nil {
		c.log.Debug("slack: users.info", "user", user, "err", classify("users.info", err))
		return ""
	}
	name = u.Profile.DisplayName
	if name == "" {
		name = u.RealName
	}
	if name == "" {
		name = u.Name
	}
	c.mu.Lock()
	if len(c.names) > 4096 {
		clear(c.names)
	}
	c.names[user] = name
	c.mu.Unlock()
	return name
}

func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	us, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	return time.Unix(s, us*1000)
}

// attachments describes a message's files as conch attachments read from
// Slack (url_private_download with the bot token) when opened; a file over
// the size cap or only linked (mode "external", "tombstone") becomes a
// note for the model.
func (c *Channel) attachments(files []file) ([]conch.Attachment, []string) {
	var atts []conch.Attachment
	var notes []string
	for i, f := range files {
		name := conch.SafeName(f.Name, fmt.Sprintf("file_%d", i+1))
		switch {
		case f.URLPrivateDownload == "" || f.Mode == "external" || f.Mode == "tombstone":
			notes = append(notes, fmt.Sprintf("[The file %s could not be received: Slack does not offer its content.]", name))
		case f.Size > c.opts.MaxFileBytes:
			notes = append(notes, fmt.Sprintf("[The file %s (%s) was not received: larger than the %s limit (slack.max_file_bytes).]", name, size(f.Size), size(c.opts.MaxFileBytes)))
		default:
			u, mt := f.URLPrivateDownload, f.Mimetype
			atts = append(atts, conch.Attachment{Name: name, MediaType: mt, Size: f.Size,
				Open: func(ctx context.Context) (io.ReadCloser, error) { return c.download(ctx, u, mt) }})
		}
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

// download reads a file with the bot token, failing once it grows past the
// size cap. Slack answers a missing scope (files:read) with an HTML sign-in
// page, not an error: that is refused too.
func (c *Channel) download(ctx context.Context, u, mediaType string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("slack: download file: bad URL")
	}
	req.Header.Set("Authorization", "Bearer "+c.opts.BotToken)
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("slack: download file: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("slack: download file: HTTP %d", resp.StatusCode)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") && mediaType != "text/html" {
		resp.Body.Close()
		return nil, fmt.Errorf("slack: download file: Slack answered a sign-in page (does the app have the files:read scope?)")
	}
	return &cappedReader{rc: resp.Body, left: c.opts.MaxFileBytes}, nil
}

// cappedReader fails once more than left bytes were read.
type cappedReader struct {
	rc   io.ReadCloser
	left int64
}

func (r *cappedReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return n, conch.Errorf(conch.KindInvalid, "slack: file is larger than slack.max_file_bytes")
	}
	return n, err
}

func (r *cappedReader) Close() error { return r.rc.Close() }
