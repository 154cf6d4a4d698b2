package telegram

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"conch"
)

// knownCommands are the gateway's commands; in groups they are taken even
// without the bot's @name (Telegram hands bare commands to every bot).
var knownCommands = map[string]bool{"stop": true, "reset": true, "status": true, "usage": true, "help": true}

// handle hands one update to the gateway. An error means it was not handed
// over and must be fetched again.
func (c *Channel) handle(ctx context.Context, u *models.Update) error {
	switch {
	case u.Message != nil:
		return c.onMessage(ctx, u.Message)
	case u.MyChatMember != nil:
		c.onMembership(ctx, u.MyChatMember)
	case u.CallbackQuery != nil:
		return c.onCallback(ctx, u.CallbackQuery)
	}
	return nil
}

// onMessage turns a message into a conch.Inbound. Whether the sender may
// talk to conch is the gateway's decision (its allowlist): every message
// addressed to the bot is passed on with Sender = the numeric user id and
// SenderName = @username.
func (c *Channel) onMessage(ctx context.Context, m *models.Message) error {
	from := m.From
	if from == nil || from.IsBot {
		return nil // channel posts, anonymous group admins, other bots
	}
	chat := m.Chat
	if chat.Type == models.ChatTypeChannel {
		return nil
	}
	private := chat.Type == models.ChatTypePrivate
	text, entities := m.Text, m.Entities
	if text == "" {
		text, entities = m.Caption, m.CaptionEntities
	}
	if !private {
		switch c.opts.GroupPolicy {
		case GroupDeny:
			c.log.Debug("telegram group message dropped: telegram.group_policy = deny", "chat", chat.ID)
			return nil
		case GroupMention:
			if !c.addressed(m, text, entities) {
				return nil
			}
		}
	}
	text = c.stripAddress(text, private)
	atts, notes := c.attachments(m)
	switch {
	case text != "":
	case len(atts) > 0 && m.Photo != nil:
		text = "[photo]"
	case m.Voice != nil:
		text = "[voice message]"
	case len(atts) > 0:
		text = "[file " + atts[0].Name + "]"
	case len(notes) > 0:
		text = "[file]"
	default:
		c.log.Debug("telegram message ignored: nothing conch can read (sticker, …)", "chat", chat.ID, "message", m.ID)
		return nil
	}
	if len(notes) > 0 {
		text += "\n\n" + strings.Join(notes, "\n")
	}
	c.noteTopic(chat.ID, externalID(chat.ID, m.ID), m)
	in := conch.Inbound{
		Key:        keyOf(chat.ID),
		Sender:     conch.UserID(strconv.FormatInt(from.ID, 10)),
		SenderName: senderName(from),
		// A username is unique and given by Telegram: the allowlist may
		// name it instead of the numeric id.
		SenderAliases: senderAliases(from),
		Text:          text,
		ExternalID:    externalID(chat.ID, m.ID),
		Attachments:   atts,
		ReceivedAt:    time.Unix(int64(m.Date), 0),
	}
	if err := c.handler.HandleInbound(ctx, in); err != nil {
		return fmt.Errorf("handle message %s: %w", in.ExternalID, err)
	}
	return nil
}

// externalID identifies a message: message ids count per chat.
func externalID(chat int64, msg int) string {
	return strconv.FormatInt(chat, 10) + ":" + strconv.Itoa(msg)
}

func parseExternalID(s string) (chat int64, msg int, ok bool) {
	a, b, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, false
	}
	chat, err1 := strconv.ParseInt(a, 10, 64)
	msg, err2 := strconv.Atoi(b)
	return chat, msg, err1 == nil && err2 == nil
}

// senderName is @username, or the person's name when they have none.
func senderAliases(u *models.User) []conch.UserID {
	if u.Username == "" {
		return nil
	}
	return []conch.UserID{conch.UserID("@" + u.Username)}
}

func senderName(u *models.User) string {
	if u.Username != "" {
		return "@" + u.Username
	}
	return strings.TrimSpace(u.FirstName + " " + u.LastName)
}

