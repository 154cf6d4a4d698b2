// Package telegram is a wire-exact fake of the Telegram Bot API server for
// tests: HTTP on 127.0.0.1 at /bot<token>/<method>, requests as JSON,
// multipart/form-data, urlencoded form or query string, answers in the
// real {"ok":…} envelope with the real error codes and descriptions.
//
// getUpdates long-polls with the real offset semantics (an update is
// confirmed once a call asks for a higher offset; a negative offset keeps
// only the last updates), timeouts, limit and allowed_updates, and a second
// poller ends the first with 409 Conflict. HTML parse mode is parsed like
// the real server, so malformed markup gets "can't parse entities". Tests
// inject messages from people (text, photo, document, group mentions,
// replies), read what the bot sent, and inject faults (429 with
// retry_after, 5xx, entity-parse failures).
package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Limits of the real server.
const (
	MaxTextLen     = 4096
	MaxCaptionLen  = 1024
	MaxDownload    = 20 << 20 // getFile refuses larger files
	maxUpdateLimit = 100
)

// Call is one request the server received.
type Call struct {
	Method string
	Params map[string]string
	Files  map[string]Upload
	At     time.Time
}

// Upload is a file sent in a multipart request.
type Upload struct {
	Name string
	Data []byte
}

// Sent is something the bot did in a chat: a message sent, edited or
// deleted, a chat action, a document.
type Sent struct {
	Method    string // sendMessage, editMessageText, deleteMessage, sendChatAction, sendDocument
	ChatID    int64
	MessageID int64
	// Text is the text as shown (entities parsed); Raw is what the bot sent.
	Text      string
	Raw       string
	ParseMode string
	Entities  []Entity
	// Silent is disable_notification.
	Silent   bool
	ReplyTo  int64
	Document *Upload
	Action   string
	At       time.Time
}

// Fault is an error the server answers instead of handling a request.
type Fault struct {
	Status      int
	Description string
	// RetryAfter is sent as parameters.retry_after (429).
	RetryAfter int
	// Times is how many requests get the fault (0 means 1).
	Times int
}

// TooManyRequests is the real 429 answer.
func TooManyRequests(retryAfter int) Fault {
	return Fault{Status: 429, Description: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), RetryAfter: retryAfter}
}

// ServerError is a 5xx answer.
func ServerError(status int) Fault {
	return Fault{Status: status, Description: http.StatusText(status)}
}

// EntityParseError is the 400 the server gives for markup it cannot parse.
func EntityParseError() Fault {
	return Fault{Status: 400, Description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"}
}

type storedFile struct {
	File
	data []byte
}

// Server is the fake Bot API server.
type Server struct {
	// URL is the base URL, as for the api_url setting.
	URL string
	// Token is the bot token the server accepts.
	Token string
	// Bot is the bot's own user (getMe).
	Bot User

	srv *httptest.Server

	mu         sync.Mutex
	changed    chan struct{}
	updates    []Update
	nextUpdate int64
	allowed    []string
	pollGen    int64
	offsets    []int64
	chats      map[int64]Chat
	msgs       map[int64]map[int64]*Message
	nextMsg    map[int64]int64
	sent       []Sent
	calls      []Call
	faults     map[string][]Fault
	files      map[string]*storedFile
	paths      map[string]*storedFile
	nextFile   int
	commands   []BotCommand
	blocked    map[int64]bool
}

// Start runs a server for the test; it stops when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := New()
	tb.Cleanup(s.Close)
	return s
}

// New runs a server until Close.
func New() *Server {
	s := &Server{
		Token:      "7000001:AAF-conch-test-token_0123456789abcdef",
		Bot:        User{ID: 7000001, IsBot: true, FirstName: "Conch", Username: "conch_test_bot", CanJoinGroups: true},
		changed:    make(chan struct{}),
		nextUpdate: 100000,
		chats:      map[int64]Chat{},
		msgs:       map[int64]map[int64]*Message{},
		nextMsg:    map[int64]int64{},
		faults:     map[string][]Fault{},
		files:      map[string]*storedFile{},
		paths:      map[string]*storedFile{},
		blocked:    map[int64]bool{},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("telegram fake: listen: %v", err))
	}
	s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(s.serveHTTP)}}
	s.srv.Start()
	s.URL = s.srv.URL
	return s
}

