// Package mcp is conch's Model Context Protocol client: the tools,
// resources and prompts of the MCP servers an operator configured, offered
// to the agent as conch.Tools named mcp__<server>__<tool>.
//
// A stdio server is untrusted code: it runs inside the conversation's
// sandbox (one instance per conversation, started on first use, kept across
// turns, ended by Release with the conversation), its JSON-RPC carried by
// the stdin and output of a sandbox Exec; the sandbox has no network. A
// remote server (streamable HTTP, or SSE for older servers) is dialled from
// the host through netpolicy's connect-time address policy, with a bearer
// token from a key file. A server that dies or cannot start is started
// again on its next use after a backoff; until then its tools answer with
// the reason, which /status shows too. Server errors and isError results
// are tool results the model reads, never a failed turn.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"conch"
	"conch/internal/backoff"
	"conch/netpolicy"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
)

// Server is one configured MCP server.
type Server struct {
	// Name is the configured name: in tool names, logs, audit and metrics.
	Name string
	// Argv starts a stdio server inside the sandbox; Env adds to its
	// environment.
	Argv []string
	Env  []string
	// Egress, when set, prepares a stdio server's way to its API before
	// each start in the sandbox sb (a bridge to conch's injecting proxy)
	// and returns the environment entries that point the server at it (a
	// base URL, a placeholder key).
	Egress func(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) ([]string, error)
	// URL is a remote server's endpoint; Transport is "auto" (or ""),
	// "streamable" or "sse".
	URL       string
	Transport string
	// Token, if set, is sent to a remote server as a bearer token (to its
	// own host only).
	Token string
	// OAuth: the token comes from the server's OAuth 2.1 sign-in (`conch
	// mcp login`), kept in Options.OAuthDir and refreshed as needed.
	OAuth bool
	// Policy decides which addresses a remote server may be reached at.
	Policy netpolicy.Policy
	// Include, when set, offers only these tools; Exclude hides tools.
	Include, Exclude []string
	// Timeout bounds one call and the start of the server (default 60s).
	Timeout time.Duration
	// Channels and Conversations, when set, limit who is offered it.
	Channels      []conch.ChannelName
	Conversations []conch.ConversationKey
}

// Stdio reports whether the server runs in the sandbox.
func (s *Server) Stdio() bool { return len(s.Argv) > 0 }

// Offered reports whether the conversation key gets the server.
func (s *Server) Offered(key conch.ConversationKey) bool {
	if len(s.Channels) > 0 && !slices.Contains(s.Channels, key.Channel) {
		return false
	}
	if len(s.Conversations) > 0 && !slices.Contains(s.Conversations, key) {
		return false
	}
	return true
}

func (s *Server) wants(tool string) bool {
	if len(s.Include) > 0 && !slices.Contains(s.Include, tool) {
		return false
	}
	return !slices.Contains(s.Exclude, tool)
}

func (s *Server) timeout() time.Duration {
	if s.Timeout <= 0 {
		return 60 * time.Second
	}
	return s.Timeout
}

// CallEvent is one finished MCP request, for metrics.
type CallEvent struct {
	Server, Tool string
	Duration     time.Duration
	// Outcome is ok, tool_error (the server's isError) or error (the
	// server could not answer).
	Outcome string
}

