package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWebChatDefaults(t *testing.T) {
	c, err := Load("", []string{"HOME=" + t.TempDir(), "CONCH_MODEL=m", "CONCH_MODEL_API_KEY=k"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Web.Enabled || c.Web.LoginTTL.D().Minutes() != 10 || c.Web.MaxMessageBytes != 65536 || c.Gateway.Listen != "127.0.0.1:8484" {
		t.Fatalf("defaults: %+v listen %q", c.Web, c.Gateway.Listen)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestWebChatValidate(t *testing.T) {
	dir := t.TempDir()
	pem := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(pem, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		key  string // "" = valid
		fix  string
	}{
		{"loopback plain http", []string{"CONCH_GATEWAY_LISTEN=127.0.0.1:9000"}, "", ""},
		{"ipv6 loopback", []string{"CONCH_GATEWAY_LISTEN=[::1]:9000"}, "", ""},
		{"all interfaces without tls", []string{"CONCH_GATEWAY_LISTEN=0.0.0.0:8484"}, "gateway.listen", "web.tls_cert"},
		{"empty host without tls", []string{"CONCH_GATEWAY_LISTEN=:8484"}, "gateway.listen", "allow_insecure"},
		{"all interfaces, insecure allowed", []string{"CONCH_GATEWAY_LISTEN=0.0.0.0:8484", "CONCH_WEB_ALLOW_INSECURE=true"}, "", ""},
		{"all interfaces with tls", []string{"CONCH_GATEWAY_LISTEN=0.0.0.0:8484", "CONCH_WEB_TLS_CERT=" + pem, "CONCH_WEB_TLS_KEY=" + pem}, "", ""},
		{"web and mcp disabled", []string{"CONCH_GATEWAY_LISTEN=0.0.0.0:8484", "CONCH_WEB_ENABLED=false", "CONCH_MCP_SERVE_ENABLED=false"}, "", ""},
		{"cert without key", []string{"CONCH_WEB_TLS_CERT=" + pem}, "web.tls_cert", "both"},
		{"missing cert file", []string{"CONCH_WEB_TLS_CERT=/nonexistent.pem", "CONCH_WEB_TLS_KEY=" + pem}, "web.tls_cert", "PEM"},
		{"bad listen", []string{"CONCH_GATEWAY_LISTEN=8484"}, "gateway.listen", "127.0.0.1:8484"},
		{"zero login ttl", []string{"CONCH_WEB_LOGIN_TTL=0s"}, "web.login_ttl", "10m"},
		{"huge messages", []string{"CONCH_WEB_MAX_MESSAGE_BYTES=99999999"}, "web.max_message_bytes", "65536"},
		{"bad public url", []string{"CONCH_WEB_PUBLIC_URL=conch.example.org"}, "web.public_url", "https://"},
		{"metrics on the gateway port", []string{"CONCH_METRICS_LISTEN=127.0.0.1:8484"}, "metrics.listen", "another port"},
		{"pprof on loopback", []string{"CONCH_METRICS_LISTEN=127.0.0.1:9484", "CONCH_METRICS_PPROF=true"}, "", ""},
		{"pprof without metrics.listen", []string{"CONCH_METRICS_PPROF=true"}, "metrics.pprof", "127.0.0.1:9484"},
		{"pprof on all interfaces", []string{"CONCH_METRICS_LISTEN=0.0.0.0:9484", "CONCH_METRICS_PPROF=true"}, "metrics.pprof", "SSH tunnel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"HOME=" + dir, "CONCH_MODEL=m", "CONCH_MODEL_API_KEY=k"}, tc.env...)
			c, err := Load("", env)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if tc.key == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %v, want a problem with %s", err, tc.key)
			}
			for _, p := range ve.Problems {
				if p.Key == tc.key && strings.Contains(p.Fix, tc.fix) {
					return
				}
			}
			t.Fatalf("got %v, want %s with a fix mentioning %q", err, tc.key, tc.fix)
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "127.1.2.3:1": true,
		":1": false, "0.0.0.0:1": false, "192.168.1.2:1": false, "example.org:1": false, "garbage": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
