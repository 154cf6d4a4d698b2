package main

// conch as an MCP server: the route on conch up's HTTP host (mountMCP), the
// token commands and the stdio bridge (`conch mcp serve`).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"conch"
	"conch/agent"
	"conch/config"
	"conch/mcpserver"
	"conch/tool"
)

// mountMCP serves conch's MCP server on the HTTP host: the computer tools
// of the token's conversation, on the runtime and terminals the chat uses.
func mountMCP(d *deps) error {
	c := d.cfg.MCP.Serve
	switch {
	case !c.Enabled || d.http == nil:
		return nil
	case d.runtime == nil:
		d.log.Info("mcp.serve: no container engine, so there is no computer to serve: " + mcpserver.Path + " is not served")
		return nil
	}
	tools := append(computerTools(d), &tool.TerminalRead{P: d.terminals})
	srv, err := mcpserver.New(mcpserver.Options{
		Tokens: d.db, Tools: tools, Sandboxes: d.runtime, Audit: d.audit,
		Redact:      agent.RedactFunc(configSecrets(d.cfg, d.log)),
		BehindProxy: d.cfg.Web.PublicURL != "",
		Logger:      d.log,
	})
	if err != nil {
		return err
	}
	d.http.Mux.Handle(mcpserver.Path, srv.Handler())
	d.log.Info("mcp server", "url", mcpURL(d.cfg), "tools", len(tools))
	return nil
}

// mcpURL is where MCP clients reach the route.
func mcpURL(cfg *config.Config) string { return baseURL(cfg) + mcpserver.Path }

// mcpServerCmds are `conch mcp token`, `conch mcp tokens` and `conch mcp serve`.
func mcpServerCmds(a *app) []*cobra.Command {
	return []*cobra.Command{a.mcpTokenCmd(), a.mcpTokensCmd(), a.mcpServeCmd()}
}

// withStore runs fn with the store, for operator commands that need no
// model and no engine (like `conch web url`); they work while conch up runs.
func (a *app) withStore(ctx context.Context, fn func(context.Context, *deps) error) error {
	cfg, err := a.loadOperatorConfig()
	if err != nil {
		return err
	}
	d, err := a.build(ctx, cfg, io.Discard)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(ctx, d)
}

// issueToken stores a new token for key and audits it.
func issueToken(ctx context.Context, d *deps, key conch.ConversationKey, label string, ttl time.Duration) (string, conch.MCPToken, error) {
	known, err := d.db.Conversations(ctx)
	if err != nil {
		return "", conch.MCPToken{}, err
	}
	if !slices.Contains(known, key) {
		names := make([]string, 0, min(len(known), 10))
		for _, k := range known[:min(len(known), 10)] {
			names = append(names, k.String())
		}
		hint := "none yet"
		if len(names) > 0 {
			hint = strings.Join(names, ", ")
			if len(known) > len(names) {
				hint += ", …"
			}
		}
		return "", conch.MCPToken{}, fmt.Errorf("conversation %s is not known to conch: a token opens the computer of a conversation that has begun (say something in it first, e.g. `conch chat --conversation NAME` for cli:NAME); known conversations: %s", key, hint)
	}
	now := time.Now()
	var expires time.Time
	if ttl > 0 {
		expires = now.Add(ttl)
	}
	tok, rec, err := mcpserver.NewToken(key, label, now, expires)
	if err != nil {
		return "", conch.MCPToken{}, err
	}
	if err := d.db.CreateMCPToken(ctx, rec); err != nil {
		return "", conch.MCPToken{}, err
	}
	detail := map[string]any{"token_id": rec.ID, "label": label}
	if !expires.IsZero() {
		detail["expires_at"] = expires.UTC().Format(time.RFC3339)
	}
	if err := conch.RecordAudit(ctx, d.audit, now, conch.AuditMCPTokenIssue, key, detail); err != nil {
		return "", conch.MCPToken{}, err
	}
	return tok, rec, nil
}