// utf16Slice cuts text at entity offsets, which count UTF-16 units.
func utf16Slice(text string, offset, length int) string {
	u := utf16.Encode([]rune(text))
	if offset < 0 || length < 0 || offset+length > len(u) {
		return ""
	}
	return string(utf16.Decode(u[offset : offset+length]))
}

// addressed reports whether a group message is meant for the bot: it
// mentions the bot, replies to one of its messages, or is a command.
func (c *Channel) addressed(m *models.Message, text string, entities []models.MessageEntity) bool {
	if r := m.ReplyToMessage; r != nil && r.From != nil && r.From.ID == c.me.ID {
		return true
	}
	me := strings.ToLower(c.me.Username)
	for _, e := range entities {
		switch e.Type {
		case models.MessageEntityTypeMention:
			if strings.EqualFold(utf16Slice(text, e.Offset, e.Length), "@"+me) {
				return true
			}
		case models.MessageEntityTypeTextMention:
			if e.User != nil && e.User.ID == c.me.ID {
				return true
			}
		case models.MessageEntityTypeBotCommand:
			if e.Offset != 0 {
				continue
			}
			cmd, target, hasTarget := strings.Cut(strings.TrimPrefix(utf16Slice(text, e.Offset, e.Length), "/"), "@")
			if hasTarget && strings.EqualFold(target, me) {
				return true
			}
			if !hasTarget && knownCommands[strings.ToLower(cmd)] {
				return true
			}
		}
	}
	return false
}

// stripAddress removes a leading @botname and the @botname of a command
// ("/stop@conch_bot" → "/stop"); /start becomes /help.
func (c *Channel) stripAddress(text string, private bool) string {
	text = strings.TrimSpace(text)
	me := "@" + c.me.Username
	if c.me.Username != "" && len(text) >= len(me) && strings.EqualFold(text[:len(me)], me) {
		rest := text[len(me):]
		if rest == "" || strings.ContainsRune(":, \t\n", rune(rest[0])) {
			text = strings.TrimLeftFunc(strings.TrimLeft(rest, ":,"), unicode.IsSpace)
		}
	}
	if strings.HasPrefix(text, "/") {
		word, rest, _ := strings.Cut(text, " ")
		if cmd, target, ok := strings.Cut(word, "@"); ok && strings.EqualFold(target, c.me.Username) {
			word = cmd
		}
		if strings.EqualFold(word, "/start") && private {
			word = "/help"
		}
		if rest != "" {
			return word + " " + rest
		}
		return word
	}
	return text
}

// attachments describes a message's photo or document as conch
// attachments that read the file from the Bot API when opened; a file
// over the size cap becomes a note for the model instead.
func (c *Channel) attachments(m *models.Message) ([]conch.Attachment, []string) {
	limit := c.opts.MaxFileBytes
	var atts []conch.Attachment
	var notes []string
	if len(m.Photo) > 0 {
		var best *models.PhotoSize
		for i := range m.Photo {
			p := &m.Photo[i]
			if int64(p.FileSize) > limit {
				continue
			}
			if best == nil || p.Width*p.Height > best.Width*best.Height {
				best = p
			}
		}
		if best == nil {
			notes = append(notes, fmt.Sprintf("[A photo was not received: larger than the %s limit (telegram.max_file_bytes).]", size(limit)))
		} else {
			atts = append(atts, c.attachment(best.FileID, fmt.Sprintf("photo_%d.jpg", m.ID), "image/jpeg", int64(best.FileSize)))
		}
	}
	if v := m.Voice; v != nil {
		name := fmt.Sprintf("voice_%d.ogg", m.ID)
		if v.FileSize > limit {
			notes = append(notes, fmt.Sprintf("[The voice message %s (%s) was not received: larger than the %s limit (telegram.max_file_bytes).]", name, size(v.FileSize), size(limit)))
		} else {
			atts = append(atts, c.attachment(v.FileID, name, orType(v.MimeType, "audio/ogg"), v.FileSize))
		}
	}
	if au := m.Audio; au != nil {
		name := conch.SafeName(au.FileName, fmt.Sprintf("audio_%d", m.ID))
		if au.FileSize > limit {
			notes = append(notes, fmt.Sprintf("[The audio file %s (%s) was not received: larger than the %s limit (telegram.max_file_bytes).]", name, size(au.FileSize), size(limit)))
		} else {
			atts = append(atts, c.attachment(au.FileID, name, orType(au.MimeType, "audio/mpeg"), au.FileSize))
		}
	}
	if d := m.Document; d != nil {
		name := conch.SafeName(d.FileName, fmt.Sprintf("file_%d", m.ID))
		if d.FileSize > limit {
			notes = append(notes, fmt.Sprintf("[The file %s (%s) was not received: larger than the %s limit (telegram.max_file_bytes).]", name, size(d.FileSize), size(limit)))
		} else {
			atts = append(atts, c.attachment(d.FileID, name, d.MimeType, d.FileSize))
		}
	}
	return atts, notes
}

