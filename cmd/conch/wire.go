package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"conch"
	"conch/agent"
	"conch/channel/web"
	"conch/coders"
	"conch/config"
	"conch/egress"
	"conch/gateway"
	"conch/hook"
	"conch/llm"
	"conch/llm/anthropic"
	"conch/llm/gemini"
	"conch/llm/openai"
	"conch/mcp"
	"conch/obs"
	"conch/obs/metrics"
	"conch/sandbox/docker"
	"conch/schedule"
	"conch/skill"
	"conch/spool"
	"conch/sqlite"
	"conch/terminal"
	"conch/terminal/coder"
	"conch/tool"
	"conch/usage"
)

// loadOperatorConfig reads the configuration for an operator command that
// never talks to the model (`conch web url`, `logout-all`, doctor --offline,
// sandbox, pairing, schedules, usage, backup, restore): it is not validated
// for a model, and it reads the service's environment file (envfile.go), so
// it works where only the service has the model's key.
func (a *app) loadOperatorConfig() (*config.Config, error) {
	env, err := a.environ()
	if err != nil {
		return nil, err
	}
	return config.Load(a.configPath, env)
}

// loadConfig reads and validates the configuration.
func (a *app) loadConfig() (*config.Config, error) {
	cfg, err := a.loadOperatorConfig()
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// deps are the parts built from the configuration.
type deps struct {
	cfg     *config.Config
	log     *slog.Logger
	db      *sqlite.DB
	runtime sandboxRuntime // nil without sandboxes; a *docker.Runtime or the Kubernetes backend (sandboxbackend.go)
	// terminals holds each conversation's tmux terminals; nil without a runtime.
	terminals *terminal.Pool
	audit     *obs.Audit
	// spool keeps received files until their turn copies them into the workspace.
	spool *spool.Spool
	// http is conch up's HTTP host; nil for other commands or without gateway.listen.
	http *httpHost
	// gw is the gateway, built before the channels (they take it as their
	// event source and control); nil until then.
	gw *gateway.Gateway
	// web is the web chat (web.go); nil without it.
	web *web.Channel
	// metrics counts tool calls by the names of the tools the agent has.
	metrics *metrics.Collector
	// releasers hold per-conversation state that a reset or close frees.
	releasers []conch.Releaser
	// skills finds skills and fills the directory sandboxes mount (webtools.go).
	skills *skill.Manager
	// sched fires scheduled wakes and watches; nil unless schedule.enabled.
	// conch up runs it beside the gateway (see wireSchedules).
	sched *schedule.Scheduler
	// hookRunner runs turn hooks; built by hooks().
	hookRunner *hook.Runner
	// meter prices and records model calls and keeps the budgets.
	meter *usage.Meter
	// coder is the coding CLI's egress; nil unless coder.agent is set and
	// sandboxes run (startCoderEgress).
	coder *coderEgress
	// mcp is the MCP client (mcp_client.go); nil without [[mcp.servers]].
	mcp        *mcp.Client
	mcpMetrics *mcpMetrics
	closers    []io.Closer
}

func (d *deps) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		if err := d.closers[i].Close(); err != nil {
			d.log.Warn("close", "err", err)
		}
	}
}

// build opens the store and the audit trail. logTo receives logs.
func (a *app) build(ctx context.Context, cfg *config.Config, logTo io.Writer) (*deps, error) {
	if err := prepareDataDir(cfg.DataDir, a.newStore); err != nil {
		return nil, err
	}
	log, err := obs.NewLogger(logTo, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return nil, err
	}
	d := &deps{cfg: cfg, log: log}
	for _, w := range cfg.Deprecations() {
		log.Warn(w)
	}
	d.db, err = openDataStore(ctx, cfg.DataDir, a.stderr) // upgrade.go
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, d.db)
	// Opened now, not at the first record: a log that cannot be written
	// stops conch at start, and the open files counted at start include it.
	auditPath := filepath.Join(cfg.DataDir, "logs", "audit.jsonl")
	auditFile, err := obs.OpenRotatingFile(auditPath, 50, 10, 90)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("audit log %s: %w (conch writes it under data_dir)", auditPath, err)
	}
	d.closers = append(d.closers, auditFile)
	d.audit = obs.NewAudit(auditFile, d.db, log)
	d.meter = newMeter(cfg, d.db, d.audit, log)
	if d.spool, err = spool.New(filepath.Join(cfg.DataDir, "spool")); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// newMeter builds the usage meter: the price table with the config's