// revokeToken deletes the token with id and audits it.
func revokeToken(ctx context.Context, d *deps, id string) (bool, error) {
	rec, found, err := d.db.MCPToken(ctx, id)
	if err != nil || !found {
		return false, err
	}
	ok, err := d.db.RevokeMCPToken(ctx, id)
	if err != nil || !ok {
		return false, err
	}
	return true, conch.RecordAudit(ctx, d.audit, time.Now(), conch.AuditMCPTokenRevoke, rec.Conversation, map[string]any{"token_id": id, "label": rec.Label})
}

func (a *app) mcpTokenCmd() *cobra.Command {
	var label string
	var expires time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "token CONVERSATION",
		Short: "Issue a token that opens one conversation's computer to an MCP client (shown once)",
		Long: `Issue a token that opens one conversation's computer to an MCP client: it runs
commands, uses the conversation's terminals and reads and writes its files,
through ` + mcpserver.Path + ` on gateway.listen. CONVERSATION is a key channel:id
("cli:local", "telegram:12345"; ` + "`conch sandbox ls`" + ` shows them).

The token is printed once on standard output; conch keeps only its hash.
It works until --expires (default mcp.serve.token_ttl; 0 means until it is
revoked with ` + "`conch mcp token revoke ID`" + `).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := conch.ParseConversationKey(args[0])
			if err != nil || key.Channel == "" || key.ID == "" {
				return fmt.Errorf("%q is not a conversation key: write channel:id, e.g. cli:local", args[0])
			}
			if expires < 0 {
				return errors.New("--expires must not be negative")
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, d *deps) error {
				ttl := d.cfg.MCP.Serve.TokenTTL.D()
				if cmd.Flags().Changed("expires") {
					ttl = expires
				}
				if ttl < 0 {
					return errors.New("mcp.serve.token_ttl is negative: set a duration such as \"720h\", or \"0s\" for tokens that work until revoked")
				}
				tok, rec, err := issueToken(ctx, d, key, label, ttl)
				if err != nil {
					return err
				}
				url := mcpURL(d.cfg)
				if asJSON {
					out := map[string]any{"token": tok, "id": rec.ID, "conversation": key.String(), "url": url, "label": label}
					if !rec.ExpiresAt.IsZero() {
						out["expires_at"] = rec.ExpiresAt.UTC().Format(time.RFC3339)
					}
					return writeJSON(a.stdout, out)
				}
				fmt.Fprintln(a.stdout, tok)
				exp := "never (revoke it with `conch mcp token revoke " + rec.ID + "`)"
				if !rec.ExpiresAt.IsZero() {
					exp = rec.ExpiresAt.Local().Format(time.RFC1123)
				}
				fmt.Fprintf(a.stderr, `
Token %s for conversation %s: shown once, keep it secret. Expires: %s.
MCP endpoint: %s (streamable HTTP, header "Authorization: Bearer <token>")
  Claude Code:   claude mcp add --transport http conch %s --header "Authorization: Bearer <token>"
  stdio clients: conch mcp serve --url %s --token-file FILE
`, rec.ID, key, exp, url, url, url)
				if !d.cfg.MCP.Serve.Enabled {
					fmt.Fprintln(a.stderr, "Note: mcp.serve.enabled is false, so conch up does not serve the endpoint.")
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&label, "label", "", "what the token is for (shown in the list of tokens)")
	cmd.Flags().DurationVar(&expires, "expires", 0, "how long the token works, e.g. 720h (default mcp.serve.token_ttl; 0: until revoked)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the token and its details as JSON")
	revoke := &cobra.Command{
		Use:   "revoke ID|TOKEN",
		Short: "Revoke a token: its next request is refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if tid, ok := mcpserver.TokenID(id); ok {
				id = tid
			}
			return a.withStore(cmd.Context(), func(ctx context.Context, d *deps) error {
				ok, err := revokeToken(ctx, d, id)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("no token %s (`conch mcp tokens` lists them)", id)
				}
				fmt.Fprintf(a.stdout, "Revoked token %s.\n", id)
				return nil
			})
		},
	}
	cmd.AddCommand(revoke)
	return cmd
}

func (a *app) mcpTokensCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "List the MCP server's tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withStore(cmd.Context(), func(ctx context.Context, d *deps) error {
				list, err := d.db.MCPTokens(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					type row struct {
						ID           string     `json:"id"`
						Conversation string     `json:"conversation"`
						Label        string     `json:"label"`
						Created      time.Time  `json:"created_at"`
						Expires      *time.Time `json:"expires_at,omitempty"`
						LastUsed     *time.Time `json:"last_used_at,omitempty"`
						Expired      bool       `json:"expired"`
					}
					rows := []row{}
					opt := func(t time.Time) *time.Time {
						if t.IsZero() {
							return nil
						}
						return &t
					}
					for _, t := range list {
						rows = append(rows, row{t.ID, t.Conversation.String(), t.Label, t.CreatedAt, opt(t.ExpiresAt), opt(t.LastUsed), t.Expired(time.Now())})
					}
					return writeJSON(a.stdout, rows)
				}
				writeTokenTable(a.stdout, list, time.Now())
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// writeTokenTable renders `conch mcp tokens`.
func writeTokenTable(w io.Writer, list []conch.MCPToken, now time.Time) {
	if len(list) == 0 {
		fmt.Fprintln(w, "(no tokens; issue one with `conch mcp token CONVERSATION`)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONVERSATION\tLABEL\tCREATED\tEXPIRES\tLAST USED")
	for _, t := range list {
		exp := "never"
		switch {
		case t.Expired(now):
			exp = "expired"
		case !t.ExpiresAt.IsZero():
			exp = "in " + t.ExpiresAt.Sub(now).Round(time.Minute).String()
		}
		label := t.Label
		if label == "" {
			label = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Conversation, label, ago(now, t.CreatedAt), exp, ago(now, t.LastUsed))
	}
	tw.Flush()
}

// bridgeTokenTTL bounds the token `conch mcp serve --conversation` issues
// for itself, should it be killed before it revokes it.
const bridgeTokenTTL = 24 * time.Hour

func (a *app) mcpServeCmd() *cobra.Command {
	var conversation, url, tokenFile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Bridge an MCP client that speaks only stdio to conch's MCP endpoint",
		Long: `Bridge an MCP client that speaks only stdio (Claude Desktop and the like) to
conch's MCP endpoint over streamable HTTP: MCP messages on standard input and
output, logs on standard error.

  conch mcp serve --conversation cli:local
      on the machine conch runs on: issues a token for this bridge (revoked
      when it ends) and reaches conch up on gateway.listen;
  conch mcp serve --url https://conch.example.org/mcp --token-file FILE
      anywhere: with a token of ` + "`conch mcp token`" + ` kept in FILE.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if (conversation == "") == (tokenFile == "") {
				return errors.New("give one of --conversation (on conch's machine) or --token-file (anywhere)")
			}
			cfg, err := a.loadOperatorConfig()
			if err != nil {
				return err
			}
			if url == "" {
				url = mcpURL(cfg)
			}
			log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			var tok string
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				tok = strings.TrimSpace(string(b))
				if _, ok := mcpserver.TokenID(tok); !ok {
					return fmt.Errorf("--token-file: %s does not hold a conch MCP token (%s…)", tokenFile, mcpserver.TokenPrefix)
				}
			} else {
				key, err := conch.ParseConversationKey(conversation)
				if err != nil || key.Channel == "" || key.ID == "" {
					return fmt.Errorf("--conversation %q is not a conversation key: write channel:id, e.g. cli:local", conversation)
				}
				var id string
				err = a.withStore(ctx, func(ctx context.Context, d *deps) error {
					var rec conch.MCPToken
					tok, rec, err = issueToken(ctx, d, key, fmt.Sprintf("conch mcp serve (pid %d)", os.Getpid()), bridgeTokenTTL)
					id = rec.ID
					return err
				})
				if err != nil {
					return err
				}
				defer func() {
					err := a.withStore(context.WithoutCancel(ctx), func(ctx context.Context, d *deps) error {
						_, err := revokeToken(ctx, d, id)
						return err
					})
					if err != nil {
						log.Warn("revoke the bridge's token", "token_id", id, "err", err)
					}
				}()
			}
			log.Info("conch mcp serve: bridging stdio to " + url)
			return bridgeStdio(ctx, a.stdin, a.stdout, url, tok, log)
		},
	}
	cmd.Flags().StringVar(&conversation, "conversation", "", "conversation key channel:id (on conch's machine: a token is issued for the bridge)")
	cmd.Flags().StringVar(&url, "url", "", "conch's MCP endpoint (default: "+mcpserver.Path+" on gateway.listen or web.public_url)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding a token (from conch mcp token)")
	return cmd
}

