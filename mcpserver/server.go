// Package mcpserver is conch as an MCP server: a route on conch up's HTTP
// host that serves a conversation's computer (a command, the persistent
// terminals, the workspace's files) over streamable HTTP to an MCP client on
// a person's laptop, with the official Go SDK.
//
// The tools are conch's own (package tool), run with the conversation's
// ToolEnv, so an MCP client sees the same sandbox, the same terminals and
// the same observe-before-act rule as the conversation's agent. Every
// request presents a bearer token bound to one conversation
// (conch.MCPTokenStore, hashes only); it is checked on every request, so a
// revoked or expired token stops working at its next request. The server is
// stateless (no MCP session outlives its request): everything that lasts
// is in the sandbox and the store.
package mcpserver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"conch"
)

// Path is where conch up serves the route.
const Path = "/mcp"

// touchEvery is how often a token's last use is written at most.
const touchEvery = time.Minute

// maxBody bounds one request: write_file takes 1 MiB of content, which JSON
// escaping can make several times larger.
const maxBody = 8 << 20

// Options configures the server.
type Options struct {
	// Tokens checks the tokens presented (required).
	Tokens conch.MCPTokenStore
	// Tools are what the server offers, run with the token's conversation.
	Tools []conch.Tool
	// Sandboxes give each conversation its computer, created on first use:
	// the runtime the chat uses.
	Sandboxes conch.SandboxProvider
	// Audit records every tool call (kind conch.AuditMCPServeCall).
	Audit conch.AuditStore
	// Redact takes the configured secrets out of what goes back to the
	// client; nil returns the text as it is.
	Redact func(string) string
	// BehindProxy turns off the SDK's DNS-rebinding guard, which refuses a
	// request reaching a loopback listener with another Host: a TLS
	// reverse proxy on the same machine sends its public name.
	BehindProxy bool
	// Version is conch's version, sent as the server's.
	Version string
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RevokeCheck is how often a running call looks whether its token was
	// revoked or expired meanwhile, and is stopped if so; 0 means a second.
	RevokeCheck time.Duration
}

// Server is conch's MCP server.
type Server struct {
	opts Options
	log  *slog.Logger
	srv  *mcp.Server

	mu      sync.Mutex
	touched map[string]time.Time
}

// New returns the server with opts.Tools added.
func New(opts Options) (*Server, error) {
	if opts.Tokens == nil {
		return nil, errors.New("mcpserver: Options.Tokens is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Redact == nil {
		opts.Redact = func(s string) string { return s }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.RevokeCheck <= 0 {
		opts.RevokeCheck = time.Second
	}
	s := &Server{opts: opts, log: opts.Logger, touched: map[string]time.Time{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "conch", Title: "conch: a conversation's computer", Version: opts.Version},
		&mcp.ServerOptions{Instructions: instructions})
	seen := map[string]bool{}
	for _, t := range opts.Tools {
		spec := t.Spec()
		if seen[spec.Name] {
			return nil, fmt.Errorf("mcpserver: tool %q is offered twice", spec.Name)
		}
		seen[spec.Name] = true
		s.srv.AddTool(&mcp.Tool{Name: spec.Name, Description: spec.Description, InputSchema: spec.Parameters}, s.handler(t))
	}
	return s, nil
}

const instructions = "These tools work in one conch conversation's computer: a hardened Linux container whose /workspace " +
	"persists, shared with the conversation's own agent. Terminals persist across calls and clients: open one with " +
	"terminal_open, type with terminal_type, and call terminal_wait to see what is new in every terminal (typing is " +
	"refused while a terminal has output nobody has seen). bash runs one program without a shell."

// Handler is the route: bearer token first, then MCP over streamable HTTP.
func (s *Server) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &mcp.StreamableHTTPOptions{
		Stateless:                  true,
		Logger:                     s.log,
		DisableLocalhostProtection: s.opts.BehindProxy,
		MaxRequestBodyBytes:        maxBody,
	})
	bearer := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A request without a bearer token never reaches verify: say so
		// here, in the log and to the client.
		if f := strings.Fields(r.Header.Get("Authorization")); len(f) != 2 || !strings.EqualFold(f[0], "bearer") {
			s.refuse(r, "", "no bearer token")
			w.Header().Set("WWW-Authenticate", `Bearer realm="conch"`)
			http.Error(w, "conch MCP: an Authorization: Bearer token is required (issue one with `conch mcp token CONVERSATION`)", http.StatusUnauthorized)
			return
		}
		bearer.ServeHTTP(w, r)
	})
}

// conversationKey is the TokenInfo.Extra key of the token's conversation.
const conversationKey = "conversation"

