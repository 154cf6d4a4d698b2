package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTelegramEnv(t *testing.T) {
	c, err := Load("", []string{
		"HOME=" + t.TempDir(),
		"XDG_CONFIG_HOME=" + t.TempDir(),
		"CONCH_TELEGRAM_BOT_TOKEN=123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11",
		"CONCH_TELEGRAM_ALLOW_FROM=123456789,@alice",
		"CONCH_TELEGRAM_API_URL=http://127.0.0.1:8081",
	})
	if err != nil {
		t.Fatal(err)
	}
	tc := c.Telegram
	if !tc.Enabled() || tc.APIURL != "http://127.0.0.1:8081" || !reflect.DeepEqual(tc.AllowFrom, []string{"123456789", "@alice"}) {
		t.Fatalf("from the environment: %+v", tc)
	}
	if tc.GroupPolicy != "mention" || tc.MaxFileBytes != 20<<20 {
		t.Fatalf("defaults: group_policy %q max_file_bytes %d, want mention and 20 MB", tc.GroupPolicy, tc.MaxFileBytes)
	}
	if ps := tc.validate(); len(ps) != 0 {
		t.Fatalf("valid config: %v", ps)
	}
	// Without a token the channel is off and nothing is checked.
	if ps := (TelegramConfig{}).validate(); ps != nil {
		t.Fatalf("disabled: %v", ps)
	}
}

func TestTelegramValidate(t *testing.T) {
	base := TelegramConfig{BotToken: "123456:ABC-DEF1234ghIkl", APIURL: "https://api.telegram.org", AllowFrom: []string{"42"}, GroupPolicy: "mention", MaxFileBytes: 1}
	for _, tc := range []struct {
		name string
		mod  func(*TelegramConfig)
		key  string
		fix  string
	}{
		{"bad token", func(c *TelegramConfig) { c.BotToken = "not a token" }, "telegram.bot_token", "BotFather"},
		{"token twice", func(c *TelegramConfig) { c.BotTokenFile = "/x" }, "telegram.bot_token", "keep one"},
		{"api url", func(c *TelegramConfig) { c.APIURL = "api.telegram.org" }, "telegram.api_url", "https://api.telegram.org"},
		{"no allowlist", func(c *TelegramConfig) { c.AllowFrom = nil }, "telegram.allow_from", "CONCH_TELEGRAM_ALLOW_FROM"},
		{"bad sender", func(c *TelegramConfig) { c.AllowFrom = []string{"alice"} }, "telegram.allow_from", "@alice"},
		{"policy", func(c *TelegramConfig) { c.GroupPolicy = "open" }, "telegram.group_policy", "mention"},
		{"file cap", func(c *TelegramConfig) { c.MaxFileBytes = 0 }, "telegram.max_file_bytes", "20971520"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mod(&c)
			ps := c.validate()
			if len(ps) != 1 || ps[0].Key != tc.key || !strings.Contains(ps[0].Fix, tc.fix) {
				t.Fatalf("problems %v, want one for %s whose fix mentions %q", ps, tc.key, tc.fix)
			}
		})
	}
}

func TestTelegramTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("123456:ABC-DEF1234ghIkl\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := TelegramConfig{BotTokenFile: path}
	if err := c.LoadSecrets(); err != nil || c.BotToken != "123456:ABC-DEF1234ghIkl" {
		t.Fatalf("token %q, err %v", c.BotToken, err)
	}
	if err := (&TelegramConfig{BotTokenFile: filepath.Join(t.TempDir(), "none")}).LoadSecrets(); err == nil || !strings.Contains(err.Error(), "telegram.bot_token_file") {
		t.Fatalf("missing file: %v", err)
	}
}