// bridgeStdio copies MCP messages between in/out (newline-delimited
// JSON-RPC) and conch's streamable HTTP endpoint until in ends. A call the
// endpoint refuses (a revoked token, conch down) is answered with a JSON-RPC
// error, so the client is never left waiting.
func bridgeStdio(ctx context.Context, in io.Reader, out io.Writer, url, tok string, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rt := &bridgeTransport{token: tok, base: http.DefaultTransport}
	remote, err := (&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer remote.Close()
	local, err := (&mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}).Connect(ctx)
	if err != nil {
		return err
	}
	defer local.Close()
	var (
		mu     sync.Mutex
		initID jsonrpc.ID
	)
	done := make(chan error, 2)
	go func() { // client → conch
		for {
			msg, err := local.Read(ctx)
			if err != nil {
				done <- err
				return
			}
			req, isReq := msg.(*jsonrpc.Request)
			if isReq && req.Method == "initialize" {
				mu.Lock()
				initID = req.ID
				mu.Unlock()
			}
			if err := remote.Write(ctx, msg); err != nil {
				log.Warn("conch mcp serve: a message was refused", "err", err)
				if isReq && req.IsCall() {
					resp := &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "conch: " + err.Error()}}
					if err := local.Write(ctx, resp); err != nil {
						done <- err
						return
					}
				}
			}
		}
	}()
	go func() { // conch → client
		for {
			msg, err := remote.Read(ctx)
			if err != nil {
				done <- fmt.Errorf("from %s: %w", url, err)
				return
			}
			if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
				mu.Lock()
				isInit := initID.IsValid() && resp.ID == initID
				mu.Unlock()
				if isInit {
					var r struct {
						ProtocolVersion string `json:"protocolVersion"`
					}
					if json.Unmarshal(resp.Result, &r) == nil {
						rt.setVersion(r.ProtocolVersion)
					}
				}
			}
			if err := local.Write(ctx, msg); err != nil {
				done <- err
				return
			}
		}
	}()
	err = <-done
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil
	}
	return err
}

// bridgeTransport adds the bearer token and, once the client and conch
// agreed on it, the protocol version header to every request.
type bridgeTransport struct {
	token string
	base  http.RoundTripper

	mu      sync.Mutex
	version string
}

func (t *bridgeTransport) setVersion(v string) {
	t.mu.Lock()
	t.version = v
	t.mu.Unlock()
}

func (t *bridgeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	t.mu.Lock()
	v := t.version
	t.mu.Unlock()
	if v != "" && r.Header.Get("Mcp-Protocol-Version") == "" {
		r.Header.Set("Mcp-Protocol-Version", v)
	}
	return t.base.RoundTrip(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