// verify checks a presented token against the store: well formed, known
// (not revoked), the right secret, not expired. A refusal is logged, with
// the token's id but never its secret.
func (s *Server) verify(ctx context.Context, tok string, r *http.Request) (*auth.TokenInfo, error) {
	id, ok := TokenID(tok)
	if !ok {
		s.refuse(r, "", "malformed token")
		return nil, fmt.Errorf("%w: not a conch MCP token", auth.ErrInvalidToken)
	}
	rec, found, err := s.opts.Tokens.MCPToken(ctx, id)
	if err != nil {
		s.log.Error("mcp: token lookup failed", "token_id", id, "err", err)
		return nil, errors.New("token lookup failed")
	}
	if !found {
		s.refuse(r, id, "unknown or revoked token")
		return nil, fmt.Errorf("%w: unknown or revoked token", auth.ErrInvalidToken)
	}
	if subtle.ConstantTimeCompare([]byte(HashToken(tok)), []byte(rec.SecretHash)) != 1 {
		s.refuse(r, id, "wrong secret")
		return nil, fmt.Errorf("%w: unknown or revoked token", auth.ErrInvalidToken)
	}
	now := s.opts.Now()
	if rec.Expired(now) {
		s.refuse(r, id, "expired token")
		return nil, fmt.Errorf("%w: the token expired at %s", auth.ErrInvalidToken, rec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	s.touch(ctx, id, now)
	return &auth.TokenInfo{UserID: rec.ID, Expiration: rec.ExpiresAt, Extra: map[string]any{conversationKey: rec.Conversation}}, nil
}

func (s *Server) refuse(r *http.Request, id, reason string) {
	s.log.Warn("mcp: request refused", "reason", reason, "token_id", id, "remote", r.RemoteAddr, "method", r.Method)
}

// touch records a token's use, at most every touchEvery; a failure is
// logged and the request goes on.
func (s *Server) touch(ctx context.Context, id string, now time.Time) {
	s.mu.Lock()
	last, ok := s.touched[id]
	due := !ok || now.Sub(last) >= touchEvery
	if due {
		s.touched[id] = now
	}
	s.mu.Unlock()
	if due {
		if err := s.opts.Tokens.TouchMCPToken(ctx, id, now); err != nil {
			s.log.Warn("mcp: record a token's use", "token_id", id, "err", err)
		}
	}
}

// handler runs t for one call, in the conversation of the call's token.
func (s *Server) handler(t conch.Tool) mcp.ToolHandler {
	name := t.Spec().Name
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var ti *auth.TokenInfo
		if req.Extra != nil {
			ti = req.Extra.TokenInfo
		}
		key, ok := conversationOf(ti)
		if !ok {
			// Unreachable behind Handler: every request carries a token.
			return nil, errors.New("conch MCP: the request carries no conversation token")
		}
		env := conch.ToolEnv{Conversation: key, Sandboxes: s.opts.Sandboxes, Progress: progress(ctx, req, s.opts.Redact)}
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		start := s.opts.Now()
		ctx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		go s.watchToken(ctx, stop, ti.UserID)
		out, err := t.Run(ctx, env, args)
		dur := s.opts.Now().Sub(start)
		revoked := errors.Is(context.Cause(ctx), errRevoked)
		if revoked {
			out, err = conch.ToolFail("stopped: the token was revoked or expired during the call"), nil
		}
		detail := map[string]any{"tool": name, "token_id": ti.UserID, "duration_ms": dur.Milliseconds(), "is_error": err != nil || out.IsError}
		if revoked {
			detail["stopped"] = "token_revoked"
		}
		if err != nil {
			detail["error"] = s.opts.Redact(err.Error())
		}
		if aerr := conch.RecordAudit(ctx, s.opts.Audit, start, conch.AuditMCPServeCall, key, detail); aerr != nil {
			// The call already ran: its answer goes back, and the
			// failure is an error in the log.
			s.log.Error("mcp: audit a call", "tool", name, "conversation", key.String(), "err", aerr)
		}
		if err != nil {
			s.log.Error("mcp: tool failed", "tool", name, "conversation", key.String(), "token_id", ti.UserID, "err", err)
			// The client holds a token of this conversation: it gets the
			// failure itself (secrets taken out), not a generic excuse.
			msg := "conch could not run " + name + ": " + s.opts.Redact(err.Error())
			var ce *conch.Error
			if errors.As(err, &ce) && ce.User != "" {
				msg = "conch could not run " + name + ": " + s.opts.Redact(ce.User)
			}
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
		}
		res := &mcp.CallToolResult{IsError: out.IsError, Content: []mcp.Content{&mcp.TextContent{Text: s.opts.Redact(out.Content)}}}
		if out.ExitCode != nil {
			res.Meta = mcp.Meta{"conch/exit_code": *out.ExitCode}
		}
		return res, nil
	}
}

// errRevoked stops a call whose token was revoked or expired meanwhile.
var errRevoked = errors.New("mcp token revoked")

// watchToken stops a running call (stop) when its token is revoked or
// expires, looking every RevokeCheck until ctx ends: a long command or
// wait does not outlive its token. A failed lookup stops nothing.
func (s *Server) watchToken(ctx context.Context, stop context.CancelCauseFunc, id string) {
	tick := time.NewTicker(s.opts.RevokeCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rec, found, err := s.opts.Tokens.MCPToken(ctx, id)
		if err != nil {
			continue
		}
		if !found || rec.Expired(s.opts.Now()) {
			s.log.Warn("mcp: a call stopped: its token was revoked or expired", "token_id", id)
			stop(errRevoked)
			return
		}
	}
}

// conversationOf is the conversation verify put into a request's token.
func conversationOf(ti *auth.TokenInfo) (conch.ConversationKey, bool) {
	if ti == nil {
		return conch.ConversationKey{}, false
	}
	key, ok := ti.Extra[conversationKey].(conch.ConversationKey)
	return key, ok && !key.IsZero()
}

// progress turns a tool's progress lines (redacted) into MCP progress
// notifications when the client asked for them (a progress token), else
// drops them.
func progress(ctx context.Context, req *mcp.CallToolRequest, redact func(string) string) func(string) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return nil
	}
	var mu sync.Mutex
	n := 0.0
	return func(text string) {
		mu.Lock()
		n++
		p := n
		mu.Unlock()
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Message: redact(text)})
	}
}
