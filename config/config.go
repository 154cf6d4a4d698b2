// Package config loads conch's configuration: embedded defaults, then a TOML
// file, then CONCH_* environment overrides, then validation with errors that
// name the key and the fix.
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/caarlos0/env/v11"

	"conch/coders"
)

//go:embed default.toml
var defaultTOML []byte

// Default returns the embedded default configuration text.
func Default() []byte { return bytes.Clone(defaultTOML) }

// Config is the whole configuration.
type Config struct {
	// DataDir holds the database, logs and workspaces.
	DataDir string `toml:"data_dir" env:"DATA_DIR"`
	// InstanceID distinguishes conch instances sharing one container engine.
	// Empty means: generated once and kept in the data dir.
	InstanceID string `toml:"instance_id" env:"INSTANCE_ID"`

	Model   ModelConfig   `toml:"model" envPrefix:"MODEL_"`
	Agent   AgentConfig   `toml:"agent" envPrefix:"AGENT_"`
	Gateway GatewayConfig `toml:"gateway" envPrefix:"GATEWAY_"`
	Log     LogConfig     `toml:"log" envPrefix:"LOG_"`
	Sandbox SandboxConfig `toml:"sandbox" envPrefix:"SANDBOX_"`
	Matrix  MatrixConfig  `toml:"matrix" envPrefix:"MATRIX_"`
	Email   EmailConfig   `toml:"email" envPrefix:"EMAIL_"`
	CLI     CLIConfig     `toml:"cli" envPrefix:"CLI_"`
	Tools   ToolsConfig   `toml:"tools" envPrefix:"TOOLS_"`
	Coder   CoderConfig   `toml:"coder" envPrefix:"CODER_"`
	Search  SearchConfig  `toml:"search" envPrefix:"SEARCH_"`
	Skills  SkillsConfig  `toml:"skills" envPrefix:"SKILLS_"`
	Web     WebConfig     `toml:"web" envPrefix:"WEB_"`
	Metrics MetricsConfig `toml:"metrics" envPrefix:"METRICS_"`
	// Budget and Prices: see usage.go.
	Budget BudgetConfig           `toml:"budget" envPrefix:"BUDGET_"`
	Prices map[string]PriceConfig `toml:"prices" env:"-"`

	Telegram TelegramConfig `toml:"telegram" envPrefix:"TELEGRAM_"`
	Slack    SlackConfig    `toml:"slack" envPrefix:"SLACK_"`
	Discord  DiscordConfig  `toml:"discord" envPrefix:"DISCORD_"`
	// Media and Voice: see media.go.
	Media MediaConfig `toml:"media" envPrefix:"MEDIA_"`
	Voice VoiceConfig `toml:"voice" envPrefix:"VOICE_"`
	// Schedule and Hooks: see schedule.go.
	Schedule ScheduleConfig `toml:"schedule" envPrefix:"SCHEDULE_"`
	Hooks    HooksConfig    `toml:"hooks" envPrefix:"HOOKS_"`
	// MCP: see mcp.go.
	MCP MCPConfig `toml:"mcp" envPrefix:"MCP_"`

	// File is the config file that was read, "" if none.
	File string `toml:"-" env:"-"`
}

// ModelConfig selects the LLM.
type ModelConfig struct {
	// Provider is openai | anthropic | gemini.
	Provider string `toml:"provider" env:"PROVIDER"`
	// Name is the model name; the env override is CONCH_MODEL.
	Name    string `toml:"name" env:"-"`
	BaseURL string `toml:"base_url" env:"BASE_URL"`
	// APIKey is secret: prefer APIKeyFile or the environment.
	APIKey     string   `toml:"api_key" env:"API_KEY"`
	APIKeyFile string   `toml:"api_key_file" env:"API_KEY_FILE"`
	MaxTokens  int      `toml:"max_tokens" env:"MAX_TOKENS"`
	Timeout    Duration `toml:"timeout" env:"TIMEOUT"`
	// ContextWindow is the model's context window in tokens; 0 takes it
	// from the model's name (llm.ContextWindow). Override:
	// CONCH_MODEL_CONTEXT_WINDOW.
	ContextWindow int `toml:"context_window" env:"CONTEXT_WINDOW"`
	// Fallbacks take over, in order, for the rest of a turn when the model
	// is rate-limited, overloaded or down after its retries.
	Fallbacks []FallbackConfig `toml:"fallbacks" env:"-"`
}

