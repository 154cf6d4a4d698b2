package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"conch"
	"conch/config"
	"conch/mcp"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/spf13/cobra"
)

// mcpClientCmds are the operator's commands for the MCP servers conch
// uses: list, tools, test.
func mcpClientCmds(a *app) []*cobra.Command {
	return []*cobra.Command{a.mcpListCmd(), a.mcpToolsCmd(), a.mcpTestCmd(), a.mcpLoginCmd()}
}

// mcpTestKey is the conversation whose sandbox `conch mcp test` and
// `conch mcp tools` start a stdio server in; the sandbox is removed after.
func mcpTestKey(server string) conch.ConversationKey {
	return conch.ConversationKey{Channel: "mcp-test", ID: server}
}

// withMCPServer starts one configured server as a turn would (a stdio
// server in a sandbox of its own, removed afterwards) and calls fn.
func (a *app) withMCPServer(ctx context.Context, name string, fn func(ctx context.Context, c *mcp.Client, key conch.ConversationKey, sb conch.SandboxProvider) error) error {
	cfg, err := config.Load(a.configPath, os.Environ())
	if err != nil {
		return err
	}
	sc, ok := cfg.MCP.Server(name)
	if !ok {
		return fmt.Errorf("no MCP server %q is configured (see `conch mcp list`)", name)
	}
	one := *cfg
	one.MCP.Servers = []config.MCPServerConfig{sc}
	servers, err := mcpServers(&one, nil)
	if err != nil {
		return err
	}
	// Every conversation gets it here, whatever channels it is limited to.
	servers[0].Channels, servers[0].Conversations = nil, nil
	c, err := mcp.New(mcp.Options{Servers: servers, OAuthDir: mcpOAuthDir(cfg)})
	if err != nil {
		return err
	}
	defer c.Close()
	key := mcpTestKey(name)
	if !sc.Stdio() {
		return fn(ctx, c, key, nil)
	}
	return a.withRuntime(ctx, func(ctx context.Context, d *deps) error {
		defer func() {
			_ = c.Release(ctx, key)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := d.runtime.Remove(rctx, key); err != nil {
				fmt.Fprintf(a.stderr, "remove the test sandbox: %v\n", err)
			}
		}()
		return fn(ctx, c, key, d.runtime)
	})
}

func (a *app) mcpListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "The configured MCP servers: kind, who gets them, state and tool count",
		Long: `List the [[mcp.servers]] of the configuration. Remote servers are connected to now (state
and tool count); a stdio server runs inside each conversation's sandbox, so it is only started
by "conch mcp test NAME".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(a.configPath, os.Environ())
			if err != nil {
				return err
			}
			if len(cfg.MCP.Servers) == 0 {
				fmt.Fprintln(a.stdout, "No MCP servers are configured ([[mcp.servers]] in the config file).")
				return nil
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tKIND\tTARGET\tOFFERED TO\tSTATE\tTOOLS")
			for _, sc := range cfg.MCP.Servers {
				kind, target := "remote", sc.URL
				if sc.Stdio() {
					kind, target = "stdio", strings.Join(append([]string{sc.StdioCommand()}, sc.Args...), " ")
					if sc.Package != "" {
						target += " (" + sc.Package + ")"
					}
				}
				who := "everyone"
				if len(sc.Channels)+len(sc.Conversations) > 0 {
					who = strings.Join(append(append([]string(nil), sc.Channels...), sc.Conversations...), ",")
				}
				state, tools := "in each sandbox (conch mcp test "+sc.Name+")", "-"
				if !sc.Stdio() {
					err := a.withMCPServer(cmd.Context(), sc.Name, func(ctx context.Context, c *mcp.Client, key conch.ConversationKey, sb conch.SandboxProvider) error {
						specs, _, err := c.Ping(ctx, sc.Name, key, sb)
						tools = fmt.Sprint(len(specs))
						return err
					})
					state = "ready"
					if err != nil {
						state = "down: " + clipOneLine(err.Error(), 80)
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", sc.Name, kind, clipOneLine(target, 50), who, state, tools)
			}
			return w.Flush()
		},
	}
}

func (a *app) mcpToolsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "tools NAME",
		Short: "The tools an MCP server offers, as the model sees them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withMCPServer(cmd.Context(), args[0], func(ctx context.Context, c *mcp.Client, key conch.ConversationKey, sb conch.SandboxProvider) error {
				specs, _, err := c.Ping(ctx, args[0], key, sb)
				if err != nil {
					return fmt.Errorf("MCP server %s: %w", args[0], err)
				}
				for _, s := range specs {
					fmt.Fprintf(a.stdout, "%s\n    %s\n", s.Name, clipOneLine(s.Description, 200))
				}
				fmt.Fprintf(a.stdout, "%d tool(s).\n", len(specs))
				return nil
			})
		},
	}
}

func (a *app) mcpTestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "test NAME",
		Short: "Start an MCP server as a conversation would, ping it and count its tools",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withMCPServer(cmd.Context(), args[0], func(ctx context.Context, c *mcp.Client, key conch.ConversationKey, sb conch.SandboxProvider) error {
				specs, took, err := c.Ping(ctx, args[0], key, sb)
				if err != nil {
					return fmt.Errorf("MCP server %s: %w", args[0], err)
				}
				fmt.Fprintf(a.stdout, "MCP server %s answers: %d tool(s), started and pinged in %s.\n", args[0], len(specs), took.Round(time.Millisecond))
				return nil
			})
		},
	}
}

// doctorMCP checks each remote MCP server (connect, ping, tools); stdio
// servers are checked by `conch mcp test`, which needs a sandbox.
func (a *app) doctorMCP(ctx context.Context, cfg *config.Config, check func(name string, err error, ok string)) {
	for _, sc := range cfg.MCP.Servers {
		name := "mcp " + sc.Name
		if sc.Stdio() {
			// What can be checked without starting a sandbox: the pinned
			// package and its lockfile, the egress secret. Starting it is
			// `conch mcp test`'s.
			what := "command " + sc.StdioCommand()
			in, ok, err := sc.Install()
			if ok && err == nil {
				what = fmt.Sprintf("%s pinned with %d packages", sc.Package, len(in.Tarballs)-1)
			}
			if err == nil && sc.EgressURL != "" {
				_, err = sc.LoadEgressSecret()
				what += ", egress to " + sc.EgressURL
			}
			check(name, err, "stdio server in each conversation's sandbox: "+what+" (start it with `conch mcp test "+sc.Name+"`)")
			continue
		}
		var n int
		err := a.withMCPServer(ctx, sc.Name, func(ctx context.Context, c *mcp.Client, key conch.ConversationKey, sb conch.SandboxProvider) error {
			specs, _, err := c.Ping(ctx, sc.Name, key, sb)
			n = len(specs)
			return err
		})
		if err == nil && n == 0 {
			err = errors.New("it answers but offers no tools (check include/exclude)")
		}
		check(name, err, fmt.Sprintf("answers at %s with %d tool(s)", sc.URL, n))
	}
}

// clipOneLine is s on one line, cut at n bytes.
func clipOneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (a *app) mcpLoginCmd() *cobra.Command {
	var port int
	cmd := &cobra.Command{
		Use:   "login NAME",
		Short: "Sign conch in to a remote MCP server with OAuth 2.1 (oauth = true)",
		Long: `Sign conch in to a remote MCP server that asks for OAuth 2.1 authorization: conch discovers
