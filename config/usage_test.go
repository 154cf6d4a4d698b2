package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFallbacksBudgetAndPrices(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "gemini.key")
	if err := os.WriteFile(keyFile, []byte("gem-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "conch.toml")
	if err := os.WriteFile(path, []byte(`
[model]
provider = "openai"
name = "gpt-4o"

[[model.fallbacks]]
provider = "anthropic"
name = "claude-sonnet-4-5"

[[model.fallbacks]]
provider = "gemini"
name = "gemini-2.5-flash"
api_key_file = "`+keyFile+`"
context_window = 200000

[budget]
daily_usd = 5.0
person_daily_tokens = 100000

[prices."openai/gpt-4o"]
input = 1.0
output = 4.0
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, []string{"OPENAI_API_KEY=oai", "ANTHROPIC_API_KEY=ant", "CONCH_BUDGET_CONVERSATION_DAILY_USD=0.5"})
	if err != nil {
		t.Fatal(err)
	}
	fb := c.Model.Fallbacks
	if len(fb) != 2 || fb[0].APIKey != "ant" || fb[1].APIKey != "gem-key" || fb[1].ContextWindow != 200000 || fb[0].Label() != "anthropic/claude-sonnet-4-5" {
		t.Errorf("fallbacks: got %+v", fb)
	}
	if c.Budget.DailyUSD != 5 || c.Budget.PersonDailyTokens != 100000 || c.Budget.ConversationDailyUSD != 0.5 {
		t.Errorf("budget: got %+v", c.Budget)
	}
	if p := c.Prices["openai/gpt-4o"]; p.Input != 1 || p.Output != 4 {
		t.Errorf("prices: got %+v", c.Prices)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("validate: %v", err)
	}

	c.Model.Fallbacks = append(c.Model.Fallbacks, FallbackConfig{Provider: "mistral"})
	c.Budget.DailyTokens = -1
	err = c.Validate()
	for _, want := range []string{"model.fallbacks[2].provider", "model.fallbacks[2].name", "budget.daily_tokens"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: got %v, want a problem with %s", err, want)
		}
	}
}