// overrides and the budgets.
func newMeter(cfg *config.Config, db *sqlite.DB, audit conch.AuditStore, log *slog.Logger) *usage.Meter {
	var overrides []usage.Price
	for model, p := range cfg.Prices {
		row := usage.Price{Model: model, Input: p.Input, Cached: p.Cached, Output: p.Output, Date: p.Date, Source: p.Source}
		if row.Source == "" {
			row.Source = "config"
		}
		overrides = append(overrides, row)
	}
	b := cfg.Budget
	// Usage is queued with the turn's next write, not waited for (sqlite.Queued).
	return usage.NewMeter(usage.Options{Store: db.Queued(log), Audit: audit, Prices: usage.NewPrices(overrides...), Logger: log,
		Limits: usage.Limits{
			DailyUSD: b.DailyUSD, DailyTokens: b.DailyTokens,
			ConversationDailyUSD: b.ConversationDailyUSD, ConversationDailyTokens: b.ConversationDailyTokens,
			PersonDailyUSD: b.PersonDailyUSD, PersonDailyTokens: b.PersonDailyTokens,
		}})
}

// modelLabels are the configured models' names ("provider/name"), the
// primary first: the only model labels /metrics uses.
func modelLabels(cfg *config.Config) []string {
	out := []string{cfg.Model.Provider + "/" + cfg.Model.Name}
	for _, f := range cfg.Model.Fallbacks {
		out = append(out, f.Label())
	}
	return out
}

// fallbacks builds the configured fallback models with their windows.
func fallbacks(d *deps) ([]agent.Fallback, error) {
	var out []agent.Fallback
	for i, f := range d.cfg.Model.Fallbacks {
		m, err := newModel(config.ModelConfig{Provider: f.Provider, Name: f.Name, BaseURL: f.BaseURL, APIKey: f.APIKey, Timeout: d.cfg.Model.Timeout})
		if err != nil {
			return nil, fmt.Errorf("model.fallbacks[%d]: %w", i, err)
		}
		window := f.ContextWindow
		if window == 0 {
			var known bool
			if window, known = llm.ContextWindow(f.Name); !known {
				d.log.Warn("unknown context window of a fallback, assuming the default; set its context_window", "model", f.Label(), "window", window)
			}
		}
		out = append(out, agent.Fallback{Model: m, ContextWindow: window})
	}
	return out, nil
}

// newModel creates the configured provider.
func newModel(m config.ModelConfig) (conch.Model, error) {
	timeout := m.Timeout.D()
	switch m.Provider {
	case "openai":
		return openai.New(openai.Config{BaseURL: m.BaseURL, APIKey: m.APIKey, Model: m.Name, Timeout: timeout})
	case "anthropic":
		return anthropic.New(anthropic.Config{BaseURL: m.BaseURL, APIKey: m.APIKey, Model: m.Name, Timeout: timeout})
	case "gemini":
		return gemini.New(gemini.Config{BaseURL: m.BaseURL, APIKey: m.APIKey, Model: m.Name, Timeout: timeout})
	}
	return nil, fmt.Errorf("model.provider: unknown provider %q (use openai, anthropic or gemini)", m.Provider)
}