func orType(t, d string) string {
	if t == "" {
		return d
	}
	return t
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

func (c *Channel) attachment(fileID, name, mediaType string, n int64) conch.Attachment {
	return conch.Attachment{
		Name: name, MediaType: mediaType, Size: n,
		Open: func(ctx context.Context) (io.ReadCloser, error) { return c.download(ctx, fileID) },
	}
}

// download reads a file: getFile for its path, then the file itself,
// failing once it grows past the size cap.
func (c *Channel) download(ctx context.Context, fileID string) (io.ReadCloser, error) {
	var f *models.File
	p := c.opts.Backoff
	p.Max = 3
	err := p.Retry(ctx, func(ctx context.Context, _ int) error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var err error
		f, err = c.bot.GetFile(cctx, &bot.GetFileParams{FileID: fileID})
		return retryWait(classify("getFile", err))
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("telegram: get file: %w", err)
	}
	if int64(f.FileSize) > c.opts.MaxFileBytes {
		return nil, conch.Errorf(conch.KindInvalid, "telegram: file of %s is larger than telegram.max_file_bytes (%s)", size(f.FileSize), size(c.opts.MaxFileBytes))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.bot.FileDownloadLink(f), nil)
	if err != nil {
		return nil, fmt.Errorf("telegram: download file: bad link")
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("telegram: download file: %w", redact(err, c.opts.Token))
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("telegram: download file: HTTP %d", resp.StatusCode)
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
		return n, conch.Errorf(conch.KindInvalid, "telegram: file is larger than telegram.max_file_bytes")
	}
	return n, err
}

func (r *cappedReader) Close() error { return r.rc.Close() }

// onMembership closes a group's conversation when the bot was removed.
func (c *Channel) onMembership(ctx context.Context, u *models.ChatMemberUpdated) {
	gone := u.NewChatMember.Type == models.ChatMemberTypeLeft || u.NewChatMember.Type == models.ChatMemberTypeBanned
	if !gone {
		return
	}
	if u.Chat.Type == models.ChatTypePrivate {
		// A person blocked the bot: keep their conversation (they may
		// unblock); replies fail with 403 until then.
		c.log.Info("telegram: the bot was blocked in a private chat", "chat", u.Chat.ID)
		return
	}
	c.log.Info("telegram conversation closed: the bot was removed from the group", "chat", u.Chat.ID, "by", u.From.ID)
	if err := c.handler.ConversationClosed(ctx, keyOf(u.Chat.ID)); err != nil {
		c.log.Error("telegram: conversation closed handler failed", "chat", u.Chat.ID, "err", err)
	}
}

// noteTopic remembers the forum topic a message came from.
func (c *Channel) noteTopic(chat int64, ext string, m *models.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !m.IsTopicMessage || m.MessageThreadID == 0 {
		delete(c.lastTopic, chat)
		return
	}
	if len(c.topics) >= maxTopics {
		clear(c.topics)
	}
	c.topics[ext] = m.MessageThreadID
	c.lastTopic[chat] = m.MessageThreadID
}

// topicFor is the forum topic to send to: the answered message's, else the
// chat's latest; 0 outside forums.
func (c *Channel) topicFor(chat int64, inReplyTo string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.topics[inReplyTo]; ok && inReplyTo != "" {
		return t
	}
	return c.lastTopic[chat]
}
