package config

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// DiscordConfig configures the Discord channel. Owned by the Discord
// channel's authors. The token may instead be given as a file
// (bot_token_file); LoadSecrets reads it.
type DiscordConfig struct {
	// DMPolicy is allowlist | pairing | open (see config/pairing.go).
	DMPolicy     string `toml:"dm_policy" env:"DM_POLICY"`
	BotToken     string `toml:"bot_token" env:"BOT_TOKEN"`
	BotTokenFile string `toml:"bot_token_file" env:"BOT_TOKEN_FILE"`
	// APIURL is the REST API (https://discord.com/api/v9/).
	APIURL string `toml:"api_url" env:"API_URL"`
	// AllowFrom lists user ids, or server:user (<guild id>:<user id>);
	// "*" allows everyone.
	AllowFrom []string `toml:"allow_from" env:"ALLOW_FROM" envSeparator:","`
	// GuildPolicy is mention | all | deny.
	GuildPolicy string `toml:"guild_policy" env:"GUILD_POLICY"`
	// MaxFileBytes caps one received attachment.
	MaxFileBytes int64 `toml:"max_file_bytes" env:"MAX_FILE_BYTES"`
}

// Enabled reports whether the Discord channel is configured.
func (d DiscordConfig) Enabled() bool { return d.BotToken != "" || d.BotTokenFile != "" }

// LoadSecrets fills BotToken from bot_token_file when it is not set.
func (d *DiscordConfig) LoadSecrets() error {
	if d.BotTokenFile == "" || d.BotToken != "" {
		return nil
	}
	b, err := os.ReadFile(d.BotTokenFile)
	if err != nil {
		return fmt.Errorf("discord.bot_token_file: %w", err)
	}
	if d.BotToken = strings.TrimSpace(string(b)); d.BotToken == "" {
		return fmt.Errorf("discord.bot_token_file: %s is empty", d.BotTokenFile)
	}
	return nil
}

func validSnowflake(s string) bool {
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n > 0
}

// validDiscordSender is a user id, optionally after a server id and a colon.
func validDiscordSender(s string) bool {
	if g, u, ok := strings.Cut(s, ":"); ok {
		return validSnowflake(g) && validSnowflake(u)
	}
	return validSnowflake(s)
}

func (d DiscordConfig) validate() []Problem {
	if !d.Enabled() {
		return nil
	}
	ps := validDMPolicy("discord", d.DMPolicy)
	switch {
	case d.BotToken != "" && d.BotTokenFile != "":
		ps = append(ps, Problem{"discord.bot_token", "both bot_token and bot_token_file are set", "keep one of them"})
	case d.BotToken != "" && (strings.Count(d.BotToken, ".") != 2 || strings.ContainsAny(d.BotToken, " \n")):
		ps = append(ps, Problem{"discord.bot_token", "does not look like a bot token", "copy the token from the Developer Portal (your app → Bot → Reset Token) into CONCH_DISCORD_BOT_TOKEN, without \"Bot \""})
	}
	if u, err := url.Parse(d.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps = append(ps, Problem{"discord.api_url", fmt.Sprintf("%q is not an http(s) URL", d.APIURL), "leave it at https://discord.com/api/v9/"})
	}
	if len(d.AllowFrom) == 0 && (d.DMPolicy == "" || d.DMPolicy == DMAllowlist) {
		ps = append(ps, Problem{"discord.allow_from", "empty: every message would be dropped", "list who may use the bot: user ids, e.g. CONCH_DISCORD_ALLOW_FROM=80351110224678912 or <server id>:<user id> (or * for everyone)"})
	}
	for _, a := range d.AllowFrom {
		if a = strings.TrimSpace(a); a != "*" && !validDiscordSender(a) {
			ps = append(ps, Problem{"discord.allow_from", fmt.Sprintf("%q is not a Discord user id", a), "turn on Developer Mode (Settings → Advanced), right-click a user → Copy User ID; prefix a server id and a colon to allow them only there"})
		}
	}
	switch d.GuildPolicy {
	case "mention", "all", "deny":
	default:
		ps = append(ps, Problem{"discord.guild_policy", fmt.Sprintf("unknown policy %q", d.GuildPolicy), "use mention (answer mentions and replies, and threads once mentioned there), all (every message the bot can read) or deny (DMs only)"})
	}
	if d.MaxFileBytes < 1 {
		ps = append(ps, Problem{"discord.max_file_bytes", "must be at least 1", "set a size in bytes, e.g. 26214400 (25 MB)"})
	}
	return ps
}