// startRuntime connects to the container engine. With engine "auto" and
// none reachable, conch runs without sandboxes and says so; a named engine
// that cannot be reached is an error.
func (a *app) startRuntime(ctx context.Context, d *deps, progress func(string)) error {
	sc := d.cfg.Sandbox
	if sc.Engine == "none" {
		d.log.Info("sandboxes disabled (sandbox.engine = none)")
		return nil
	}
	instance, err := instanceID(d.cfg)
	if err != nil {
		return err
	}
	if sc.BackendName() == config.BackendKubernetes {
		rt, err := startKubernetes(ctx, d, instance)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		d.runtime = rt
		d.closers = append(d.closers, rt)
		startTerminals(d)
		return startCoderEgress(d)
	}
	opts, err := sandboxOptions(d.cfg, instance)
	if err != nil {
		return err
	}
	if opts.Installs, err = mcpInstalls(d.cfg); err != nil {
		return err
	}
	opts.Known = d.db.Conversations
	opts.Audit = d.audit
	opts.Logger = d.log
	opts.BuildProgress = progress
	opts.ExtraMounts = append(opts.ExtraMounts, skillsMount(d.cfg))
	rt, err := docker.New(ctx, opts)
	if err != nil {
		if sc.Engine == "auto" && sc.Host == "" && conch.KindOf(err) == conch.KindUnavailable {
			d.log.Warn("no container engine found; running without sandboxes (tools that need a computer will say so)", "err", err)
			return nil
		}
		return fmt.Errorf("sandbox: %w", err)
	}
	d.runtime = rt
	d.closers = append(d.closers, rt)
	startTerminals(d)
	return startCoderEgress(d)
}

// instanceID returns the configured instance id or the one kept in the data
// dir, creating it on first use.
func instanceID(cfg *config.Config) (string, error) {
	if cfg.InstanceID != "" {
		return cfg.InstanceID, nil
	}
	path := filepath.Join(cfg.DataDir, "instance-id")
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("instance id: %w", err)
	}
	buf := make([]byte, 6)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	id := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	return id, nil
}

// newAgent builds the agent loop with the built-in tools.
func newAgent(d *deps) (*agent.Agent, error) {
	model, err := newModel(d.cfg.Model)
	if err != nil {
		return nil, err
	}
	ac := d.cfg.Agent
	ts, err := tools(d)
	if err != nil {
		return nil, err
	}
	if d.metrics != nil {
		names := make([]string, len(ts))
		for i, t := range ts {
			names[i] = t.Spec().Name
		}
		d.metrics.SetTools(names)
	}
	window := d.cfg.Model.ContextWindow
	if window == 0 {
		var known bool
		if window, known = llm.ContextWindow(d.cfg.Model.Name); !known {
			d.log.Warn("unknown context window, assuming the default; set model.context_window", "model", d.cfg.Model.Name, "window", window)
		}
	}
	fbs, err := fallbacks(d)
	if err != nil {
		return nil, err
	}
	opts := agent.Options{
		Model:         model,
		Fallbacks:     fbs,
		Meter:         d.meter,
		Tools:         ts,
		Skills:        d.skillsPrompt,
		Store:         d.db.Queued(d.log), // steps and context use ride with the turn's next write
		Facts:         d.db,
		SystemPrompt:  ac.SystemPrompt,
		MaxTokens:     d.cfg.Model.MaxTokens,
		ContextWindow: window,
		Context:       d.db.Queued(d.log),
		Approvals:     d.db,
		MaxTurns:      ac.MaxTurns,
		MaxToolErrors: ac.MaxConsecutiveToolErrors,
		Retry:         agent.RetryPolicy{Max: ac.MaxRetries, Base: ac.RetryBase.D(), Cap: ac.RetryMax.D()},
		Secrets:       configSecrets(d.cfg, d.log),
		Logger:        d.log,
	}
	if h := d.hooks(); h != nil {
		opts.PreStop = h.PreStop // pre-stop hooks (hook/)
	}
	wireMediaAgent(d, &opts)
	if d.mcp != nil { // built by wireMCP in the services phase
		opts.ToolSource = mcpToolSource(d.mcp)
	}
	return agent.New(opts)
}

