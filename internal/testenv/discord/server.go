// Package discord is a wire-exact fake of Discord's REST API (v9/v10) and
// Gateway for tests, written from the public developer documentation
// (discord.com/developers/docs): REST at /api/v{9,10}/… with "Bot <token>"
// authorization, JSON errors with Discord's codes, per-route rate-limit
// buckets announced in X-RateLimit-* headers and enforced (a client that
// ignores them gets 429 with retry_after), and a Gateway WebSocket with
// Hello (op 10), Identify (op 2, intents checked: without the privileged
// MESSAGE_CONTENT intent, guild messages that do not mention the bot
// arrive without content), heartbeats (op 1 → op 11), READY with a
// session id, Resume (op 6: missed dispatches replayed, then RESUMED),
// Reconnect (op 7) and Invalid Session (op 9).
//
// Tests post messages as people (DMs, guild channels, threads, mentions,
// attachments), read what the bot sent and edited, inject REST faults and
// gateway disconnects, and send while the bot is away (to test backfill).
package discord

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
)

// MaxContent is a message's content limit.
const MaxContent = 2000

// discordEpoch is the first millisecond of 2015, the snowflake epoch.
const discordEpoch = 1420070400000

// Gateway intents the fake checks.
const (
	IntentGuilds         = 1 << 0
	IntentGuildMessages  = 1 << 9
	IntentDirectMessages = 1 << 12
	IntentMessageContent = 1 << 15
)

// User is a Discord user.
type User struct {
	ID            string `json:"id"`
	Username      string `json:"username"`
	GlobalName    string `json:"global_name,omitempty"`
	Discriminator string `json:"discriminator"`
	Bot           bool   `json:"bot,omitempty"`
}

// Attachment is a file on a message.
type Attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	Size        int    `json:"size"`
	URL         string `json:"url"`
	ProxyURL    string `json:"proxy_url"`
	ContentType string `json:"content_type,omitempty"`
	data        []byte
}

// Reference points at the message a reply answers.
type Reference struct {
	MessageID string `json:"message_id,omitempty"`
	ChannelID string `json:"channel_id,omitempty"`
	GuildID   string `json:"guild_id,omitempty"`
}

// Message is a message as Discord keeps it.
type Message struct {
	ID              string       `json:"id"`
	ChannelID       string       `json:"channel_id"`
	GuildID         string       `json:"guild_id,omitempty"`
	Author          User         `json:"author"`
	Content         string       `json:"content"`
	Timestamp       string       `json:"timestamp"`
	EditedTimestamp *string      `json:"edited_timestamp"`
	TTS             bool         `json:"tts"`
	MentionEveryone bool         `json:"mention_everyone"`
	Mentions        []User       `json:"mentions"`
	MentionRoles    []string     `json:"mention_roles"`
	Attachments     []Attachment `json:"attachments"`
	Embeds          []any        `json:"embeds"`
	Pinned          bool         `json:"pinned"`
	Type            int          `json:"type"`
	Reference       *Reference   `json:"message_reference,omitempty"`
	// Components are the message's action rows of buttons.
	Components []Component `json:"components,omitempty"`
}

// Component is a message component: an action row (type 1) holding
// buttons (type 2).
type Component struct {
	Type       int         `json:"type"`
	Components []Component `json:"components,omitempty"`
	Style      int         `json:"style,omitempty"`
	Label      string      `json:"label,omitempty"`
	CustomID   string      `json:"custom_id,omitempty"`
	Disabled   bool        `json:"disabled,omitempty"`
}

// Channel kinds.
const (
	TypeGuildText    = 0
	TypeDM           = 1
	TypePublicThread = 11
)

type channel struct {
	ID      string `json:"id"`
	Type    int    `json:"type"`
	GuildID string `json:"guild_id,omitempty"`
	Name    string `json:"name,omitempty"`
	Parent  string `json:"parent_id,omitempty"`
	user    string // the person of a DM
}

// Sent is something the bot did: a message created or edited, typing.
type Sent struct {
	Method    string // create, edit, typing
	ChannelID string
	MessageID string
	Content   string
	ReplyTo   string
	Files     []Attachment
	// Components are the buttons sent or edited in (an edit with none
	// removes them).
	Components []Component
	// Ephemeral marks an interaction response only its presser sees.
	Ephemeral bool
	At        time.Time
}