// AgentConfig tunes the tool-calling loop.
type AgentConfig struct {
	// MaxTurns caps model calls per message.
	MaxTurns int `toml:"max_turns" env:"MAX_TURNS"`
	// MaxRetries caps retries of one transient model failure.
	MaxRetries int      `toml:"max_retries" env:"MAX_RETRIES"`
	RetryBase  Duration `toml:"retry_base" env:"RETRY_BASE"`
	RetryMax   Duration `toml:"retry_max" env:"RETRY_MAX"`
	// MaxConsecutiveToolErrors stops the loop after this many tool errors in a row.
	MaxConsecutiveToolErrors int `toml:"max_consecutive_tool_errors" env:"MAX_CONSECUTIVE_TOOL_ERRORS"`
	// SystemPrompt replaces the built-in system prompt when set.
	SystemPrompt string `toml:"system_prompt" env:"SYSTEM_PROMPT"`
}

// GatewayConfig tunes routing and resumption.
type GatewayConfig struct {
	// MaxAttempts is how often a turn interrupted by a crash is tried in all.
	MaxAttempts int `toml:"max_attempts" env:"MAX_ATTEMPTS"`
	// Listen is the address of the HTTP host: health, the web chat, the
	// dashboard and /metrics ("" disables it).
	Listen string `toml:"listen" env:"LISTEN"`
}

// LogConfig configures logging.
type LogConfig struct {
	Level string `toml:"level" env:"LEVEL"`
	// Format is text | json.
	Format string `toml:"format" env:"FORMAT"`
}

// CLIConfig configures the terminal channel.
type CLIConfig struct {
	// User is the identity of the person at the terminal.
	User string `toml:"user" env:"USER"`
}

// ToolsConfig tunes the built-in tools.
type ToolsConfig struct {
	// BashAllow lists the programs the bash tool may run; empty allows all
	// (the sandbox is the boundary).
	BashAllow []string `toml:"bash_allow" env:"BASH_ALLOW" envSeparator:","`
	// BashTimeout is the default and longest run of one bash call.
	BashTimeout Duration `toml:"bash_timeout" env:"BASH_TIMEOUT"`
	// WebAllowPrivate lists CIDR ranges web_fetch may reach although they
	// are private or special-purpose (an intranet wiki, a local mirror).
	WebAllowPrivate []string `toml:"web_allow_private" env:"WEB_ALLOW_PRIVATE" envSeparator:","`
	// WebProxy is a proxy for web_fetch and web_search, used only when set
	// here: the environment's HTTP(S)_PROXY is never read.
	WebProxy string `toml:"web_proxy" env:"WEB_PROXY"`
	// WebFetchTimeout bounds one fetch, redirects included.
	WebFetchTimeout Duration `toml:"web_fetch_timeout" env:"WEB_FETCH_TIMEOUT"`
	// WebFetchMaxBytes caps the body read ("5MiB"); more is cut and flagged.
	WebFetchMaxBytes string `toml:"web_fetch_max_bytes" env:"WEB_FETCH_MAX_BYTES"`
	// WebFetchMaxChars caps the text the model reads.
	WebFetchMaxChars int `toml:"web_fetch_max_chars" env:"WEB_FETCH_MAX_CHARS"`
	// WebFetchContentTypes lists the media types read ("text/*" wildcards); empty means the built-in list.
	WebFetchContentTypes []string `toml:"web_fetch_content_types" env:"WEB_FETCH_CONTENT_TYPES" envSeparator:","`
	// Approve lists command patterns ("git push *") the bash tool runs
	// only once a person allowed them (tool.ApprovePolicy): a policy for
	// the bash tool, not a boundary.
	Approve []string `toml:"approve" env:"APPROVE" envSeparator:","`
	// ApprovalTimeout is how long a question to a person waits before it
	// is denied.
	ApprovalTimeout Duration `toml:"approval_timeout" env:"APPROVAL_TIMEOUT"`
}