// configSecrets lists every secret in the configuration, for the agent to
// redact from tool results: the model's and the coding agent's API keys,
// the search keys, the channels' tokens and passwords. Secrets kept in files
// are read here too (from copies: the channels read their own, and report a
// file that cannot be read; here it is logged, since what it holds cannot
// be redacted).
func configSecrets(cfg *config.Config, log *slog.Logger) []string {
	m, e, tg, sl, dc := cfg.Matrix, cfg.Email, cfg.Telegram, cfg.Slack, cfg.Discord
	for _, load := range []func() error{m.LoadSecrets, e.LoadSecrets, tg.LoadSecrets, sl.LoadSecrets, dc.LoadSecrets} {
		if err := load(); err != nil {
			log.Warn("a secret file cannot be read, so tool results are not redacted of it", "err", err)
		}
	}
	secrets := []string{
		cfg.Model.APIKey, cfg.Coder.APIKey,
		cfg.Search.TavilyAPIKey, cfg.Search.BraveAPIKey,
		tg.BotToken,
		sl.BotToken, sl.AppToken, sl.SigningSecret, dc.BotToken,
		m.AccessToken, m.Password, m.PickleKey,
		e.IMAPPassword, e.SMTPPassword,
	}
	for _, f := range cfg.Model.Fallbacks {
		secrets = append(secrets, f.APIKey)
	}
	if v := cfg.Voice; v.LoadSecrets() == nil {
		secrets = append(secrets, v.APIKey)
	}
	secrets = append(secrets, mcpSecrets(cfg, log)...)
	return secrets
}

// tools lists the built-in tools: memory and the host-side tools always,
// the ones that need a computer only when a container runtime is available.
func tools(d *deps) ([]conch.Tool, error) {
	host, err := hostTools(d)
	if err != nil {
		return nil, err
	}
	ts := append([]conch.Tool{tool.Remember{}, tool.Forget{}}, host...)
	if d.sched != nil {
		ts = append(ts, &tool.Schedule{S: d.sched})
	}
	if d.runtime == nil {
		return ts, nil
	}
	if d.sched != nil {
		ts = append(ts, &tool.Watch{S: d.sched, P: d.terminals})
	}
	ts = append(ts, computerTools(d)...)
	sf, err := sendFileTool(d)
	if err != nil {
		return nil, err
	}
	ts = append(ts, sf)
	ts = append(ts, tool.NewViewImage()) // not over MCP: it answers with pictures
	if d.coder != nil {
		profile, _, err := coderProfile(d.cfg.Coder.Agent)
		if err != nil {
			return nil, err
		}
		co := coderOptions(d, profile)
		ts = append(ts, tool.CodeTools(d.terminals, tool.CodeOptions{Profile: profile, Coder: co, Person: d.cfg.Coder.Approvals == "person"})...)
	}
	return ts, nil
}

// computerTools are the tools that work in a conversation's computer: a
// command, the files, the terminals. The agent has them, and conch's MCP
// server offers them (mcp_server_cmd.go).
func computerTools(d *deps) []conch.Tool {
	tc := d.cfg.Tools
	files := tool.FilesOptions{Auditor: d.audit}
	// config.Validate refused the patterns NewApprovePolicy would.
	approve, err := tool.NewApprovePolicy(tc.Approve)
	if err != nil {
		d.log.Error("tools.approve", "err", err)
	}
	ts := []conch.Tool{
		tool.NewBash(tool.BashOptions{Allow: tc.BashAllow, Timeout: tc.BashTimeout.D(), Auditor: d.audit, Approve: approve}),
		tool.NewReadFile(files), tool.NewWriteFile(files), tool.NewListFiles(files),
	}
	return append(ts, tool.TerminalTools(d.terminals)...)
}

// startTerminals creates the per-conversation terminal managers over the
// runtime (tmux in each sandbox; the registry in the store).
func startTerminals(d *deps) {
	if d.runtime == nil {
		return
	}
	d.terminals = terminal.NewPool(d.runtime, d.db, terminal.Options{Logger: d.log})
	d.closers = append(d.closers, closerFunc(func() error { d.terminals.Close(); return nil }))
	d.releasers = append(d.releasers, d.terminals)
}

