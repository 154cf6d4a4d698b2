package telegram

import (
	"fmt"
	"strings"
	"time"
)

// Person returns a user that is not a bot.
func Person(id int64, username, firstName string) User {
	return User{ID: id, FirstName: firstName, Username: username, LanguageCode: "en"}
}

// PrivateChat is the private chat with u.
func PrivateChat(u User) Chat {
	return Chat{ID: u.ID, Type: "private", Username: u.Username, FirstName: u.FirstName, LastName: u.LastName}
}

// Group is a supergroup chat (ids of supergroups start at -100…).
func Group(id int64, title string) Chat {
	return Chat{ID: id, Type: "supergroup", Title: title}
}

// SendText injects a text message from a person; entities for a leading
// bot command and @mentions are set as the real clients do.
func (s *Server) SendText(from User, chat Chat, text string) Message {
	return s.inject(Message{From: &from, Chat: chat, Text: text, Entities: detectEntities(text)})
}

// SendTopicText injects a text message in a forum topic of a supergroup.
func (s *Server) SendTopicText(from User, chat Chat, topic int64, text string) Message {
	return s.inject(Message{From: &from, Chat: chat, Text: text, Entities: detectEntities(text), MessageThreadID: topic, IsTopicMessage: true})
}

// Reply injects a text message replying to another message.
func (s *Server) Reply(from User, chat Chat, text string, to Message) Message {
	return s.inject(Message{From: &from, Chat: chat, Text: text, Entities: detectEntities(text), ReplyToMessage: &to})
}

// BotMessage returns the bot's message with that id as a Message (to reply to).
func (s *Server) BotMessage(chatID, id int64) Message {
	m, _ := s.Message(chatID, id)
	return m
}

// SendPhoto injects a photo (two sizes: a thumbnail and data itself).
func (s *Server) SendPhoto(from User, chat Chat, data []byte, caption string) Message {
	s.mu.Lock()
	thumb := s.addFileLocked(data[:min(len(data), 64)], "photos", ".jpg")
	full := s.addFileLocked(data, "photos", ".jpg")
	s.mu.Unlock()
	return s.inject(Message{From: &from, Chat: chat, Caption: caption, CaptionEntities: detectEntities(caption), Photo: []PhotoSize{
		{FileID: thumb.FileID, FileUniqueID: thumb.FileUniqueID, Width: 90, Height: 90, FileSize: thumb.FileSize},
		{FileID: full.FileID, FileUniqueID: full.FileUniqueID, Width: 1280, Height: 960, FileSize: full.FileSize},
	}})
}

// SendDocument injects a file.
func (s *Server) SendDocument(from User, chat Chat, name, mimeType string, data []byte, caption string) Message {
	s.mu.Lock()
	f := s.addFileLocked(data, "documents", extOf(name))
	s.mu.Unlock()
	return s.inject(Message{From: &from, Chat: chat, Caption: caption, CaptionEntities: detectEntities(caption), Document: &Document{
		FileID: f.FileID, FileUniqueID: f.FileUniqueID, FileName: name, MimeType: mimeType, FileSize: f.FileSize,
	}})
}

// SendVoice injects a voice note of data (OGG/Opus). A size above
// len(data) is the size the Bot API reports, for a recording too large to
// download (getFile refuses it as the real one does past 20 MB).
func (s *Server) SendVoice(from User, chat Chat, data []byte, duration int, size int64) Message {
	s.mu.Lock()
	f := s.addFileLocked(data, "voice", ".oga")
	if size > f.FileSize {
		f.FileSize = size
	}
	s.mu.Unlock()
	return s.inject(Message{From: &from, Chat: chat, Voice: &Voice{
		FileID: f.FileID, FileUniqueID: f.FileUniqueID, Duration: duration, MimeType: "audio/ogg", FileSize: f.FileSize,
	}})
}

