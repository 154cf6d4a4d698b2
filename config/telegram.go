package config

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// TelegramConfig configures the Telegram channel. Owned by the Telegram
// channel's authors. The token may instead be given as a file
// (bot_token_file); LoadSecrets reads it.
type TelegramConfig struct {
	// DMPolicy is allowlist | pairing | open (see config/pairing.go).
	DMPolicy     string `toml:"dm_policy" env:"DM_POLICY"`
	BotToken     string `toml:"bot_token" env:"BOT_TOKEN"`
	BotTokenFile string `toml:"bot_token_file" env:"BOT_TOKEN_FILE"`
	// APIURL is the Bot API server: the public one, or a local
	// telegram-bot-api server.
	APIURL string `toml:"api_url" env:"API_URL"`
	// AllowFrom lists numeric user ids and @usernames; "*" allows everyone.
	AllowFrom []string `toml:"allow_from" env:"ALLOW_FROM" envSeparator:","`
	// GroupPolicy is mention | all | deny.
	GroupPolicy string `toml:"group_policy" env:"GROUP_POLICY"`
	// MaxFileBytes caps one received photo or document.
	MaxFileBytes int64 `toml:"max_file_bytes" env:"MAX_FILE_BYTES"`
}

// Enabled reports whether the Telegram channel is configured.
func (t TelegramConfig) Enabled() bool { return t.BotToken != "" || t.BotTokenFile != "" }

// LoadSecrets fills BotToken from bot_token_file when it is not set.
func (t *TelegramConfig) LoadSecrets() error {
	if t.BotTokenFile == "" || t.BotToken != "" {
		return nil
	}
	b, err := os.ReadFile(t.BotTokenFile)
	if err != nil {
		return fmt.Errorf("telegram.bot_token_file: %w", err)
	}
	t.BotToken = strings.TrimSpace(string(b))
	if t.BotToken == "" {
		return fmt.Errorf("telegram.bot_token_file: %s is empty", t.BotTokenFile)
	}
	return nil
}

// validTelegramToken checks the shape <bot id>:<secret>.
func validTelegramToken(s string) bool {
	id, secret, ok := strings.Cut(s, ":")
	if _, err := strconv.ParseUint(id, 10, 64); !ok || err != nil || len(secret) < 10 {
		return false
	}
	return strings.Trim(secret, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == ""
}

// validTelegramSender is a numeric user id or an @username (5–32 letters,
// digits and underscores).
func validTelegramSender(s string) bool {
	if name, ok := strings.CutPrefix(s, "@"); ok {
		return len(name) >= 5 && len(name) <= 32 && strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == ""
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0
}

func (t TelegramConfig) validate() []Problem {
	if !t.Enabled() {
		return nil
	}
	ps := validDMPolicy("telegram", t.DMPolicy)
	switch {
	case t.BotToken != "" && t.BotTokenFile != "":
		ps = append(ps, Problem{"telegram.bot_token", "both bot_token and bot_token_file are set", "keep one of them"})
	case t.BotToken != "" && !validTelegramToken(t.BotToken):
		ps = append(ps, Problem{"telegram.bot_token", "does not look like a bot token", "copy the token BotFather gave (<bot id>:<secret>) into CONCH_TELEGRAM_BOT_TOKEN"})
	}
	if u, err := url.Parse(t.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps = append(ps, Problem{"telegram.api_url", fmt.Sprintf("%q is not an http(s) URL", t.APIURL), "leave it at https://api.telegram.org, or set the URL of your own Bot API server"})
	}
	if len(t.AllowFrom) == 0 && (t.DMPolicy == "" || t.DMPolicy == DMAllowlist) {
		ps = append(ps, Problem{"telegram.allow_from", "empty: every message would be dropped", "list who may use the bot: numeric user ids or @usernames, e.g. CONCH_TELEGRAM_ALLOW_FROM=123456789,@alice (or * for everyone)"})
	}
	for _, a := range t.AllowFrom {
		if a = strings.TrimSpace(a); a != "*" && !validTelegramSender(a) {
			ps = append(ps, Problem{"telegram.allow_from", fmt.Sprintf("%q is neither a numeric user id nor an @username", a), "use ids such as 123456789 (ask @userinfobot) or usernames such as @alice"})
		}
	}
	switch t.GroupPolicy {
	case "mention", "all", "deny":
	default:
		ps = append(ps, Problem{"telegram.group_policy", fmt.Sprintf("unknown policy %q", t.GroupPolicy), "use mention (answer when mentioned or replied to), all (every message; turn privacy mode off in BotFather) or deny"})
	}
	if t.MaxFileBytes < 1 {
		ps = append(ps, Problem{"telegram.max_file_bytes", "must be at least 1", "set a size in bytes, e.g. 20971520 (20 MB, the public Bot API's download limit)"})
	}
	return ps
}
