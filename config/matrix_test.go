package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMatrixEnv(t *testing.T) {
	c, err := Load(filepath.Join(t.TempDir(), "missing-is-fine-only-when-implicit.toml"), nil)
	if err == nil {
		t.Fatalf("explicit missing file: got config %+v, want an error", c)
	}
	c, err = Load("", []string{
		"HOME=" + t.TempDir(),
		"XDG_CONFIG_HOME=" + t.TempDir(),
		"CONCH_MATRIX_HOMESERVER=https://matrix.example.org",
		"CONCH_MATRIX_USER_ID=@conch:example.org",
		"CONCH_MATRIX_PASSWORD=secret",
		"CONCH_MATRIX_ALLOW_FROM=@alice:example.org,@bob:example.org",
		"CONCH_MATRIX_MENTION_ONLY=true",
		"CONCH_MATRIX_DEVICE_ID=CONCHDEV",
		"CONCH_MATRIX_PICKLE_KEY=pk",
	})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Matrix
	if got, want := m.AllowFrom, []string{"@alice:example.org", "@bob:example.org"}; !reflect.DeepEqual(got, want) {
		t.Errorf("allow_from: got %q, want %q", got, want)
	}
	if !m.MentionOnly || m.DeviceID != "CONCHDEV" || m.PickleKey != "pk" || m.Password != "secret" {
		t.Errorf("got %+v, want mention_only, device_id, pickle_key and password from the environment", m)
	}
	if m.GroupPolicy != "allow" || m.MaxReconnectAttempts != 5 {
		t.Errorf("defaults: got group_policy %q max_reconnect_attempts %d, want allow and 5", m.GroupPolicy, m.MaxReconnectAttempts)
	}
	if ps := m.validate(); len(ps) != 0 {
		t.Errorf("validate: got %v, want no problems", ps)
	}
}

func TestMatrixValidate(t *testing.T) {
	good := MatrixConfig{
		Homeserver: "https://matrix.example.org", UserID: "@conch:example.org", AccessToken: "t",
		AllowFrom: []string{"@alice:example.org"}, GroupPolicy: "allow", MaxReconnectAttempts: 5,
	}
	tests := []struct {
		name    string
		change  func(*MatrixConfig)
		wantKey string // "" means valid
	}{
		{"good", func(*MatrixConfig) {}, ""},
		{"disabled is never checked", func(m *MatrixConfig) { *m = MatrixConfig{} }, ""},
		{"token from file", func(m *MatrixConfig) { m.AccessToken, m.AccessTokenFile = "", "/run/secrets/t" }, ""},
		{"everyone", func(m *MatrixConfig) { m.AllowFrom = []string{"*"} }, ""},
		{"bad homeserver", func(m *MatrixConfig) { m.Homeserver = "matrix.example.org" }, "matrix.homeserver"},
		{"no user", func(m *MatrixConfig) { m.UserID = "" }, "matrix.user_id"},
		{"bad user", func(m *MatrixConfig) { m.UserID = "conch" }, "matrix.user_id"},
		{"no secret", func(m *MatrixConfig) { m.AccessToken = "" }, "matrix.access_token"},
		{"empty allowlist", func(m *MatrixConfig) { m.AllowFrom = nil }, "matrix.allow_from"},
		{"bad allow entry", func(m *MatrixConfig) { m.AllowFrom = []string{"alice"} }, "matrix.allow_from"},
		{"bad policy", func(m *MatrixConfig) { m.GroupPolicy = "maybe" }, "matrix.group_policy"},
		{"no attempts", func(m *MatrixConfig) { m.MaxReconnectAttempts = 0 }, "matrix.max_reconnect_attempts"},
		{"two pickle keys", func(m *MatrixConfig) { m.PickleKey, m.PickleKeyFile = "a", "b" }, "matrix.pickle_key"},
		{"bad device", func(m *MatrixConfig) { m.DeviceID = "a b" }, "matrix.device_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good
			tt.change(&m)
			ps := m.validate()
			if tt.wantKey == "" {
				if len(ps) != 0 {
					t.Fatalf("got %v, want no problems", ps)
				}
				return
			}
			if len(ps) != 1 || ps[0].Key != tt.wantKey || ps[0].Fix == "" {
				t.Fatalf("got %v, want one problem for %s with a fix", ps, tt.wantKey)
			}
		})
	}
}

func TestMatrixLoadSecrets(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("syt_abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := MatrixConfig{AccessTokenFile: tok}
	if err := m.LoadSecrets(); err != nil {
		t.Fatal(err)
	}
	if m.AccessToken != "syt_abc" {
		t.Fatalf("access token: got %q, want %q", m.AccessToken, "syt_abc")
	}
	m = MatrixConfig{PasswordFile: filepath.Join(dir, "missing")}
	if err := m.LoadSecrets(); err == nil || !strings.Contains(err.Error(), "matrix.password_file") {
		t.Fatalf("missing password file: got %v, want an error naming matrix.password_file", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m = MatrixConfig{PasswordFile: empty}
	if err := m.LoadSecrets(); err == nil {
		t.Fatal("empty password file: got nil, want an error")
	}
}