// coderProfile is the driver profile of the coding CLI called name (an
// entry of coders.Builtin, which config validated).
func coderProfile(name string) (coder.Profile, coders.CLI, error) {
	cli, ok := coders.Builtin().Lookup(name)
	if !ok {
		return coder.Profile{}, coders.CLI{}, fmt.Errorf("coder.agent: unknown coding agent %q", name)
	}
	p, err := coder.ProfileFor(cli)
	return p, cli, err
}

// coderEgress is the coding CLI's way out: one Injector for the configured
// CLI's API (coder.api_key, coder.base_url), reached from each
// conversation's sandbox through a bridge on egress.DefaultBridgePort.
type coderEgress struct {
	injector *egress.Injector
	bridges  *egress.Bridges
}

// startCoderEgress builds the coding CLI's egress when coder.agent is set,
// in the services phase, and registers what it holds in one place: the
// injector and bridges close with conch, the bridges are released with a
// conversation. Building the tools only reads d.coder.
func startCoderEgress(d *deps) error {
	if d.cfg.Coder.Agent == "" {
		return nil
	}
	_, cli, err := coderProfile(d.cfg.Coder.Agent)
	if err != nil {
		return err
	}
	eg, err := newCoderEgress(d, cli.Vendor)
	if err != nil {
		return err
	}
	d.coder = eg
	d.closers = append(d.closers, eg.injector, eg.bridges)
	d.releasers = append(d.releasers, eg.bridges)
	return nil
}