// RemoveBot injects the my_chat_member update of the bot being removed
// from a group by a person.
func (s *Server) RemoveBot(by User, chat Chat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextUpdate++
	s.updates = append(s.updates, Update{UpdateID: s.nextUpdate, MyChatMember: &ChatMemberUpdated{
		Chat: chat, From: by, Date: time.Now().Unix(),
		OldChatMember: ChatMember{Status: "member", User: s.Bot},
		NewChatMember: ChatMember{Status: "left", User: s.Bot},
	}})
	s.notifyLocked()
}

func extOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i:]
	}
	return ""
}

func (s *Server) addFileLocked(data []byte, dir, ext string) *storedFile {
	s.nextFile++
	f := &storedFile{File: File{
		FileID:       fmt.Sprintf("BQACAgIAAxkBAAI%06dZfake", s.nextFile),
		FileUniqueID: fmt.Sprintf("AgAD%06d", s.nextFile),
		FileSize:     int64(len(data)),
		FilePath:     fmt.Sprintf("%s/file_%d%s", dir, s.nextFile, ext),
	}, data: append([]byte(nil), data...)}
	s.files[f.FileID] = f
	s.paths[f.FilePath] = f
	return f
}

// Click presses the callback button whose callback_data is data under the
// bot's message msgID in chat, as from would in a client, and queues the
// callback_query update; it returns the query's id. A client can only
// press a button the message shows: an error says when there is none.
func (s *Server) Click(from User, chatID, msgID int64, data string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[chatID][msgID]
	if m == nil {
		return "", fmt.Errorf("telegram fake: no message %d in chat %d", msgID, chatID)
	}
	found := false
	if m.ReplyMarkup != nil {
		for _, row := range m.ReplyMarkup.InlineKeyboard {
			for _, b := range row {
				found = found || b.CallbackData == data && data != ""
			}
		}
	}
	if !found {
		return "", fmt.Errorf("telegram fake: message %d in chat %d has no button %q", msgID, chatID, data)
	}
	s.nextQuery++
	id := fmt.Sprintf("%d%06d", from.ID, s.nextQuery)
	s.queries[id] = false
	msg := *m
	s.nextUpdate++
	s.updates = append(s.updates, Update{UpdateID: s.nextUpdate, CallbackQuery: &CallbackQuery{
		ID: id, From: from, Message: &msg, ChatInstance: fmt.Sprintf("%d", chatID*7919), Data: data,
	}})
	s.notifyLocked()
	return id, nil
}

// inject stores a person's message and queues its update.
func (s *Server) inject(m Message) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chats[m.Chat.ID] = m.Chat
	m = s.storeLocked(m)
	s.nextUpdate++
	s.updates = append(s.updates, Update{UpdateID: s.nextUpdate, Message: &m})
	s.notifyLocked()
	return m
}

func (s *Server) storeLocked(m Message) Message {
	s.nextMsg[m.Chat.ID]++
	m.MessageID = s.nextMsg[m.Chat.ID]
	m.Date = time.Now().Unix()
	if s.msgs[m.Chat.ID] == nil {
		s.msgs[m.Chat.ID] = map[int64]*Message{}
	}
	c := m
	s.msgs[m.Chat.ID][m.MessageID] = &c
	return m
}

// detectEntities finds a leading /command and @mentions, as clients mark them.
func detectEntities(text string) []Entity {
	var out []Entity
	units := func(s string) int { return UTF16Len(s) }
	if strings.HasPrefix(text, "/") {
		end := strings.IndexAny(text, " \n")
		if end < 0 {
			end = len(text)
		}
		out = append(out, Entity{Type: "bot_command", Offset: 0, Length: units(text[:end])})
	}
	for i := 0; i < len(text); i++ {
		if text[i] != '@' || (i > 0 && !strings.ContainsRune(" \n(,", rune(text[i-1]))) {
			continue
		}
		j := i + 1
		for j < len(text) && (text[j] == '_' || text[j] >= 'a' && text[j] <= 'z' || text[j] >= 'A' && text[j] <= 'Z' || text[j] >= '0' && text[j] <= '9') {
			j++
		}
		if j-i > 5 {
			out = append(out, Entity{Type: "mention", Offset: units(text[:i]), Length: units(text[i:j])})
		}
		i = j
	}
	return out
}
