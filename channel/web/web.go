// Package web is the built-in web chat and the operator's dashboard, served
// on the gateway's HTTP listener.
//
// The web chat is a channel like any other: a message typed in the browser
// goes to Handler.HandleInbound with the key {web, <conversation id>}, so
// commands, queueing, sandboxes and history work as everywhere. The page
// renders from the gateway's event stream (conch.EventSource): every event
// carries its conversation's Seq, and a page that reconnects resumes after
// the last Seq it saw, so a reload, a dropped connection or a restart of
// conch loses nothing and repeats nothing. Send is therefore only logged.
//
// Login is a single-use link (`conch web url`); it starts a server-side
// session: an HttpOnly, SameSite=Strict cookie plus a request token the page
// keeps in its origin's storage and sends with every API and WebSocket
// request (see Auth). WebSocket handshakes must come from the page's own
// origin.
package web

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"conch"
)

//go:embed static
var staticFS embed.FS

// Terminals lets the dashboard watch a sandbox's terminals. The terminal
// package's Pool implements it.
type Terminals interface {
	// Terminals lists the open terminal numbers of the conversation's
	// sandbox (the coding agent's is -1).
	Terminals(ctx context.Context, key conch.ConversationKey) ([]int, error)
	// FollowTerminal calls size with the terminal's size, then out with its
	// current screen (ANSI escapes included) and with its output as tmux
	// pushes it, until ctx is done (nil) or the terminal ends.
	FollowTerminal(ctx context.Context, key conch.ConversationKey, n int, size func(cols, rows int), out func([]byte)) error
}

// History is the stored conversation, for a page that resumes from further
// back than the event hub keeps. conch.TurnStore satisfies it.
type History interface {
	History(ctx context.Context, key conch.ConversationKey) ([]conch.Message, error)
}

// Options configures the web chat and dashboard.
type Options struct {
	// Events is the gateway's event hub. Required.
	Events conch.EventSource
	// Control stops and resets conversations. Required.
	Control conch.ConversationControl
	// Store keeps login tokens. Required.
	Store Logins
	// Sessions keeps the sessions; nil keeps them in memory (they end
	// with the process).
	Sessions Sessions
	// Conversations keeps the conversation list; nil keeps it in memory.
	Conversations ConversationStore
	// Read answers the dashboard's questions; nil shows no conversations.
	Read conch.ReadModel
	// History reloads a conversation the hub no longer keeps; nil means
	// such a page starts from the live events.
	History History
	// Sandboxes lists sandboxes and their use; nil shows none.
	Sandboxes conch.SandboxAdmin
	// Terminals gives the live terminal view; nil shows none.
	Terminals Terminals
	// Files serves the files sent with answers (send_file), one
	// conversation's each; nil serves none.
	Files conch.ConversationFiles
	// MCP, if set, lists the MCP servers on the dashboard.
	MCP func() []conch.MCPServerStatus
	// Metrics, if set, is served at /metrics behind the login.
	Metrics http.Handler
	// Owner is the sender of messages typed in the browser (default "owner").
	Owner conch.UserID
	// MaxMessageBytes caps one message; required (config
	// web.max_message_bytes).
	MaxMessageBytes int
	// MaxFileBytes caps the files of one message, pasted, dropped or
	// recorded in the page (default conch.MaxAttachmentSize).
	MaxFileBytes int
	// LoginTTL and SessionTTL: see NewAuth; required (config web.login_ttl,
	// web.session_ttl).
	LoginTTL, SessionTTL time.Duration
	// Secure marks cookies Secure and sends HSTS: the page is reached over
	// HTTPS (the listener's own TLS, or a TLS reverse proxy).
	Secure bool
	// OriginPatterns are extra hosts allowed to open WebSockets (a reverse
	// proxy's public name); the page's own host always is.
	OriginPatterns []string
	Logger         *slog.Logger
	Now            func() time.Time
}

// Channel is the web chat channel and the HTTP handlers of the web UI.
type Channel struct {
	opts  Options
	auth  *Auth
	convs *conversations
	log   *slog.Logger
	md    *renderer

	mu      sync.Mutex
	handler conch.Handler
	ready   chan struct{} // closed when Run has the handler
}

var _ conch.Channel = (*Channel)(nil)

