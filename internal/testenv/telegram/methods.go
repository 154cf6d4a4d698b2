package telegram

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// chat resolves chat_id, answering the error itself when it cannot.
func (s *Server) chatLocked(w http.ResponseWriter, p reqParams) (Chat, bool) {
	raw := p["chat_id"]
	if raw == "" {
		badRequest(w, "chat_id is empty")
		return Chat{}, false
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	c, ok := s.chats[id]
	if err != nil || !ok {
		badRequest(w, "chat not found")
		return Chat{}, false
	}
	if s.blocked[id] {
		writeError(w, http.StatusForbidden, "Forbidden: bot was blocked by the user", 0)
		return Chat{}, false
	}
	return c, true
}

// parseText applies parse_mode, answering the error itself.
func parseText(w http.ResponseWriter, text, mode string, limit int, what string) (string, []Entity, bool) {
	plain, ents := text, []Entity(nil)
	switch strings.ToLower(mode) {
	case "":
	case "html":
		var err error
		plain, ents, err = ParseHTML(text)
		if err != nil {
			badRequest(w, "can't parse entities: "+err.Error())
			return "", nil, false
		}
	default:
		badRequest(w, "unsupported parse_mode")
		return "", nil, false
	}
	if strings.TrimSpace(plain) == "" && what == "text" {
		badRequest(w, "message text is empty")
		return "", nil, false
	}
	if UTF16Len(plain) > limit {
		if what == "caption" {
			badRequest(w, "message caption is too long")
		} else {
			badRequest(w, "message is too long")
		}
		return "", nil, false
	}
	return plain, ents, true
}

func (s *Server) replyTo(w http.ResponseWriter, p reqParams, chat int64) (int64, bool) {
	var rp struct {
		MessageID                int64 `json:"message_id"`
		AllowSendingWithoutReply bool  `json:"allow_sending_without_reply"`
	}
	if raw := p["reply_parameters"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &rp); err != nil {
			badRequest(w, "can't parse reply parameters JSON object")
			return 0, false
		}
	} else if id, ok := p.int("reply_to_message_id"); ok {
		rp.MessageID = id
	}
	if rp.MessageID == 0 {
		return 0, true
	}
	if s.msgs[chat][rp.MessageID] == nil {
		if rp.AllowSendingWithoutReply {
			return 0, true
		}
		badRequest(w, "message to be replied not found")
		return 0, false
	}
	return rp.MessageID, true
}

func (s *Server) sendMessage(w http.ResponseWriter, p reqParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chat, ok := s.chatLocked(w, p)
	if !ok {
		return
	}
	if p["text"] == "" {
		badRequest(w, "message text is empty")
		return
	}
	plain, ents, ok := parseText(w, p["text"], p["parse_mode"], MaxTextLen, "text")
	if !ok {
		return
	}
	reply, ok := s.replyTo(w, p, chat.ID)
	if !ok {
		return
	}
	kb, ok := parseKeyboard(w, p)
	if !ok {
		return
	}
	bot := s.Bot
	m := Message{From: &bot, Chat: chat, Text: plain, Entities: ents, ReplyMarkup: kb}
	if reply != 0 {
		r := *s.msgs[chat.ID][reply]
		r.ReplyToMessage = nil
		m.ReplyToMessage = &r
	}
	m = s.storeLocked(m)
	s.sent = append(s.sent, Sent{Method: "sendMessage", ChatID: chat.ID, MessageID: m.MessageID, Text: plain, Raw: p["text"],
		ParseMode: p["parse_mode"], Entities: ents, Silent: p.bool("disable_notification"), ReplyTo: reply, Keyboard: keyboardRows(kb), At: time.Now()})
	s.notifyLocked()
	writeOK(w, m)
}

