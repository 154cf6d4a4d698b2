package config

import (
	"fmt"
	"os"
	"strings"
)

// FallbackConfig is one fallback model: a provider and a model name, with
// its key found as the primary's is (api_key_file, else the provider's
// environment variable, e.g. ANTHROPIC_API_KEY).
type FallbackConfig struct {
	Provider string `toml:"provider"`
	Name     string `toml:"name"`
	BaseURL  string `toml:"base_url"`
	// APIKey is secret: prefer APIKeyFile or the environment.
	APIKey     string `toml:"api_key"`
	APIKeyFile string `toml:"api_key_file"`
	// ContextWindow is 0 to take it from the model's name.
	ContextWindow int `toml:"context_window"`
}

// Label is "provider/name", as the model names itself.
func (f FallbackConfig) Label() string { return f.Provider + "/" + f.Name }

// BudgetConfig holds the daily limits (UTC days); 0 means none. Money is
// counted by the price table ([prices] overrides it).
type BudgetConfig struct {
	DailyUSD                float64 `toml:"daily_usd" env:"DAILY_USD"`
	DailyTokens             int     `toml:"daily_tokens" env:"DAILY_TOKENS"`
	ConversationDailyUSD    float64 `toml:"conversation_daily_usd" env:"CONVERSATION_DAILY_USD"`
	ConversationDailyTokens int     `toml:"conversation_daily_tokens" env:"CONVERSATION_DAILY_TOKENS"`
	PersonDailyUSD          float64 `toml:"person_daily_usd" env:"PERSON_DAILY_USD"`
	PersonDailyTokens       int     `toml:"person_daily_tokens" env:"PERSON_DAILY_TOKENS"`
}

// PriceConfig overrides or adds a row of the price table: USD per million
// tokens. The table key is "provider/model" (a prefix of the model's name).
type PriceConfig struct {
	Input  float64 `toml:"input"`
	Cached float64 `toml:"cached"`
	Output float64 `toml:"output"`
	// Date and Source say where the numbers come from ("config" when empty).
	Date   string `toml:"date"`
	Source string `toml:"source"`
}

// loadFallbackKeys fills each fallback's key from its file or its
// provider's environment variable.
func (c *Config) loadFallbackKeys(envMap map[string]string) error {
	for i := range c.Model.Fallbacks {
		f := &c.Model.Fallbacks[i]
		if f.APIKey != "" {
			continue
		}
		if f.APIKeyFile != "" {
			b, err := os.ReadFile(f.APIKeyFile)
			if err != nil {
				return fmt.Errorf("model.fallbacks[%d].api_key_file: %w", i, err)
			}
			f.APIKey = strings.TrimSpace(string(b))
			continue
		}
		f.APIKey = envMap[providerKeyEnv(f.Provider)]
		if f.APIKey == "" && f.Provider == c.Model.Provider {
			f.APIKey = c.Model.APIKey
		}
	}
	return nil
}

func (c *Config) validateUsage() []Problem {
	var ps []Problem
	add := func(key, msg, fix string) { ps = append(ps, Problem{key, msg, fix}) }
	for i, f := range c.Model.Fallbacks {
		key := fmt.Sprintf("model.fallbacks[%d]", i)
		switch f.Provider {
		case "openai", "anthropic", "gemini":
		default:
			add(key+".provider", fmt.Sprintf("unknown provider %q", f.Provider), "use openai, anthropic or gemini")
		}
		if f.Name == "" {
			add(key+".name", "no model name", "name the model, e.g. claude-sonnet-4-5")
		}
		if f.APIKey == "" && f.BaseURL == "" {
			add(key+".api_key", "no API key for the fallback", "set api_key_file in the fallback's table or "+providerKeyEnv(f.Provider))
		}
		if f.ContextWindow < 0 || (f.ContextWindow > 0 && f.ContextWindow < 1024) {
			add(key+".context_window", fmt.Sprintf("%d tokens is not a usable context window", f.ContextWindow), "set the window (at least 1024), or 0 to take it from the model's name")
		}
	}
	b := c.Budget
	for _, l := range []struct {
		key string
		v   float64
	}{
		{"budget.daily_usd", b.DailyUSD}, {"budget.daily_tokens", float64(b.DailyTokens)},
		{"budget.conversation_daily_usd", b.ConversationDailyUSD}, {"budget.conversation_daily_tokens", float64(b.ConversationDailyTokens)},
		{"budget.person_daily_usd", b.PersonDailyUSD}, {"budget.person_daily_tokens", float64(b.PersonDailyTokens)},
	} {
		if l.v < 0 {
			add(l.key, "a limit cannot be negative", "set 0 for no limit, or the most a UTC day may use")
		}
	}
	for model, p := range c.Prices {
		if !strings.Contains(model, "/") {
			add("prices."+model, "a price row needs provider/model", fmt.Sprintf("write [prices.\"openai/%s\"]", model))
		}
		if p.Input < 0 || p.Cached < 0 || p.Output < 0 {
			add("prices."+model, "a price cannot be negative", "write USD per million tokens")
		}
	}
	return ps
}