the server's authorization server, registers itself (or uses oauth_client_id), prints an address
to open in a browser and waits on http://127.0.0.1:PORT/callback for the answer. The tokens are
kept in <data_dir>/mcp-oauth/NAME.json (mode 0600) and refreshed as they expire; run it again
when the server forgets the sign-in.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			cfg, err := config.Load(a.configPath, os.Environ())
			if err != nil {
				return err
			}
			sc, ok := cfg.MCP.Server(name)
			if !ok || sc.Stdio() || !sc.OAuth {
				return fmt.Errorf("no remote MCP server %q with oauth = true is configured", name)
			}
			secret := ""
			if sc.OAuthClientSecretFile != "" {
				b, err := os.ReadFile(sc.OAuthClientSecretFile)
				if err != nil {
					return err
				}
				secret = strings.TrimSpace(string(b))
			}
			servers, err := mcpServers(&config.Config{MCP: config.MCPConfig{Servers: []config.MCPServerConfig{sc}}}, nil)
			if err != nil {
				return err
			}
			servers[0].OAuth = false // the sign-in itself goes without a token
			c, err := mcp.New(mcp.Options{Servers: servers})
			if err != nil {
				return err
			}
			defer c.Close()
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("listen for the sign-in's answer: %w (pick another --port)", err)
			}
			defer ln.Close()
			redirect := "http://" + ln.Addr().String() + "/callback"
			answers := make(chan url.Values, 1)
			srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/callback" {
					http.NotFound(w, r)
					return
				}
				q := r.URL.Query()
				if q.Get("error") != "" {
					fmt.Fprintf(w, "The sign-in was refused: %s. You can close this page.\n", q.Get("error"))
				} else {
					fmt.Fprintln(w, "conch is signed in. You can close this page.")
				}
				select {
				case answers <- q:
				default:
				}
			})}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			g, err := c.Login(ctx, name, mcp.LoginOptions{RedirectURL: redirect, ClientID: sc.OAuthClientID, ClientSecret: secret,
				Authorize: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
					fmt.Fprintf(a.stdout, "Open this address in a browser to sign conch in to %s:\n%s\n", name, args.URL)
					select {
					case q := <-answers:
						if e := q.Get("error"); e != "" {
							return nil, fmt.Errorf("the authorization server refused: %s %s", e, q.Get("error_description"))
						}
						return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
					case <-ctx.Done():
						return nil, fmt.Errorf("no answer from the browser: %w", ctx.Err())
					}
				}})
			if err != nil {
				return err
			}
			st := mcp.OAuthStore{Dir: mcpOAuthDir(cfg)}
			if err := st.Save(name, g); err != nil {
				return fmt.Errorf("keep the sign-in: %w", err)
			}
			fmt.Fprintf(a.stdout, "Signed in to %s; the tokens are kept in %s.\n", name, filepath.Join(st.Dir, name+".json"))
			return nil
		},
	}
	cmd.Flags().IntVar(&port, "port", 8976, "the loopback port the browser is sent back to (http://127.0.0.1:PORT/callback)")
	return cmd
}
