// Package slack is a wire-exact fake of Slack's Web API and Socket Mode for
// tests, written from the public API reference (api.slack.com/methods,
// api.slack.com/apis/socket-mode): HTTP on 127.0.0.1 at /api/<method>,
// requests as urlencoded form, JSON or multipart with the token as a Bearer
// header or a token parameter, answers in the real {"ok":…} envelope with
// Slack's error strings (HTTP 200 for errors, 429 with Retry-After for rate
// limits).
//
// apps.connections.open (an app-level xapp- token) hands out a single-use
// WebSocket URL. The socket greets with hello, sends WebSocket pings, and
// carries events_api envelopes that must be acknowledged with their
// envelope_id; an envelope not acknowledged is delivered again (retry_attempt,
// retry_reason "timeout") after AckTimeout and on the next connection, as
// Slack does. Tests post messages as people (DMs, channels, threads, files,
// mentions, which also raise app_mention), read what the bot sent, edited and
// reacted, and inject faults (429, errors) and disconnects.
package slack

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Limits of the real service.
const (
	// MaxTextLen is chat.postMessage's hard limit ("msg_too_long" beyond).
	MaxTextLen = 40000
	// maxRetries is how often an envelope is delivered again.
	maxRetries = 3
)

// User is a member of the fake workspace.
type User struct {
	ID    string `json:"id"`
	Team  string `json:"team_id"`
	Name  string `json:"name"`
	Real  string `json:"real_name"`
	IsBot bool   `json:"is_bot"`
}

// File is a file shared in a message.
type File struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Title              string `json:"title"`
	Mimetype           string `json:"mimetype"`
	Filetype           string `json:"filetype"`
	Size               int    `json:"size"`
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
	User               string `json:"user,omitempty"`
	data               []byte
}

// Reaction is one emoji on a message.
type Reaction struct {
	Name  string   `json:"name"`
	Users []string `json:"users"`
	Count int      `json:"count"`
}

// Message is a message as Slack keeps it.
type Message struct {
	Type       string     `json:"type"`
	Subtype    string     `json:"subtype,omitempty"`
	Channel    string     `json:"channel,omitempty"`
	User       string     `json:"user,omitempty"`
	BotID      string     `json:"bot_id,omitempty"`
	AppID      string     `json:"app_id,omitempty"`
	Team       string     `json:"team,omitempty"`
	Text       string     `json:"text"`
	TS         string     `json:"ts"`
	ThreadTS   string     `json:"thread_ts,omitempty"`
	Files      []File     `json:"files,omitempty"`
	Reactions  []Reaction `json:"reactions,omitempty"`
	Edited     *Edited    `json:"edited,omitempty"`
	Mrkdwn     *bool      `json:"mrkdwn,omitempty"`
	ReplyCount int        `json:"reply_count,omitempty"`
	// Blocks are the message's Block Kit blocks, as sent.
	Blocks json.RawMessage `json:"blocks,omitempty"`
}

// Edited marks an updated message.
type Edited struct {
	User string `json:"user"`
	TS   string `json:"ts"`
}

// Sent is something the bot did: a message posted or updated, a reaction
// added or removed, a file shared.
type Sent struct {
	Method   string // chat.postMessage, chat.update, reactions.add, reactions.remove, files.completeUploadExternal
	Channel  string
	TS       string // the message's ts (the reacted message's for reactions)
	ThreadTS string
	Text     string
	Mrkdwn   bool
	Reaction string
	File     *File
	// User is whom chat.postEphemeral showed the message to.
	User string
	// Blocks are the blocks sent with the message (nil: none; "[]" from
	// chat.update removes them).
	Blocks json.RawMessage
	At     time.Time
}

// Call is one Web API request the server received.
type Call struct {
	Method string
	Params map[string]string
	At     time.Time
}

type channelInfo struct {
	ID, Name, Type string // Type: im, channel, group, mpim
	User           string // the person of an im
}

// envelope is one events_api delivery waiting for its ack.
type envelope struct {
	// Type is events_api, or interactive for a button press.
	Type    string
	ID      string
	Payload []byte
	Retries int
	sentAt  time.Time
	acked   bool
}

// Server is the fake Slack.
type Server struct {
	// URL is the base URL; the Web API is at URL+"/api/".
	URL      string
	BotToken string
	AppToken string
	TeamID   string
	AppID    string
	Bot      User
	BotID    string
	// PingEvery is how often the socket pings (slack-go expects a ping at
	// least every 30 s).
	PingEvery time.Duration

	srv *httptest.Server

	mu         sync.Mutex
	changed    chan struct{}
	users      map[string]User
	channels   map[string]*channelInfo
	msgs       map[string][]*Message // per channel, in ts order
	sent       []Sent
	calls      []Call
	faults     map[string][]Fault
	files      map[string]*File
	tickets    map[string]bool
	conns      []*wsConn
	envelopes  []*envelope
	ignoreAcks bool
	ackTimeout time.Duration
	closed     bool
	// Events API delivery (DeliverEvents).
	eventsURL     string
	signingSecret string
	eventsQueue   chan *envelope
	eventPosts    []int
	// interactionsURL receives button presses in Events API mode.
	interactionsURL  string
	interactionPosts []int
	acks             []string
	opened           int
	clock            int64
	nextID           int
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
		BotToken:   "xoxb-1000-2000-conchtestbottoken",
		AppToken:   "xapp-1-A0CONCH-3000-conchtestapptoken",
		TeamID:     "T0CONCH",
		AppID:      "A0CONCH",
		BotID:      "B0CONCH",
		ackTimeout: 3 * time.Second,
		PingEvery:  5 * time.Second,
		changed:    make(chan struct{}),
		users:      map[string]User{},
		channels:   map[string]*channelInfo{},
		msgs:       map[string][]*Message{},
		faults:     map[string][]Fault{},
		files:      map[string]*File{},
		tickets:    map[string]bool{},
		clock:      time.Now().Unix() * 1e6,
	}
	s.Bot = User{ID: "U0CONCHBOT", Team: s.TeamID, Name: "conch", Real: "Conch", IsBot: true}
	s.users[s.Bot.ID] = s.Bot
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("slack fake: listen: %v", err))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", s.serveAPI)
	mux.HandleFunc("/link/", s.serveSocket)
	mux.HandleFunc("/upload/{id}", s.serveUpload)
	mux.HandleFunc("/files-pri/{id}/{name}", s.serveFile)
	s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	s.srv.Start()
	s.URL = s.srv.URL
	go s.redeliverLoop()
	return s
}

// SetAckTimeout sets how long an envelope waits for its ack before it is
// delivered again (Slack: a few seconds; 3 s here unless set).
func (s *Server) SetAckTimeout(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ackTimeout = d
}

// APIURL is the Web API's base URL, as slack-go's OptionAPIURL wants it.
func (s *Server) APIURL() string { return s.URL + "/api/" }

// Close stops the server; sockets are closed.
func (s *Server) Close() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.closed = true
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// notifyLocked wakes every waiter.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// tsLocked is a new message timestamp: seconds.microseconds, increasing.
func (s *Server) tsLocked() string {
	now := time.Now().UnixMicro()
	if now <= s.clock {
		now = s.clock + 1
	}
	s.clock = now
	return fmt.Sprintf("%d.%06d", now/1e6, now%1e6)
}

func (s *Server) idLocked(prefix string) string {
	s.nextID++
	return fmt.Sprintf("%s%07d", prefix, s.nextID)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
