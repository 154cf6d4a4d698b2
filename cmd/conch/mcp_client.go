package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"conch"
	"conch/config"
	"conch/egress"
	"conch/mcp"
	"conch/netpolicy"
	"conch/npmpin"

	"github.com/prometheus/client_golang/prometheus"
)

// mcpServers turns the [[mcp.servers]] config into the client's servers;
// tokens are read from their key files here. d, when set, gets the egress
// proxies and bridges of stdio servers with an egress_url (closed and
// released with it).
func mcpServers(cfg *config.Config, d *deps) ([]mcp.Server, error) {
	var out []mcp.Server
	for _, sc := range cfg.MCP.Servers {
		s := mcp.Server{
			Name: sc.Name, Env: sc.Env, URL: sc.URL, Transport: sc.Transport,
			Include: sc.Include, Exclude: sc.Exclude, Timeout: sc.Timeout.D(),
		}
		if sc.Stdio() {
			s.Argv = append([]string{sc.StdioCommand()}, sc.Args...)
			if sc.EgressURL != "" {
				var err error
				if s.Egress, err = mcpEgress(sc, d); err != nil {
					return nil, err
				}
			}
		}
		tok, err := sc.LoadToken()
		if err != nil {
			return nil, err
		}
		s.Token, s.OAuth = tok, sc.OAuth
		if sc.AllowPrivate {
			s.Policy = netpolicy.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}
		}
		for _, ch := range sc.Channels {
			s.Channels = append(s.Channels, conch.ChannelName(ch))
		}
		for _, k := range sc.Conversations {
			key, err := conch.ParseConversationKey(k)
			if err != nil {
				return nil, fmt.Errorf("mcp.servers[%s].conversations: %w", sc.Name, err)
			}
			s.Conversations = append(s.Conversations, key)
		}
		out = append(out, s)
	}
	return out, nil
}

// mcpEgress builds a stdio server's way to its API: conch's injecting
// proxy on the host (the real secret) reached through a bridge on each
// sandbox's loopback; the server gets the bridge's URL and, if asked, a
// placeholder in place of the secret. Any other destination is refused
// and audited.
func mcpEgress(sc config.MCPServerConfig, d *deps) (func(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) ([]string, error), error) {
	secret, err := sc.LoadEgressSecret()
	if err != nil {
		return nil, err
	}
	header, prefix := sc.EgressHeaderAndPrefix()
	o := egress.InjectorOptions{Header: header, Prefix: prefix, Key: secret, BaseURL: sc.EgressURL}
	if d != nil {
		o.Logger = d.log
		o.OnRequest = func(e egress.Event) {
			if e.Allowed || d.audit == nil {
				return
			}
			detail := map[string]string{"mcp_server": sc.Name, "method": e.Method, "target": e.Target, "reason": e.Reason}
			if err := conch.RecordAudit(context.Background(), d.audit, time.Now(), conch.AuditEgressRefused, conch.ConversationKey{}, detail); err != nil {
				d.log.Warn("audit egress refusal", "err", err)
			}
		}
	}
	in, err := egress.NewInjector(o)
	if err != nil {
		return nil, fmt.Errorf("mcp.servers[%s].egress_url: %w", sc.Name, err)
	}
	bridges := egress.NewBridges(in, egress.BridgeOptions{})
	if d != nil {
		d.closers = append(d.closers, in, bridges)
		d.releasers = append(d.releasers, bridges)
	}
	return func(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) ([]string, error) {
		origin, err := bridges.URL(ctx, key, sb)
		if err != nil {
			return nil, err
		}
		env := []string{sc.EgressURLEnv + "=" + in.ClientBaseURL(origin),
			"HTTPS_PROXY=" + origin, "https_proxy=" + origin, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
		if sc.EgressSecretEnv != "" {
			env = append(env, sc.EgressSecretEnv+"="+egress.PlaceholderKey)
		}
		return env, nil
	}, nil
}

// mcpInstalls are the stdio servers' pinned packages, built into the
// derived sandbox image beside the coding CLI.
func mcpInstalls(cfg *config.Config) ([]npmpin.Install, error) {
	var out []npmpin.Install
	for _, sc := range cfg.MCP.Servers {
		in, ok, err := sc.Install()
		if err != nil {
			return nil, fmt.Errorf("mcp.servers[%s].package: %w", sc.Name, err)
		}
		if ok {
			out = append(out, in)
		}
	}
	return out, nil
}

// mcpOAuthDir keeps the OAuth sign-ins of `conch mcp login`.
func mcpOAuthDir(cfg *config.Config) string { return filepath.Join(cfg.DataDir, "mcp-oauth") }

// mcpSecrets are the MCP servers' tokens, redacted from tool results like
// every configured secret.
func mcpSecrets(cfg *config.Config, log *slog.Logger) []string {
	var out []string
	for _, sc := range cfg.MCP.Servers {
		tok, err := sc.LoadToken()
		if err != nil {
			log.Warn("an MCP token file cannot be read, so tool results are not redacted of it", "server", sc.Name, "err", err)
			continue
		}
		if tok != "" {
			out = append(out, tok)
		}
		if sc.EgressURL != "" {
			if sec, err := sc.LoadEgressSecret(); err == nil {
				out = append(out, sec)
			}
		}
		if sc.OAuthClientSecretFile != "" {
			if b, err := os.ReadFile(sc.OAuthClientSecretFile); err == nil && strings.TrimSpace(string(b)) != "" {
				out = append(out, strings.TrimSpace(string(b)))
			}
		}
	}
	return out
}

// mcpMetrics counts MCP calls and starts per configured server (the only
// label values besides the outcome).
type mcpMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	starts   *prometheus.CounterVec
}