// Close stops the server; open long polls end.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// notifyLocked wakes every waiter (long polls, Wait).
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Fail makes the next f.Times requests of method (case-insensitive; "*"
// for any method) fail with f.
func (s *Server) Fail(method string, f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := strings.ToLower(method)
	s.faults[m] = append(s.faults[m], f)
}

func (s *Server) takeFaultLocked(method string) (Fault, bool) {
	for _, m := range []string{strings.ToLower(method), "*"} {
		q := s.faults[m]
		if len(q) == 0 {
			continue
		}
		f := q[0]
		q[0].Times--
		if q[0].Times <= 0 {
			s.faults[m] = q[1:]
		}
		return f, true
	}
	return Fault{}, false
}

// Block makes the bot blocked by the user of a private chat (403).
func (s *Server) Block(chatID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked[chatID] = true
}

// Calls returns the requests received for method ("" for all).
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || strings.EqualFold(c.Method, method) {
			out = append(out, c)
		}
	}
	return out
}

// Offsets returns the offset of every getUpdates call, in order.
func (s *Server) Offsets() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.offsets...)
}

// Pending is the number of updates not confirmed yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

// Commands returns the commands set with setMyCommands.
func (s *Server) Commands() []BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]BotCommand(nil), s.commands...)
}

// Sent returns what the bot did, in order; chatID 0 means every chat.
func (s *Server) Sent(chatID int64) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, x := range s.sent {
		if chatID == 0 || x.ChatID == chatID {
			out = append(out, x)
		}
	}
	return out
}

// Messages returns the bot's messages (sendMessage, sendDocument) in a
// chat, in order.
func (s *Server) Messages(chatID int64) []Sent {
	var out []Sent
	for _, x := range s.Sent(chatID) {
		if x.Method == "sendMessage" || x.Method == "sendDocument" {
			out = append(out, x)
		}
	}
	return out
}

// Message returns the current state of a message in a chat.
func (s *Server) Message(chatID, id int64) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[chatID][id]
	if m == nil {
		return Message{}, false
	}
	return *m, true
}

// Wait blocks until cond holds (checked after every change) or ctx ends.
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitMessages waits until the bot has sent at least n messages in chat
// and returns them.
func (s *Server) WaitMessages(tb testing.TB, chatID int64, n int, timeout time.Duration) []Sent {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Wait(ctx, func() bool { return len(s.Messages(chatID)) >= n }); err != nil {
		tb.Fatalf("telegram fake: %d message(s) in chat %d after %s, want %d: %+v", len(s.Messages(chatID)), chatID, timeout, n, s.Messages(chatID))
	}
	return s.Messages(chatID)
}

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

type envelope struct {
	OK          bool        `json:"ok"`
	Result      any         `json:"result,omitempty"`
	ErrorCode   int         `json:"error_code,omitempty"`
	Description string      `json:"description,omitempty"`
	Parameters  *parameters `json:"parameters,omitempty"`
}

