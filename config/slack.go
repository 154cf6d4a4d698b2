package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// SlackConfig configures the Slack channel (Socket Mode). Owned by the
// Slack channel's authors. The tokens may instead be given as files
// (bot_token_file, app_token_file); LoadSecrets reads them.
type SlackConfig struct {
	// DMPolicy is allowlist | pairing | open (see config/pairing.go).
	DMPolicy string `toml:"dm_policy" env:"DM_POLICY"`
	// BotToken is the Bot User OAuth Token (xoxb-…).
	BotToken     string `toml:"bot_token" env:"BOT_TOKEN"`
	BotTokenFile string `toml:"bot_token_file" env:"BOT_TOKEN_FILE"`
	// AppToken is an app-level token with connections:write (xapp-…).
	AppToken     string `toml:"app_token" env:"APP_TOKEN"`
	AppTokenFile string `toml:"app_token_file" env:"APP_TOKEN_FILE"`
	// Mode is socket (Socket Mode, the default) | events (the Events API
	// over HTTPS at <gateway.listen>/slack/events).
	Mode string `toml:"mode" env:"MODE"`
	// SigningSecret checks the Events API's requests (mode = events).
	SigningSecret     string `toml:"signing_secret" env:"SIGNING_SECRET"`
	SigningSecretFile string `toml:"signing_secret_file" env:"SIGNING_SECRET_FILE"`
	// APIURL is the Web API (https://slack.com/api/).
	APIURL string `toml:"api_url" env:"API_URL"`
	// AllowFrom lists Slack user ids (U…), or workspace:user (T…:U…); "*"
	// allows everyone.
	AllowFrom []string `toml:"allow_from" env:"ALLOW_FROM" envSeparator:","`
	// ChannelPolicy is mention | all | deny.
	ChannelPolicy string `toml:"channel_policy" env:"CHANNEL_POLICY"`
	// MaxFileBytes caps one received file.
	MaxFileBytes int64 `toml:"max_file_bytes" env:"MAX_FILE_BYTES"`
	// WorkingReaction is the emoji put on a message while it is worked on
	// ("-" for none).
	WorkingReaction string `toml:"working_reaction" env:"WORKING_REACTION"`
}

// Enabled reports whether the Slack channel is configured.
func (s SlackConfig) Enabled() bool { return s.BotToken != "" || s.BotTokenFile != "" }

// LoadSecrets fills the tokens from their files when they are not set.
func (s *SlackConfig) LoadSecrets() error {
	for _, t := range []struct {
		key, file string
		v         *string
	}{{"slack.bot_token_file", s.BotTokenFile, &s.BotToken}, {"slack.app_token_file", s.AppTokenFile, &s.AppToken},
		{"slack.signing_secret_file", s.SigningSecretFile, &s.SigningSecret}} {
		if t.file == "" || *t.v != "" {
			continue
		}
		b, err := os.ReadFile(t.file)
		if err != nil {
			return fmt.Errorf("%s: %w", t.key, err)
		}
		if *t.v = strings.TrimSpace(string(b)); *t.v == "" {
			return fmt.Errorf("%s: %s is empty", t.key, t.file)
		}
	}
	return nil
}

// validSlackSender is a user id (U… or W…), optionally after a workspace
// id and a colon (T…:U…).
func validSlackSender(s string) bool {
	if team, user, ok := strings.Cut(s, ":"); ok {
		return validSlackID(team, "T") && validSlackID(user, "UW")
	}
	return validSlackID(s, "UW")
}

func validSlackID(s, prefixes string) bool {
	return len(s) >= 3 && strings.ContainsRune(prefixes, rune(s[0])) && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == ""
}

func (s SlackConfig) validate() []Problem {
	if !s.Enabled() {
		return nil
	}
	ps := validDMPolicy("slack", s.DMPolicy)
	switch {
	case s.BotToken != "" && s.BotTokenFile != "":
		ps = append(ps, Problem{"slack.bot_token", "both bot_token and bot_token_file are set", "keep one of them"})
	case s.BotToken != "" && !strings.HasPrefix(s.BotToken, "xoxb-"):
		ps = append(ps, Problem{"slack.bot_token", "does not look like a bot token", "copy the Bot User OAuth Token (xoxb-…) from the app's OAuth & Permissions page into CONCH_SLACK_BOT_TOKEN"})
	}
	switch s.Mode {
	case "socket":
		switch {
		case s.AppToken == "" && s.AppTokenFile == "":
			ps = append(ps, Problem{"slack.app_token", "missing: Socket Mode needs an app-level token", "create one with the connections:write scope under Basic Information → App-Level Tokens and set CONCH_SLACK_APP_TOKEN"})
		case s.AppToken != "" && s.AppTokenFile != "":
			ps = append(ps, Problem{"slack.app_token", "both app_token and app_token_file are set", "keep one of them"})
		case s.AppToken != "" && !strings.HasPrefix(s.AppToken, "xapp-"):
			ps = append(ps, Problem{"slack.app_token", "does not look like an app-level token", "create one with connections:write (xapp-…) under Basic Information → App-Level Tokens"})
		}
	case "events":
		if s.SigningSecret == "" && s.SigningSecretFile == "" {
			ps = append(ps, Problem{"slack.signing_secret", "missing: the Events API's requests cannot be checked", "copy the Signing Secret from Basic Information → App Credentials into CONCH_SLACK_SIGNING_SECRET"})
		}
	default:
		ps = append(ps, Problem{"slack.mode", fmt.Sprintf("unknown mode %q", s.Mode), "use socket (no public URL needed) or events (Slack posts to https://<your host>/slack/events)"})
	}
	if u, err := url.Parse(s.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps = append(ps, Problem{"slack.api_url", fmt.Sprintf("%q is not an http(s) URL", s.APIURL), "leave it at https://slack.com/api/"})
	}
	if len(s.AllowFrom) == 0 && (s.DMPolicy == "" || s.DMPolicy == DMAllowlist) {
		ps = append(ps, Problem{"slack.allow_from", "empty: every message would be dropped", "list who may use the bot: Slack member ids, e.g. CONCH_SLACK_ALLOW_FROM=U012AB3CD or T0123:U012AB3CD (or * for everyone)"})
	}
	for _, a := range s.AllowFrom {
		if a = strings.TrimSpace(a); a != "*" && !validSlackSender(a) {
			ps = append(ps, Problem{"slack.allow_from", fmt.Sprintf("%q is not a Slack member id", a), "use member ids such as U012AB3CD (profile → ⋮ → Copy member ID), optionally as T0123:U012AB3CD to name the workspace"})
		}
	}
	switch s.ChannelPolicy {
	case "mention", "all", "deny":
	default:
		ps = append(ps, Problem{"slack.channel_policy", fmt.Sprintf("unknown policy %q", s.ChannelPolicy), "use mention (answer when mentioned, then in that thread), all (every message in the bot's channels) or deny (DMs only)"})
	}
	if s.MaxFileBytes < 1 {
		ps = append(ps, Problem{"slack.max_file_bytes", "must be at least 1", "set a size in bytes, e.g. 20971520 (20 MB)"})
	}
	return ps
}