// Fault is an error the REST API answers instead of handling a request.
type Fault struct {
	Status int
	Code   int
	// Message is Discord's message ("You are being rate limited.").
	Message string
	// RetryAfter (seconds) for a 429.
	RetryAfter float64
	// Global marks a 429 as global.
	Global bool
	// Times is how many requests get the fault (0 means 1).
	Times int
}

// RateLimited is Discord's 429.
func RateLimited(retryAfter float64) Fault {
	return Fault{Status: http.StatusTooManyRequests, Message: "You are being rate limited.", RetryAfter: retryAfter}
}

// Server is the fake Discord.
type Server struct {
	URL string
	// Token is the bot token (the client sends "Bot <token>").
	Token string
	Bot   User
	AppID string
	// PrivilegedContent is whether the MESSAGE_CONTENT intent is enabled
	// for the app in the developer portal (Identify asking for it without
	// that closes with 4014). Set before the bot connects.
	PrivilegedContent bool
	// HeartbeatInterval is sent in Hello (ms).
	HeartbeatInterval int

	srv *httptest.Server

	mu         sync.Mutex
	changed    chan struct{}
	users      map[string]User
	channels   map[string]*channel
	msgs       map[string][]*Message // per channel, by id ascending
	sent       []Sent
	faults     map[string][]Fault // by route "POST /channels/{id}/messages"
	buckets    map[string]*bucket
	bucketSize int
	bucketWin  time.Duration
	violations int
	sessions   map[string]*session
	conns      []*gwConn
	identifies int
	resumes    int
	snowSeq    int64
	files      map[string]*Attachment
	closed     bool
	// interactions are the button presses sent, by token: answered or not,
	// with the message pressed.
	interactions map[string]*interaction
}

type interaction struct {
	answered bool
	channel  string
	message  string
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
		Token:             "MTAwMDAwMDAwMDAwMDAwMDAx.Gconch.fake-discord-bot-token-0123456789",
		AppID:             "1000000000000000001",
		PrivilegedContent: true,
		HeartbeatInterval: 41250,
		changed:           make(chan struct{}),
		users:             map[string]User{},
		channels:          map[string]*channel{},
		msgs:              map[string][]*Message{},
		faults:            map[string][]Fault{},
		buckets:           map[string]*bucket{},
		bucketSize:        5,
		bucketWin:         5 * time.Second,
		sessions:          map[string]*session{},
		files:             map[string]*Attachment{},
		interactions:      map[string]*interaction{},
	}
	s.Bot = User{ID: "1000000000000000001", Username: "conch", Discriminator: "0", Bot: true}
	s.users[s.Bot.ID] = s.Bot
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("discord fake: listen: %v", err))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveREST)
	mux.HandleFunc("/{$}", s.serveGateway) // the Gateway, as wss://gateway.discord.gg/
	mux.HandleFunc("/attachments/{channel}/{id}/{name}", s.serveAttachment)
	s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	s.srv.Start()
	s.URL = s.srv.URL
	return s
}

// APIURL is the REST base, as https://discord.com/api/v9/ is for Discord.
func (s *Server) APIURL() string { return s.URL + "/api/v9/" }

// Close stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// SetBucket sets the size and window of every route's rate-limit bucket
// (Discord: 5 messages per 5 s per channel).
func (s *Server) SetBucket(size int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bucketSize, s.bucketWin = size, window
	s.buckets = map[string]*bucket{}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// snowflakeLocked is a new id: milliseconds since 2015 and a counter.
func (s *Server) snowflakeLocked() string {
	s.snowSeq++
	ms := time.Now().UnixMilli() - discordEpoch
	return fmt.Sprintf("%d", ms<<22|(s.snowSeq&0x3fffff))
}

// Transport sends requests meant for https://discord.com to the fake, as
// discordgo's endpoints are fixed URLs (base nil = http.DefaultTransport).
func (s *Server) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return rewrite{base: base, to: s.URL}
}

type rewrite struct {
	base http.RoundTripper
	to   string
}

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == "discord.com" || req.URL.Host == "cdn.discordapp.com" {
		u, err := url.Parse(r.to)
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host = u.Scheme, u.Host
		req.Host = u.Host
	}
	return r.base.RoundTrip(req)
}
