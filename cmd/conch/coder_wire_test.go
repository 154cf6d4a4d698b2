package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"conch/config"
	"conch/egress"
)

// TestCoderOptionsKeepKeyOut: the CLI is given the placeholder key and a
// base URL on its bridge, never the real key.
func TestCoderOptionsKeepKeyOut(t *testing.T) {
	const real = "sk-real-coder-key-0123456789"
	for _, tc := range []struct{ agent, baseURL, wantBase string }{
		{"claude", "", "http://127.0.0.1:47291"},
		{"codex", "", "http://127.0.0.1:47291/v1"},
		{"codex", "http://10.0.0.5:4000/v1", "http://127.0.0.1:47291/v1"},
		{"gemini", "", "http://127.0.0.1:47291"},
	} {
		d := &deps{cfg: &config.Config{Coder: config.CoderConfig{Agent: tc.agent, APIKey: real, BaseURL: tc.baseURL}}, log: slog.New(slog.DiscardHandler)}
		p, _, err := coderProfile(tc.agent)
		if err != nil {
			t.Fatalf("%s: %v", tc.agent, err)
		}
		if err := startCoderEgress(d); err != nil {
			t.Fatalf("%s: %v", tc.agent, err)
		}
		o := coderOptions(d, p)
		if o.APIKey != egress.PlaceholderKey || !slices.Contains(o.Env, p.APIKeyEnv+"="+egress.PlaceholderKey) || !slices.Contains(o.Env, "HTTPS_PROXY=http://127.0.0.1:47291") {
			t.Errorf("%s %q: got APIKey %q, Env %q; want the placeholder and the bridge as HTTPS_PROXY", tc.agent, tc.baseURL, o.APIKey, o.Env)
		}
		if base := d.coder.baseURL(); base != tc.wantBase {
			t.Errorf("%s %q: route base URL %q, want %s", tc.agent, tc.baseURL, base, tc.wantBase)
		}
		if strings.Contains(strings.Join(o.Env, " ")+o.APIKey, real) {
			t.Errorf("%s: the real key is in the CLI's options", tc.agent)
		}
		if o.Route == nil || len(d.releasers) != 1 || len(d.closers) != 2 {
			t.Errorf("%s: the bridges are not wired (Route %v, %d releasers, %d closers)", tc.agent, o.Route != nil, len(d.releasers), len(d.closers))
		}
		d.Close()
	}
}

// TestConfigSecrets: secrets given directly and in files are all listed.
func TestConfigSecrets(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "bot")
	if err := os.WriteFile(tokenFile, []byte("123456:telegram-token-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	oauthSecret := filepath.Join(dir, "oauth-client-secret")
	if err := os.WriteFile(oauthSecret, []byte("mcp-oauth-client-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{
		MCP:      config.MCPConfig{Servers: []config.MCPServerConfig{{Name: "docs", URL: "https://mcp.example.com/mcp", OAuthClientSecretFile: oauthSecret}}},
		Model:    config.ModelConfig{APIKey: "model-key-123456"},
		Coder:    config.CoderConfig{APIKey: "coder-key-123456"},
		Search:   config.SearchConfig{BraveAPIKey: "brave-key-123456"},
		Telegram: config.TelegramConfig{BotTokenFile: tokenFile},
		Matrix:   config.MatrixConfig{Password: "matrix-password"},
		Email:    config.EmailConfig{IMAPPassword: "imap-password"},
	}
	var logs bytes.Buffer
	got := configSecrets(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	for _, want := range []string{"model-key-123456", "coder-key-123456", "brave-key-123456", "123456:telegram-token-from-file", "matrix-password", "imap-password", "mcp-oauth-client-secret"} {
		if !slices.Contains(got, want) {
			t.Errorf("configSecrets: %q missing from %q", want, got)
		}
	}
	if cfg.Telegram.BotToken != "" {
		t.Error("configSecrets changed the configuration")
	}
	if logs.Len() != 0 {
		t.Errorf("configSecrets logged with every file readable: %s", logs.String())
	}
	// A file that cannot be read is logged, naming the key.
	cfg.Email.SMTPPasswordFile = filepath.Join(dir, "missing")
	logs.Reset()
	configSecrets(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if !strings.Contains(logs.String(), "email.smtp_password_file") {
		t.Errorf("an unreadable secret file: got log %q, want a warning naming email.smtp_password_file", logs.String())
	}
}