// CoderConfig selects the coding-agent CLI behind the code tool.
type CoderConfig struct {
	// Agent names a coding CLI of coders.Builtin (claude, codex, gemini);
	// "" disables the code tools.
	Agent string `toml:"agent" env:"AGENT"`
	// APIKey is given only to the CLI (secret: prefer APIKeyFile or the environment).
	APIKey     string `toml:"api_key" env:"API_KEY"`
	APIKeyFile string `toml:"api_key_file" env:"API_KEY_FILE"`
	// BaseURL points the CLI at another API endpoint; "" keeps its default.
	BaseURL string `toml:"base_url" env:"BASE_URL"`
	// Hosts is deprecated and ignored (Deprecations warns): the CLI
	// reaches only its API, through conch's key-injecting egress. Still
	// accepted so that files that set it keep loading.
	Hosts []string `toml:"hosts" env:"HOSTS" envSeparator:","`
	// Approvals is auto (the CLI runs in its full-auto mode: the sandbox
	// is the boundary), ask (it keeps its permission prompts, which the
	// model answers with respond_to_agent) or person (its permission
	// prompts go to the conversation's people as buttons).
	Approvals string `toml:"approvals" env:"APPROVALS"`
}

// Vendor is the API vendor of the coding agent (its coders.Builtin
// entry's): anthropic, openai or gemini; "" when none is configured.
func (c CoderConfig) Vendor() string {
	return c.vendor(coders.Builtin())
}

func (c CoderConfig) vendor(t coders.Table) string {
	if cli, ok := t.Lookup(c.Agent); ok {
		return string(cli.Vendor)
	}
	return ""
}

// Duration is a time.Duration written as "1.5s" in TOML and the environment.
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("want a duration like 30s or 1m30s: %w", err)
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// DefaultPath is $XDG_CONFIG_HOME/conch/conch.toml (or ~/.config/conch/conch.toml).
func DefaultPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "conch", "conch.toml")
}

// Load reads the configuration. path "" means DefaultPath, which may be
// absent; an explicit path must exist. environ is os.Environ() in production.
// Load does not validate; call Validate.
func Load(path string, environ []string) (*Config, error) {
	var c Config
	if _, err := toml.Decode(string(defaultTOML), &c); err != nil {
		return nil, fmt.Errorf("load embedded defaults: %w", err)
	}
	explicit := path != ""
	if !explicit {
		path = DefaultPath()
	}
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			md, err := toml.Decode(string(b), &c)
			if err != nil {
				return nil, fmt.Errorf("config file %s: %w", path, err)
			}
			if und := md.Undecoded(); len(und) > 0 {
				keys := make([]string, len(und))
				for i, k := range und {
					keys[i] = k.String()
				}
				return nil, fmt.Errorf("config file %s: unknown key(s) %s: check the spelling against the documented keys", path, strings.Join(keys, ", "))
			}
			c.File = path
		case explicit || !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("config file: %w", err)
		}
	}
	envMap := env.ToMap(environ)
	if err := env.ParseWithOptions(&c, env.Options{Prefix: "CONCH_", Environment: envMap}); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	if v := envMap["CONCH_MODEL"]; v != "" {
		c.Model.Name = v
	}
	if v := envMap["CONCH_NPM_REGISTRY"]; v != "" {
		c.Sandbox.NPMRegistry = v
	}
	if c.Model.APIKey == "" && c.Model.APIKeyFile == "" {
		c.Model.APIKey = envMap[providerKeyEnv(c.Model.Provider)]
	}
	if c.Model.APIKeyFile != "" && c.Model.APIKey == "" {
		b, err := os.ReadFile(c.Model.APIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("model.api_key_file: %w", err)
		}
		c.Model.APIKey = strings.TrimSpace(string(b))
	}
	if c.Coder.APIKeyFile != "" && c.Coder.APIKey == "" {
		b, err := os.ReadFile(c.Coder.APIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("coder.api_key_file: %w", err)
		}
		c.Coder.APIKey = strings.TrimSpace(string(b))
	}
	if v := c.Coder.Vendor(); c.Coder.APIKey == "" && v != "" {
		// The vendor's own variable (ANTHROPIC_API_KEY for Claude Code…),
		// then the model's key when the model is of the same vendor.
		c.Coder.APIKey = envMap[providerKeyEnv(v)]
		if c.Coder.APIKey == "" && v == "gemini" {
			c.Coder.APIKey = envMap["GOOGLE_API_KEY"]
		}
		if c.Coder.APIKey == "" && c.Model.Provider == v {
			c.Coder.APIKey = c.Model.APIKey
		}
	}
	if err := c.loadFallbackKeys(envMap); err != nil {
		return nil, err
	}
	if c.DataDir == "" {
		c.DataDir = defaultDataDir(envMap)
	}
	if err := c.loadWeb(envMap); err != nil {
		return nil, err
	}
	return &c, nil
}