// Options configures a Client.
type Options struct {
	Servers []Server
	// Audit records every call (server, tool, duration, error); nil
	// records nothing.
	Audit conch.AuditStore
	// OnCall, when set, is told of every call (metrics).
	OnCall func(CallEvent)
	// OnStart, when set, is told of every start of a server (restart
	// true after a death or failure), for metrics.
	OnStart func(server string, restart bool, err error)
	// Backoff spaces the starts of a server that failed or died (default
	// 1s doubling to 5m).
	Backoff backoff.Policy
	// MaxResultChars cuts the text of one result (default 100000).
	MaxResultChars int
	// MaxMessageBytes bounds one JSON-RPC message from a server (default
	// 8 MiB); a larger one ends the connection with a clear error.
	MaxMessageBytes int
	// OAuthDir keeps the OAuth sign-ins of remote servers (OAuthStore).
	OAuthDir string
	// IdleStop ends a stdio server that has had no call this long (0:
	// never); it starts again on the next call. A running server is a
	// program in its sandbox, which keeps the sandbox busy: without this
	// one call would keep a quiet conversation's sandbox from ever being
	// stopped (sandbox.idle_stop).
	IdleStop time.Duration
	// DialAddr, when set, replaces the dial of an allowed address for
	// remote servers (tests).
	DialAddr func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error)
	Logger   *slog.Logger
	Now      func() time.Time
}

// Client holds the MCP connections of every conversation. It is a
// conch.Releaser: a conversation's stdio servers end with it.
type Client struct {
	o       Options
	servers []*Server
	http    map[string]*http.Client
	// plainHTTP reaches a remote server through the address policy
	// without its credential (OAuth discovery, the sign-in itself).
	plainHTTP map[string]*http.Client
	// oauthTokens are the OAuth servers' transports, whose current token
	// is scrubbed from what the model reads.
	oauthTokens map[string]*tokenTransport

	mu sync.Mutex
	// remote: one connection per server, for every conversation.
	remote map[string]*conn
	// local: one stdio connection per server and conversation.
	local map[localKey]*conn
	// catalog is the last tool list each server gave (a stdio server's
	// is the same in every sandbox): a conversation is offered the tools
	// before its own instance starts.
	catalog map[string]*catalog
	closed  bool
}

type localKey struct {
	server string
	key    conch.ConversationKey
}

// catalog is what a server offers.
type catalog struct {
	tools     []*mcpsdk.Tool
	prompts   []*mcpsdk.Prompt
	resources []*mcpsdk.Resource
	// skipped names tools not offered, with why (bad schema).
	skipped map[string]string
}

var _ conch.Releaser = (*Client)(nil)

// New returns a Client for the servers; nothing is started until used.
func New(o Options) (*Client, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Backoff.Base == 0 {
		o.Backoff.Base = time.Second
	}
	if o.Backoff.Cap == 0 {
		o.Backoff.Cap = 5 * time.Minute
	}
	if o.MaxResultChars <= 0 {
		o.MaxResultChars = 100_000
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 8 << 20
	}
	c := &Client{o: o, http: map[string]*http.Client{}, plainHTTP: map[string]*http.Client{}, oauthTokens: map[string]*tokenTransport{}, remote: map[string]*conn{}, local: map[localKey]*conn{}, catalog: map[string]*catalog{}}
	seen := map[string]bool{}
	for i := range o.Servers {
		s := o.Servers[i]
		if s.Name == "" || strings.Contains(s.Name, "__") || seen[s.Name] {
			return nil, fmt.Errorf("mcp: server name %q is empty, repeated or contains \"__\"", s.Name)
		}
		seen[s.Name] = true
		if s.Stdio() == (s.URL != "") {
			return nil, fmt.Errorf("mcp: server %s: want exactly one of a command and a URL", s.Name)
		}
		if !s.Stdio() {
			c.plainHTTP[s.Name] = c.httpClient(&s, nil)
			var ts oauth2.TokenSource
			if s.OAuth {
				ts = OAuthStore{Dir: o.OAuthDir}.TokenSource(s.Name, c.plainHTTP[s.Name])
			}
			c.http[s.Name] = c.httpClient(&s, ts)
		}
		c.servers = append(c.servers, &s)
	}
	return c, nil
}

// Servers returns the configured servers.
func (c *Client) Servers() []*Server { return c.servers }

