package config

import (
	"errors"
	"strings"
	"testing"
)

// [mcp.serve]: on by default with tokens that last until revoked; a
// negative token_ttl, or the route on a non-loopback plain-HTTP listener
// (TLS comes with the web chat), is a problem naming the key.
func TestMCPServeConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		key  string // "" = valid
	}{
		{"defaults", nil, ""},
		{"negative ttl", []string{"CONCH_MCP_SERVE_TOKEN_TTL=-1h"}, "mcp.serve.token_ttl"},
		{"web off, all interfaces", []string{"CONCH_GATEWAY_LISTEN=0.0.0.0:8484", "CONCH_WEB_ENABLED=false"}, "gateway.listen"},
		{"web off, all interfaces, insecure allowed", []string{"CONCH_GATEWAY_LISTEN=0.0.0.0:8484", "CONCH_WEB_ENABLED=false", "CONCH_WEB_ALLOW_INSECURE=true"}, ""},
		{"web off, loopback", []string{"CONCH_WEB_ENABLED=false"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"HOME=" + t.TempDir(), "CONCH_MODEL=m", "CONCH_MODEL_API_KEY=k"}, tc.env...)
			c, err := Load("", env)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "defaults" && (!c.MCP.Serve.Enabled || c.MCP.Serve.TokenTTL.D() != 0) {
				t.Errorf("defaults: got %+v, want enabled with tokens until revoked", c.MCP.Serve)
			}
			err = c.Validate()
			var ve *ValidationError
			switch {
			case tc.key == "" && err != nil:
				t.Fatalf("got %v, want valid", err)
			case tc.key != "" && (!errors.As(err, &ve) || !strings.Contains(err.Error(), tc.key)):
				t.Fatalf("got %v, want a problem with %s", err, tc.key)
			}
		})
	}
}