func (s *Server) editMessageText(w http.ResponseWriter, p reqParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chat, ok := s.chatLocked(w, p)
	if !ok {
		return
	}
	id, _ := p.int("message_id")
	m := s.msgs[chat.ID][id]
	if m == nil {
		badRequest(w, "message to edit not found")
		return
	}
	if m.From == nil || m.From.ID != s.Bot.ID {
		badRequest(w, "message can't be edited")
		return
	}
	plain, ents, ok := parseText(w, p["text"], p["parse_mode"], MaxTextLen, "text")
	if !ok {
		return
	}
	kb, ok := parseKeyboard(w, p)
	if !ok {
		return
	}
	if plain == m.Text && sameEntities(ents, m.Entities) && sameKeyboard(kb, m.ReplyMarkup) {
		badRequest(w, "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
		return
	}
	// An edit without reply_markup removes the inline keyboard.
	m.Text, m.Entities, m.EditDate, m.ReplyMarkup = plain, ents, time.Now().Unix(), kb
	s.sent = append(s.sent, Sent{Method: "editMessageText", ChatID: chat.ID, MessageID: id, Text: plain, Raw: p["text"],
		ParseMode: p["parse_mode"], Entities: ents, Keyboard: keyboardRows(kb), At: time.Now()})
	s.notifyLocked()
	writeOK(w, *m)
}

// parseKeyboard reads reply_markup as an inline keyboard, answering the
// error itself as the real server does (callback_data is 1-64 bytes, a
// button has a text and exactly one action).
func parseKeyboard(w http.ResponseWriter, p reqParams) (*InlineKeyboardMarkup, bool) {
	raw := p["reply_markup"]
	if raw == "" {
		return nil, true
	}
	var kb InlineKeyboardMarkup
	var probe map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &probe); err != nil {
		badRequest(w, "can't parse reply keyboard markup JSON object")
		return nil, false
	}
	if _, ok := probe["inline_keyboard"]; !ok {
		return nil, true // a reply keyboard (not modelled): accepted, not kept
	}
	if err := json.Unmarshal([]byte(raw), &kb); err != nil {
		badRequest(w, "can't parse inline keyboard button: "+err.Error())
		return nil, false
	}
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			switch {
			case b.Text == "":
				badRequest(w, "BUTTON_TEXT_INVALID")
				return nil, false
			case b.CallbackData == "" && b.URL == "":
				badRequest(w, "can't find field \"callback_data\" in the inline keyboard button")
				return nil, false
			case len(b.CallbackData) > 64:
				badRequest(w, "BUTTON_DATA_INVALID")
				return nil, false
			}
		}
	}
	if len(kb.InlineKeyboard) == 0 {
		return nil, true
	}
	return &kb, true
}

func keyboardRows(kb *InlineKeyboardMarkup) [][]InlineKeyboardButton {
	if kb == nil {
		return nil
	}
	return kb.InlineKeyboard
}

func sameKeyboard(a, b *InlineKeyboardMarkup) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// answerCallbackQuery answers a button press once; an unknown or already
// answered query is refused as the real server refuses an expired one.
func (s *Server) answerCallbackQuery(w http.ResponseWriter, p reqParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := p["callback_query_id"]
	answered, ok := s.queries[id]
	if !ok || answered {
		badRequest(w, "query is too old and response timeout expired or query ID is invalid")
		return
	}
	if len(p["text"]) > 200 {
		badRequest(w, "MESSAGE_TOO_LONG")
		return
	}
	s.queries[id] = true
	s.sent = append(s.sent, Sent{Method: "answerCallbackQuery", QueryID: id, Text: p["text"], Alert: p.bool("show_alert"), At: time.Now()})
	s.notifyLocked()
	writeOK(w, true)
}

func sameEntities(a, b []Entity) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func (s *Server) deleteMessage(w http.ResponseWriter, p reqParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chat, ok := s.chatLocked(w, p)
	if !ok {
		return
	}
	id, _ := p.int("message_id")
	if s.msgs[chat.ID][id] == nil {
		badRequest(w, "message to delete not found")
		return
	}
	delete(s.msgs[chat.ID], id)
	s.sent = append(s.sent, Sent{Method: "deleteMessage", ChatID: chat.ID, MessageID: id, At: time.Now()})
	s.notifyLocked()
	writeOK(w, true)
}

var chatActions = map[string]bool{
	"typing": true, "upload_photo": true, "record_video": true, "upload_video": true, "record_voice": true,
	"upload_voice": true, "upload_document": true, "choose_sticker": true, "find_location": true,
	"record_video_note": true, "upload_video_note": true,
}