func newCoderEgress(d *deps, vendor coders.Vendor) (*coderEgress, error) {
	cc := d.cfg.Coder
	in, err := egress.NewInjector(egress.InjectorOptions{
		Vendor: vendor, Key: cc.APIKey, BaseURL: cc.BaseURL, Logger: d.log,
		OnRequest: func(e egress.Event) {
			if e.Allowed || d.audit == nil {
				return
			}
			detail := map[string]string{"method": e.Method, "target": e.Target, "reason": e.Reason}
			if err := conch.RecordAudit(context.Background(), d.audit, time.Now(), conch.AuditEgressRefused, conch.ConversationKey{}, detail); err != nil {
				d.log.Warn("audit egress refusal", "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("coder: %w", err)
	}
	return &coderEgress{injector: in, bridges: egress.NewBridges(in, egress.BridgeOptions{Port: egress.DefaultBridgePort})}, nil
}

// route gives the base URL the CLI must use (with egress.PlaceholderKey as
// its key); it is idempotent and cheap while the bridge lives, and starts
// the bridge again on the same port when it is gone (after a restart of
// conch), so call it before each start or reattachment of the CLI.
func (e *coderEgress) route(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) (string, error) {
	origin, err := e.bridges.URL(ctx, key, sb)
	if err != nil {
		return "", err
	}
	return e.injector.ClientBaseURL(origin), nil
}

// baseURL is what route returns, known up front because the port is fixed.
func (e *coderEgress) baseURL() string {
	return e.injector.ClientBaseURL("http://127.0.0.1:" + strconv.Itoa(egress.DefaultBridgePort))
}

// coderOptions gives the CLI a placeholder key and a base URL on its
// sandbox's loopback (the egress's route), where conch's Injector adds the
// real key on the host: the key never enters the sandbox, which stays on
// network none. HTTPS_PROXY points at the same address, so that an https
// request to any other host becomes a CONNECT the Injector refuses and
// audits rather than a silent DNS failure; the base URL itself is not
// proxied.
func coderOptions(d *deps, p coder.Profile) coder.Options {
	origin := "http://127.0.0.1:" + strconv.Itoa(egress.DefaultBridgePort)
	return coder.Options{
		APIKey: egress.PlaceholderKey,
		Env: []string{
			p.APIKeyEnv + "=" + egress.PlaceholderKey,
			"HTTPS_PROXY=" + origin, "https_proxy=" + origin, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		},
		Route: d.coder.route,
		Ask:   d.cfg.Coder.Approvals == "ask" || d.cfg.Coder.Approvals == "person",
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// newGateway builds the scheduler, the agent and the gateway. The gateway
// has no channels yet: they are built next, with the gateway as their event
// source and control, and attached by Run; the scheduler gets the gateway to
// submit to when it runs.
func newGateway(d *deps) (*gateway.Gateway, error) {
	if err := wireSchedules(d); err != nil {
		return nil, err
	}
	if err := wireMCP(d); err != nil {
		return nil, err
	}
	ag, err := newAgent(d)
	if err != nil {
		return nil, err
	}
	opts := gateway.Options{
		Store: d.db, Agent: ag, Facts: d.db,
		Events: d.db, Attachments: d.spool, Releasers: d.releasers, Policies: policies(d.cfg),
		MaxAttempts: d.cfg.Gateway.MaxAttempts, Logger: d.log, Usage: d.meter,
		Approvals: d.db, ApprovalTimeout: d.cfg.Tools.ApprovalTimeout.D(), Audit: d.audit,
	}
	if d.runtime != nil {
		opts.Runtime = d.runtime // a nil *Runtime must not become a non-nil interface
	}
	if h := d.hooks(); h != nil {
		opts.Hooks = h
	}
	if err := wireMediaGateway(d, &opts); err != nil {
		return nil, err
	}
	if d.mcp != nil {
		opts.StatusSources = append(opts.StatusSources, d.mcp)
	}
	return gateway.New(opts)
}

// --- schedules and hooks (schedule/, hook/) ---

// wireSchedules builds the scheduler when schedule.enabled; it submits
// through the gateway once it runs (up.go) and forgets a conversation's
// entries when the conversation is reset or closed.
func wireSchedules(d *deps) error {
	sc := d.cfg.Schedule
	if !sc.Enabled || d.sched != nil {
		return nil
	}
	o := schedule.Options{Store: d.db, MaxPerConversation: sc.MaxPerConversation,
		MinInterval: sc.MinInterval.D(), Logger: d.log}
	if d.runtime != nil {
		o.Waiter = &schedule.SandboxWaiter{Terminals: d.terminals, Sandboxes: d.runtime}
	}
	s, err := schedule.New(o)
	if err != nil {
		return err
	}
	d.sched = s
	d.releasers = append(d.releasers, s)
	return nil
}

// hooks returns the turn hook runner, or nil when hooks are off or there
// are no sandboxes to run them in.
func (d *deps) hooks() *hook.Runner {
	if !d.cfg.Hooks.Enabled || d.runtime == nil {
		return nil
	}
	if d.hookRunner == nil {
		var operator map[hook.Stage][]hook.Script
		if dir := d.cfg.Hooks.Dir; dir != "" {
			var err error
			if operator, err = hook.LoadOperator(dir); err != nil {
				d.log.Warn("operator hooks not loaded", "dir", dir, "err", err)
			}
		}
		rt := d.runtime
		d.hookRunner = hook.New(hook.Options{Sandboxes: rt, Operator: operator, Logger: d.log,
			// A conversation without a computer runs no hooks: none is
			// created just to look for them.
			Exists: func(ctx context.Context, key conch.ConversationKey) bool {
				if h, ok := rt.(sandboxHaver); ok {
					return h.HasSandbox(ctx, key) // from memory, else one inspect
				}
				_, err := rt.SandboxInfo(ctx, key)
				return err == nil
			}})
	}
	return d.hookRunner
}

// sandboxHaver is a runtime that tells cheaply whether a conversation has a
// sandbox (the Docker backend's HasSandbox).
type sandboxHaver interface {
	HasSandbox(ctx context.Context, key conch.ConversationKey) bool
}

// policies are the channels' dm_policy settings.
func policies(cfg *config.Config) map[conch.ChannelName]gateway.Policy {
	ps := map[conch.ChannelName]gateway.Policy{}
	for ch, v := range map[conch.ChannelName]string{
		conch.ChannelMatrix:   cfg.Matrix.DMPolicy,
		conch.ChannelTelegram: cfg.Telegram.DMPolicy,
		conch.ChannelSlack:    cfg.Slack.DMPolicy,
		conch.ChannelDiscord:  cfg.Discord.DMPolicy,
	} {
		if v != "" {
			ps[ch] = gateway.Policy(v)
		}
	}
	return ps
}