// New returns the web channel.
func New(opts Options) (*Channel, error) {
	if opts.Events == nil || opts.Control == nil || opts.Store == nil {
		return nil, errors.New("web: events, control and store are required")
	}
	if opts.Owner == "" {
		opts.Owner = "owner"
	}
	if opts.MaxMessageBytes <= 0 || opts.LoginTTL <= 0 || opts.SessionTTL <= 0 {
		return nil, errors.New("web: the message size limit and the login and session lifetimes are required (config web.max_message_bytes, web.login_ttl, web.session_ttl)")
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = conch.MaxAttachmentSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sessions == nil {
		opts.Sessions = NewMemSessions()
	}
	if opts.Conversations == nil {
		opts.Conversations = NewMemConversations()
	}
	return &Channel{
		opts:  opts,
		auth:  NewAuth(opts.Store, opts.Sessions, opts.LoginTTL, opts.SessionTTL, opts.Now),
		convs: &conversations{store: opts.Conversations, now: opts.Now},
		log:   opts.Logger.With("channel", "web"),
		md:    newRenderer(),
		ready: make(chan struct{}),
	}, nil
}

// Auth returns the login and session keeper.
func (c *Channel) Auth() *Auth { return c.auth }

// Owner is the sender of the browser's messages (for the allowlist).
func (c *Channel) Owner() conch.UserID { return c.opts.Owner }

// Name implements conch.Channel.
func (c *Channel) Name() conch.ChannelName { return conch.ChannelWeb }

// Run implements conch.Channel: it hands the browser's messages to h until
// ctx is done, and prunes expired sessions hourly. A message that comes
// before Run waits for it (startWait at most).
func (c *Channel) Run(ctx context.Context, h conch.Handler) error {
	c.mu.Lock()
	if c.handler != nil {
		c.mu.Unlock()
		return errors.New("web: Run called twice")
	}
	c.handler = h
	close(c.ready)
	c.mu.Unlock()
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if err := c.auth.Prune(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("prune web sessions", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Send implements conch.Channel. The page renders replies and notices from
// the event stream, which carries them with their Seq; Send only logs.
func (c *Channel) Send(_ context.Context, out conch.Outbound) error {
	c.log.Debug("outbound (delivered through events)", "conversation", out.Key.String(), "kind", out.Kind.String(), "bytes", len(out.Text))
	return nil
}

// startWait bounds how long a message that came while conch starts (the
// page is served before the gateway resumed its conversations) waits for
// the gateway, rather than being refused.
const startWait = time.Minute

// waitHandler returns the handler once Run has it, waiting up to
// startWait; nil when it did not come (or ctx ended).
func (c *Channel) waitHandler(ctx context.Context) conch.Handler {
	if h := c.handlerOrNil(); h != nil {
		return h
	}
	t := time.NewTimer(startWait)
	defer t.Stop()
	select {
	case <-c.ready:
		return c.handlerOrNil()
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

func (c *Channel) handlerOrNil() conch.Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handler
}

// Register adds the web chat, the dashboard, their API and /metrics (when
// configured) to mux.
func (c *Channel) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	files := http.FileServerFS(static)
	mux.Handle("GET /static/", c.secure(http.StripPrefix("/static/", cacheStatic(files))))
	mux.Handle("GET /{$}", c.secure(c.page("index.html")))
	mux.Handle("GET /dashboard", c.secure(c.page("dashboard.html")))
	mux.Handle("GET /login", c.secure(http.HandlerFunc(c.login)))
	mux.Handle("POST /api/logout", c.api(c.logout))
	mux.Handle("GET /api/session", c.api(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "max_message_bytes": c.opts.MaxMessageBytes, "max_file_bytes": c.opts.MaxFileBytes})
	}))

	mux.Handle("GET /api/conversations", c.api(c.listConversations))
	mux.Handle("POST /api/conversations", c.api(c.createConversation))
	mux.Handle("PATCH /api/conversations/{id}", c.api(c.renameConversation))
	mux.Handle("DELETE /api/conversations/{id}", c.api(c.deleteConversation))
	mux.Handle("GET /api/chat", c.api(c.chatSocket))
	mux.Handle("GET /api/files/{conv}/{ref...}", c.api(c.serveFile))

	mux.Handle("GET /api/dashboard", c.api(c.dashboard))
	mux.Handle("GET /api/audit", c.api(c.audit))
	mux.Handle("POST /api/control", c.api(c.control))
	mux.Handle("POST /api/approvals", c.api(c.answerApproval))
	mux.Handle("GET /api/terminal", c.api(c.terminalSocket))
	if c.opts.Metrics != nil {
		mux.Handle("GET /metrics", c.api(c.opts.Metrics.ServeHTTP))
	}
}

// page serves one of the static pages. Pages carry no data: without a
// session their script shows the login prompt.
func (c *Channel) page(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := staticFS.ReadFile("static/" + name)
		if err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	})
}

func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// secure adds the headers every response of the UI carries.
func (c *Channel) secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		if c.opts.Secure {
			hd.Set("Strict-Transport-Security", "max-age=31536000")
		}
		h.ServeHTTP(w, r)
	})
}