func providerKeyEnv(provider string) string {
	switch provider {
	case "openai":
		return "OPENAI_API_KEY"
	case "anthropic":
		return "ANTHROPIC_API_KEY"
	case "gemini":
		return "GEMINI_API_KEY"
	}
	return ""
}

func defaultDataDir(envMap map[string]string) string {
	if d := envMap["XDG_DATA_HOME"]; d != "" {
		return filepath.Join(d, "conch")
	}
	if h := envMap["HOME"]; h != "" {
		return filepath.Join(h, ".local", "share", "conch")
	}
	return "conch-data"
}

// Problem is one validation failure: the key, what is wrong and how to fix it.
type Problem struct {
	Key string
	Msg string
	Fix string
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s (%s)", p.Key, p.Msg, p.Fix) }

// ValidationError lists every problem found.
type ValidationError struct{ Problems []Problem }

func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "invalid configuration:\n  " + strings.Join(lines, "\n  ")
}

// Validate checks the configuration needed to talk to the model; channels and
// the sandbox validate their own sections in ValidateAll. coder.agent must
// name one of coders.Builtin.
func (c *Config) Validate() error { return c.ValidateWith(coders.Builtin()) }

// ValidateWith is Validate with coder.agent checked against the coding CLIs
// of t (a test's table; conch uses coders.Builtin).
func (c *Config) ValidateWith(t coders.Table) error {
	var ps []Problem
	add := func(key, msg, fix string) { ps = append(ps, Problem{key, msg, fix}) }
	switch c.Model.Provider {
	case "openai", "anthropic", "gemini":
	case "":
		add("model.provider", "no model provider is configured", "set CONCH_MODEL_PROVIDER or [model] provider to openai, anthropic or gemini")
	default:
		add("model.provider", fmt.Sprintf("unknown provider %q", c.Model.Provider), "use openai, anthropic or gemini")
	}
	if c.Model.ContextWindow < 0 || (c.Model.ContextWindow > 0 && c.Model.ContextWindow < 1024) {
		add("model.context_window", fmt.Sprintf("%d tokens is not a usable context window", c.Model.ContextWindow), "set CONCH_MODEL_CONTEXT_WINDOW or [model] context_window to the model's window (at least 1024), or 0 to take it from the model's name")
	}
	if c.Model.Name == "" {
		add("model.name", "no model is configured", "set CONCH_MODEL or [model] name, e.g. gpt-4o-mini, claude-sonnet-4-5, gemini-2.5-flash")
	}
	if c.Model.APIKey == "" && c.Model.BaseURL == "" {
		env := providerKeyEnv(c.Model.Provider)
		fix := "set CONCH_MODEL_API_KEY or [model] api_key_file"
		if env != "" {
			fix += " (or " + env + ")"
		}
		add("model.api_key", "no API key is configured", fix)
	}
	if c.Agent.MaxTurns < 1 {
		add("agent.max_turns", "must be at least 1", "set a positive number, e.g. 25")
	}
	if c.Agent.MaxConsecutiveToolErrors < 1 {
		add("agent.max_consecutive_tool_errors", "must be at least 1", "set a positive number, e.g. 3")
	}
	if c.Gateway.MaxAttempts < 1 {
		add("gateway.max_attempts", "must be at least 1", "set a positive number, e.g. 3")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		add("log.format", fmt.Sprintf("unknown format %q", c.Log.Format), "use text or json")
	}
	ps = append(ps, c.Coder.validate(t)...)
	ps = append(ps, c.validateApprovals()...)
	ps = append(ps, c.validateUsage()...)
	ps = append(ps, c.Sandbox.validate()...)
	ps = append(ps, c.Matrix.validate()...)
	ps = append(ps, c.Telegram.validate()...)
	ps = append(ps, c.Slack.validate()...)
	ps = append(ps, c.Discord.validate()...)
	ps = append(ps, c.Voice.validate()...)
	ps = append(ps, c.validateWeb()...)
	ps = append(ps, c.validateWebChat()...)
	ps = append(ps, c.Email.validate()...)
	ps = append(ps, c.Schedule.validate()...)
	ps = append(ps, c.Hooks.validate()...)
	ps = append(ps, c.validateMCPServe()...)
	ps = append(ps, c.MCP.validateServers()...)
	if len(ps) > 0 {
		return &ValidationError{Problems: ps}
	}
	return nil
}