type parameters struct {
	RetryAfter      int   `json:"retry_after,omitempty"`
	MigrateToChatID int64 `json:"migrate_to_chat_id,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v envelope) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeOK(w http.ResponseWriter, result any) {
	writeJSON(w, http.StatusOK, envelope{OK: true, Result: result})
}

func writeError(w http.ResponseWriter, status int, desc string, retryAfter int) {
	e := envelope{ErrorCode: status, Description: desc}
	if retryAfter > 0 {
		e.Parameters = &parameters{RetryAfter: retryAfter}
	}
	writeJSON(w, status, e)
}

func badRequest(w http.ResponseWriter, desc string) {
	writeError(w, http.StatusBadRequest, "Bad Request: "+desc, 0)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		s.serveFile(w, rest)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", 0)
		return
	}
	token, method, _ := strings.Cut(rest, "/")
	if token != s.Token {
		writeError(w, http.StatusUnauthorized, "Unauthorized", 0)
		return
	}
	params, files, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Params: params, Files: files, At: time.Now()})
	f, faulty := s.takeFaultLocked(method)
	s.notifyLocked()
	s.mu.Unlock()
	if faulty {
		writeError(w, f.Status, f.Description, f.RetryAfter)
		return
	}
	p := reqParams(params)
	switch strings.ToLower(method) {
	case "getme":
		writeOK(w, s.Bot)
	case "getupdates":
		s.getUpdates(w, r, p)
	case "sendmessage":
		s.sendMessage(w, p)
	case "editmessagetext":
		s.editMessageText(w, p)
	case "deletemessage":
		s.deleteMessage(w, p)
	case "sendchataction":
		s.sendChatAction(w, p)
	case "setmycommands":
		s.setMyCommands(w, p)
	case "getmycommands":
		writeOK(w, s.Commands())
	case "getfile":
		s.getFile(w, p)
	case "senddocument":
		s.sendDocument(w, p, files)
	case "deletewebhook":
		writeOK(w, true)
	case "getwebhookinfo":
		writeOK(w, map[string]any{"url": "", "has_custom_certificate": false, "pending_update_count": s.Pending()})
	default:
		writeError(w, http.StatusNotFound, "Not Found", 0)
	}
}

// readParams reads a request's parameters from the query string and the
// body (JSON object, multipart form or urlencoded form). Non-string JSON
// values are kept as their JSON text, as the real server accepts both.
func readParams(r *http.Request) (map[string]string, map[string]Upload, error) {
	params := map[string]string{}
	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}
	files := map[string]Upload{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, nil, err
		}
		if len(strings.TrimSpace(string(body))) == 0 {
			break
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, nil, fmt.Errorf("can't parse JSON object")
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				params[k] = s
			} else if string(v) != "null" {
				params[k] = string(v)
			}
		}
	case "multipart/form-data":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, nil, err
		}
		if len(body) == 0 {
			break // a method without parameters, as some clients send it
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err := r.ParseMultipartForm(64 << 20); err != nil {
			return nil, nil, fmt.Errorf("can't parse multipart form: %v", err)
		}
		for k, v := range r.MultipartForm.Value {
			params[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			f, err := fhs[0].Open()
			if err != nil {
				return nil, nil, err
			}
			data, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return nil, nil, err
			}
			files[k] = Upload{Name: fhs[0].Filename, Data: data}
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, nil, err
		}
		for k, v := range r.PostForm {
			params[k] = v[0]
		}
	}
	return params, files, nil
}

type reqParams map[string]string

func (p reqParams) int(name string) (int64, bool) {
	v, ok := p[name]
	if !ok || v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

func (p reqParams) bool(name string) bool { return p[name] == "true" || p[name] == "1" }

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p reqParams) {
	offset, _ := p.int("offset")
	limit, ok := p.int("limit")
	if !ok || limit <= 0 || limit > maxUpdateLimit {
		limit = maxUpdateLimit
	}
	timeout, _ := p.int("timeout")
	s.mu.Lock()
	s.pollGen++
	gen := s.pollGen
	s.offsets = append(s.offsets, offset)
	if raw, ok := p["allowed_updates"]; ok {
		var list []string
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			s.mu.Unlock()
			badRequest(w, "can't parse allowed updates JSON array")
			return
		}
		s.allowed = list
	}
	switch {
	case offset > 0:
		i := 0
		for i < len(s.updates) && s.updates[i].UpdateID < offset {
			i++
		}
		s.updates = s.updates[i:]
	case offset < 0:
		if keep := int(-offset); len(s.updates) > keep {
			s.updates = s.updates[len(s.updates)-keep:]
		}
	}
	s.notifyLocked() // an older poll ends with 409
	deadline := time.Now().Add(time.Duration(timeout) * time.Second)
	for {
		var out []Update
		kept := s.updates[:0:0]
		for _, u := range s.updates {
			if !s.allowedLocked(u.kind()) {
				continue // the real server never stores updates of types not asked for
			}
			kept = append(kept, u)
			if u.UpdateID >= offset && int64(len(out)) < limit {
				out = append(out, u)
			}
		}
		s.updates = kept
		if len(out) > 0 || timeout <= 0 || !time.Now().Before(deadline) {
			s.mu.Unlock()
			if out == nil {
				out = []Update{}
			}
			writeOK(w, out)
			return
		}
		ch := s.changed
		s.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
		t.Stop()
		s.mu.Lock()
		if s.pollGen != gen {
			s.mu.Unlock()
			writeError(w, http.StatusConflict, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running", 0)
			return
		}
	}
}

func (s *Server) allowedLocked(kind string) bool {
	if len(s.allowed) == 0 {
		return kind != "chat_member" && kind != "message_reaction" && kind != "message_reaction_count"
	}
	for _, a := range s.allowed {
		if a == kind {
			return true
		}
	}
	return false
}

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
	bot := s.Bot
	m := Message{From: &bot, Chat: chat, Text: plain, Entities: ents}
	if reply != 0 {
		r := *s.msgs[chat.ID][reply]
		r.ReplyToMessage = nil
		m.ReplyToMessage = &r
	}
	m = s.storeLocked(m)
	s.sent = append(s.sent, Sent{Method: "sendMessage", ChatID: chat.ID, MessageID: m.MessageID, Text: plain, Raw: p["text"],
		ParseMode: p["parse_mode"], Entities: ents, Silent: p.bool("disable_notification"), ReplyTo: reply, At: time.Now()})
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
	if plain == m.Text && sameEntities(ents, m.Entities) {
		badRequest(w, "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
		return
	}
	m.Text, m.Entities, m.EditDate = plain, ents, time.Now().Unix()
	s.sent = append(s.sent, Sent{Method: "editMessageText", ChatID: chat.ID, MessageID: id, Text: plain, Raw: p["text"],
		ParseMode: p["parse_mode"], Entities: ents, At: time.Now()})
	s.notifyLocked()
	writeOK(w, *m)
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