func (s *Server) sendChatAction(w http.ResponseWriter, p reqParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chat, ok := s.chatLocked(w, p)
	if !ok {
		return
	}
	if !chatActions[p["action"]] {
		badRequest(w, "wrong parameter action in request")
		return
	}
	s.sent = append(s.sent, Sent{Method: "sendChatAction", ChatID: chat.ID, Action: p["action"], At: time.Now()})
	s.notifyLocked()
	writeOK(w, true)
}

func (s *Server) setMyCommands(w http.ResponseWriter, p reqParams) {
	var cmds []BotCommand
	if err := json.Unmarshal([]byte(p["commands"]), &cmds); err != nil {
		badRequest(w, "can't parse commands JSON array")
		return
	}
	for _, c := range cmds {
		if len(c.Command) < 1 || len(c.Command) > 32 || strings.Trim(c.Command, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			badRequest(w, "BOT_COMMAND_INVALID")
			return
		}
		if n := len([]rune(c.Description)); n < 1 || n > 256 {
			badRequest(w, "BOT_COMMAND_DESCRIPTION_INVALID")
			return
		}
	}
	s.mu.Lock()
	s.commands = cmds
	s.notifyLocked()
	s.mu.Unlock()
	writeOK(w, true)
}

func (s *Server) getFile(w http.ResponseWriter, p reqParams) {
	s.mu.Lock()
	f := s.files[p["file_id"]]
	s.mu.Unlock()
	if p["file_id"] == "" {
		badRequest(w, "file_id is empty")
		return
	}
	if f == nil {
		badRequest(w, "invalid file_id")
		return
	}
	if f.FileSize > MaxDownload {
		badRequest(w, "file is too big")
		return
	}
	writeOK(w, f.File)
}

func (s *Server) serveFile(w http.ResponseWriter, rest string) {
	token, path, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	f := s.paths[path]
	s.mu.Unlock()
	if token != s.Token || f == nil {
		writeError(w, http.StatusNotFound, "Not Found", 0)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	_, _ = w.Write(f.data)
}

func (s *Server) sendDocument(w http.ResponseWriter, p reqParams, files map[string]Upload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chat, ok := s.chatLocked(w, p)
	if !ok {
		return
	}
	var up Upload
	switch {
	case files["document"].Name != "" || len(files["document"].Data) > 0:
		up = files["document"]
	case strings.HasPrefix(p["document"], "attach://"):
		up = files[strings.TrimPrefix(p["document"], "attach://")]
	case s.files[p["document"]] != nil:
		f := s.files[p["document"]]
		up = Upload{Name: f.FilePath, Data: f.data}
	default:
		badRequest(w, "there is no document in the request")
		return
	}
	if len(up.Data) == 0 {
		badRequest(w, "file must be non-empty")
		return
	}
	if len(up.Data) > 50<<20 {
		writeError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large", 0)
		return
	}
	caption, ents, ok := "", []Entity(nil), true
	if p["caption"] != "" {
		if caption, ents, ok = parseText(w, p["caption"], p["parse_mode"], MaxCaptionLen, "caption"); !ok {
			return
		}
	}
	reply, ok := s.replyTo(w, p, chat.ID)
	if !ok {
		return
	}
	f := s.addFileLocked(up.Data, "documents", extOf(up.Name))
	bot := s.Bot
	m := s.storeLocked(Message{From: &bot, Chat: chat, Caption: caption, CaptionEntities: ents, Document: &Document{
		FileID: f.FileID, FileUniqueID: f.FileUniqueID, FileName: up.Name, MimeType: mime.TypeByExtension(extOf(up.Name)), FileSize: f.FileSize,
	}})
	upCopy := up
	s.sent = append(s.sent, Sent{Method: "sendDocument", ChatID: chat.ID, MessageID: m.MessageID, Text: caption, Raw: p["caption"],
		ParseMode: p["parse_mode"], Entities: ents, Silent: p.bool("disable_notification"), ReplyTo: reply, Document: &upCopy, At: time.Now()})
	s.notifyLocked()
	writeOK(w, m)
}