func (c *Client) server(name string) *Server {
	for _, s := range c.servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// errNoSandbox: a stdio server needs the conversation's computer.
var errNoSandbox = errors.New("no sandbox runtime is configured, and a stdio MCP server runs only inside the conversation's sandbox")

// connFor returns the connection that serves server for key (creating the
// entry; nothing starts here).
func (c *Client) connFor(s *Server, key conch.ConversationKey, sandboxes conch.SandboxProvider) (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("mcp: client closed")
	}
	if !s.Stdio() {
		cn := c.remote[s.Name]
		if cn == nil {
			cn = &conn{c: c, srv: s}
			c.remote[s.Name] = cn
		}
		return cn, nil
	}
	if sandboxes == nil {
		return nil, errNoSandbox
	}
	lk := localKey{s.Name, key}
	cn := c.local[lk]
	if cn == nil {
		cn = &conn{c: c, srv: s, key: key}
		c.local[lk] = cn
	}
	cn.sandboxes = sandboxes
	return cn, nil
}

func (c *Client) setCatalog(server string, cat *catalog) {
	c.mu.Lock()
	c.catalog[server] = cat
	c.mu.Unlock()
}

func (c *Client) knownCatalog(server string) *catalog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.catalog[server]
}

// discoverWait bounds how long a turn's start waits for servers whose
// tools are not known yet (they start in parallel); one that takes longer
// is offered from the next turn on.
const discoverWait = 20 * time.Second

// Tools returns the tools a turn of env.Conversation is offered: every
// offered server's tools (servers not yet known are started, in parallel,
// to learn them; one that cannot start is left out and logged, and
// /status says why), and the resource and prompt tools when a server has
// any. It implements the agent's tool source.
func (c *Client) Tools(ctx context.Context, env conch.ToolEnv) []conch.Tool {
	var unknown []*Server
	for _, s := range c.servers {
		if s.Offered(env.Conversation) && c.knownCatalog(s.Name) == nil {
			unknown = append(unknown, s)
		}
	}
	if len(unknown) > 0 {
		dctx, cancel := context.WithTimeout(ctx, discoverWait)
		var wg sync.WaitGroup
		for _, s := range unknown {
			cn, err := c.connFor(s, env.Conversation, env.Sandboxes)
			if err != nil {
				if !errors.Is(err, errNoSandbox) { // said once at start
					c.o.Logger.Warn("mcp server not offered", "server", s.Name, "conversation", env.Conversation, "err", err)
				}
				continue
			}
			wg.Go(func() {
				if _, err := cn.session(dctx); err != nil {
					c.o.Logger.Warn("mcp server not offered: it did not start", "server", s.Name, "conversation", env.Conversation, "err", err)
				}
			})
		}
		wg.Wait()
		cancel()
	}
	var out []conch.Tool
	var withResources, withPrompts []string
	for _, s := range c.servers {
		if !s.Offered(env.Conversation) {
			continue
		}
		cat := c.knownCatalog(s.Name)
		if cat == nil {
			continue
		}
		for _, t := range cat.tools {
			out = append(out, &serverTool{c: c, srv: s, tool: t})
		}
		if len(cat.resources) > 0 {
			withResources = append(withResources, s.Name)
		}
		if len(cat.prompts) > 0 {
			withPrompts = append(withPrompts, s.Name)
		}
	}
	if len(withResources) > 0 {
		out = append(out, &resourceTool{c: c, servers: withResources})
	}
	if len(withPrompts) > 0 {
		out = append(out, &promptTool{c: c, servers: withPrompts})
	}
	return out
}

// Release implements conch.Releaser: the conversation's stdio servers end.
func (c *Client) Release(_ context.Context, key conch.ConversationKey) error {
	c.mu.Lock()
	var cs []*conn
	for lk, cn := range c.local {
		if lk.key == key {
			cs = append(cs, cn)
			delete(c.local, lk)
		}
	}
	c.mu.Unlock()
	for _, cn := range cs {
		cn.close()
	}
	return nil
}