func newMCPMetrics() *mcpMetrics {
	return &mcpMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_mcp_calls_total",
			Help: "MCP requests by configured server and outcome (ok, tool_error, error)."}, []string{"server", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "conch_mcp_call_seconds",
			Help: "Duration of MCP requests by configured server.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}, []string{"server"}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_mcp_server_starts_total",
			Help: "Starts of MCP servers (result: ok, failed; restart: true after a death or failure)."}, []string{"server", "result", "restart"}),
	}
}

// call counts one MCP request.
func (m *mcpMetrics) call(e mcp.CallEvent) {
	m.calls.WithLabelValues(e.Server, e.Outcome).Inc()
	m.duration.WithLabelValues(e.Server).Observe(e.Duration.Seconds())
}

// start counts one start of a server.
func (m *mcpMetrics) start(server string, restart bool, err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.starts.WithLabelValues(server, result, fmt.Sprint(restart)).Inc()
}

// register adds the counters to reg with every configured server's zero
// series, so that a dashboard sees a server before its first call.
func (m *mcpMetrics) register(reg prometheus.Registerer, servers []string) error {
	for _, c := range []prometheus.Collector{m.calls, m.duration, m.starts} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, s := range servers {
		for _, o := range []string{"ok", "tool_error", "error"} {
			m.calls.WithLabelValues(s, o)
		}
	}
	return nil
}

// wireMCP builds the MCP client when servers are configured, in the
// services phase (before the agent, which only reads d.mcp): its tools join
// each turn (agent.Options.ToolSource), its per-conversation stdio servers
// and egress bridges end with the conversation (Releasers), /status and the
// dashboard report them.
func wireMCP(d *deps) error {
	if d.mcp != nil || len(d.cfg.MCP.Servers) == 0 {
		return nil
	}
	servers, err := mcpServers(d.cfg, d)
	if err != nil {
		return err
	}
	m := newMCPMetrics()
	c, err := mcp.New(mcp.Options{
		Servers: servers, Audit: d.audit, Logger: d.log, OAuthDir: mcpOAuthDir(d.cfg),
		OnCall: m.call, OnStart: m.start,
		// A stdio server keeps its sandbox busy: it ends when the sandbox
		// would be stopped as idle, and starts again on the next call.
		IdleStop: d.cfg.Sandbox.IdleStopD(),
	})
	if err != nil {
		return err
	}
	d.mcp, d.mcpMetrics = c, m
	d.closers = append(d.closers, c)
	d.releasers = append(d.releasers, c)
	for _, s := range servers {
		if s.Stdio() && d.runtime == nil {
			d.log.Warn("an MCP stdio server runs only in a sandbox, and there is no container runtime: it is not offered", "server", s.Name)
		}
	}
	return nil
}

// registerMCPMetrics puts the MCP counters on /metrics.
func registerMCPMetrics(d *deps, reg prometheus.Registerer) {
	if d.mcpMetrics == nil {
		return
	}
	names := make([]string, 0, len(d.cfg.MCP.Servers))
	for _, s := range d.cfg.MCP.Servers {
		names = append(names, s.Name)
	}
	if err := d.mcpMetrics.register(reg, names); err != nil {
		d.log.Warn("mcp metrics not registered", "err", err)
	}
}

// mcpToolSource is the agent's ToolSource over the client: the turn's
// tool environment gives the conversation and its sandbox.
func mcpToolSource(c *mcp.Client) func(ctx context.Context, env conch.ToolEnv) []conch.Tool {
	return func(ctx context.Context, env conch.ToolEnv) []conch.Tool {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return c.Tools(ctx, env)
	}
}
