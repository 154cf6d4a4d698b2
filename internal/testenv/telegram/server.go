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
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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
	// Photo is a photo sent (sendPhoto, sendMediaGroup); MediaGroupID
	// ties the photos of one album.
	Photo        *Upload
	MediaGroupID string
	Action       string
	// Keyboard is the inline keyboard sent with or edited into the
	// message (nil: none; an edit without one removes it).
	Keyboard [][]InlineKeyboardButton
	// QueryID and Alert are answerCallbackQuery's.
	QueryID string
	Alert   bool
	At      time.Time
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
	// queries are the callback queries sent, by id: answered or not.
	queries   map[string]bool
	nextQuery int64
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
		queries:    map[string]bool{},
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