// Close ends every connection.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	cs := make([]*conn, 0, len(c.local)+len(c.remote))
	for _, cn := range c.local {
		cs = append(cs, cn)
	}
	for _, cn := range c.remote {
		cs = append(cs, cn)
	}
	c.local, c.remote = map[localKey]*conn{}, map[string]*conn{}
	c.mu.Unlock()
	for _, cn := range cs {
		cn.close()
	}
	return nil
}

// State is a server's state as one conversation (or, for remote servers,
// every conversation) sees it.
type State struct {
	Server string
	// Kind is stdio or remote.
	Kind string
	// Status is "not started", "ready", or "down".
	Status string
	Tools  int
	// Err is why it is down; Retry when it is tried again.
	Err      string
	Retry    time.Time
	Restarts int
}

// States returns the state of the servers key is offered.
func (c *Client) States(key conch.ConversationKey) []State {
	var out []State
	for _, s := range c.servers {
		if !s.Offered(key) {
			continue
		}
		st := State{Server: s.Name, Kind: "remote", Status: "not started"}
		if s.Stdio() {
			st.Kind = "stdio"
		}
		c.mu.Lock()
		cn := c.remote[s.Name]
		if s.Stdio() {
			cn = c.local[localKey{s.Name, key}]
		}
		if cat := c.catalog[s.Name]; cat != nil {
			st.Tools = len(cat.tools)
		}
		c.mu.Unlock()
		if cn != nil {
			cn.mu.Lock()
			switch {
			case cn.sess != nil:
				st.Status = "ready"
			case cn.lastErr != nil:
				st.Status, st.Err, st.Retry = "down", cn.lastErr.Error(), cn.retryAt
			}
			st.Restarts = cn.restarts
			cn.mu.Unlock()
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

// Overview is every server's state across conversations (the dashboard).
func (c *Client) Overview() []conch.MCPServerStatus {
	c.mu.Lock()
	conns := map[string][]*conn{}
	for name, cn := range c.remote {
		conns[name] = append(conns[name], cn)
	}
	for lk, cn := range c.local {
		conns[lk.server] = append(conns[lk.server], cn)
	}
	tools := map[string]int{}
	for name, cat := range c.catalog {
		tools[name] = len(cat.tools)
	}
	c.mu.Unlock()
	out := make([]conch.MCPServerStatus, 0, len(c.servers))
	for _, s := range c.servers {
		st := conch.MCPServerStatus{Name: s.Name, Kind: "remote", Tools: tools[s.Name]}
		if s.Stdio() {
			st.Kind = "stdio"
		}
		for _, cn := range conns[s.Name] {
			cn.mu.Lock()
			switch {
			case cn.sess != nil:
				st.Ready++
			case cn.lastErr != nil:
				st.Down++
				st.LastError = clipText(cn.lastErr.Error(), 300)
			}
			st.Restarts += cn.restarts
			cn.mu.Unlock()
		}
		out = append(out, st)
	}
	return out
}

// Status implements the gateway's status source: one /status line per
// server the conversation is offered that is down or restarting.
func (c *Client) Status(_ context.Context, key conch.ConversationKey) []string {
	var lines []string
	now := c.o.Now()
	for _, st := range c.States(key) {
		switch st.Status {
		case "down":
			wait := st.Retry.Sub(now).Round(time.Second)
			when := "on its next use"
			if wait > 0 {
				when = "in " + wait.String() + " at the earliest"
			}
			lines = append(lines, fmt.Sprintf("MCP %s: down (%s); restarting %s.", st.Server, clipText(st.Err, 160), when))
		case "ready":
			restarted := ""
			if st.Restarts > 0 {
				restarted = fmt.Sprintf(", restarted %d time(s)", st.Restarts)
			}
			lines = append(lines, fmt.Sprintf("MCP %s: ready, %d tools%s.", st.Server, st.Tools, restarted))
		}
	}
	return lines
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
