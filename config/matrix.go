package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// MatrixConfig configures the Matrix channel. Owned by the Matrix channel's authors.
//
// Secrets (access_token, password, pickle_key) may instead be given as files
// (access_token_file, password_file, pickle_key_file); LoadSecrets reads them.
type MatrixConfig struct {
	// DMPolicy is allowlist | pairing | open (see config/pairing.go).
	DMPolicy        string   `toml:"dm_policy" env:"DM_POLICY"`
	Homeserver      string   `toml:"homeserver" env:"HOMESERVER"`
	UserID          string   `toml:"user_id" env:"USER_ID"`
	AccessToken     string   `toml:"access_token" env:"ACCESS_TOKEN"`
	AccessTokenFile string   `toml:"access_token_file" env:"ACCESS_TOKEN_FILE"`
	Password        string   `toml:"password" env:"PASSWORD"`
	PasswordFile    string   `toml:"password_file" env:"PASSWORD_FILE"`
	AllowFrom       []string `toml:"allow_from" env:"ALLOW_FROM" envSeparator:","`
	// GroupPolicy is allow | deny for rooms with more than one other member.
	GroupPolicy          string `toml:"group_policy" env:"GROUP_POLICY"`
	MaxReconnectAttempts int    `toml:"max_reconnect_attempts" env:"MAX_RECONNECT_ATTEMPTS"`
	// MentionOnly makes the bot answer in group rooms only when mentioned.
	MentionOnly bool `toml:"mention_only" env:"MENTION_ONLY"`
	// DeviceID is the device a password login asks for the first time (later
	// logins reuse the stored one), or the device an access token must belong to.
	DeviceID string `toml:"device_id" env:"DEVICE_ID"`
	// Greeting is sent when the bot joins a room it was invited to ("" = built-in).
	Greeting string `toml:"greeting" env:"GREETING"`
	// PickleKey encrypts the Olm/Megolm keys at rest. Empty (and no
	// pickle_key_file) means: generated once and kept in the data dir as
	// matrix-pickle.key. Losing it makes the stored keys unreadable.
	PickleKey     string `toml:"pickle_key" env:"PICKLE_KEY"`
	PickleKeyFile string `toml:"pickle_key_file" env:"PICKLE_KEY_FILE"`
}

// Enabled reports whether the Matrix channel is configured.
func (m MatrixConfig) Enabled() bool { return m.Homeserver != "" }

// LoadSecrets fills AccessToken and Password from their _file settings when
// the value itself is not set. PickleKeyFile is read by the channel (it
// generates a key when none is configured).
func (m *MatrixConfig) LoadSecrets() error {
	read := func(key, path string, dst *string) error {
		if path == "" || *dst != "" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("matrix.%s: %w", key, err)
		}
		*dst = strings.TrimSpace(string(b))
		if *dst == "" {
			return fmt.Errorf("matrix.%s: %s is empty", key, path)
		}
		return nil
	}
	if err := read("access_token_file", m.AccessTokenFile, &m.AccessToken); err != nil {
		return err
	}
	return read("password_file", m.PasswordFile, &m.Password)
}

func validMatrixUserID(s string) bool {
	local, server, ok := strings.Cut(strings.TrimPrefix(s, "@"), ":")
	return strings.HasPrefix(s, "@") && ok && local != "" && server != "" && !strings.ContainsAny(s, " \t\n,")
}

func (m MatrixConfig) validate() []Problem {
	if !m.Enabled() {
		return nil
	}
	var ps []Problem
	if u, err := url.Parse(m.Homeserver); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps = append(ps, Problem{"matrix.homeserver", fmt.Sprintf("%q is not an http(s) URL", m.Homeserver), "use the client API base URL, e.g. https://matrix.example.org"})
	}
	switch {
	case m.UserID == "":
		ps = append(ps, Problem{"matrix.user_id", "not set", "set CONCH_MATRIX_USER_ID or [matrix] user_id, e.g. @conch:example.org"})
	case !validMatrixUserID(m.UserID):
		ps = append(ps, Problem{"matrix.user_id", fmt.Sprintf("%q is not a Matrix user id", m.UserID), "use the full id, e.g. @conch:example.org"})
	}
	if m.AccessToken == "" && m.AccessTokenFile == "" && m.Password == "" && m.PasswordFile == "" {
		ps = append(ps, Problem{"matrix.access_token", "neither access_token nor password is set", "set CONCH_MATRIX_ACCESS_TOKEN or CONCH_MATRIX_PASSWORD (or their _FILE variants)"})
	}
	if m.PickleKey != "" && m.PickleKeyFile != "" {
		ps = append(ps, Problem{"matrix.pickle_key", "both pickle_key and pickle_key_file are set", "keep one of them"})
	}
	ps = append(ps, validDMPolicy("matrix", m.DMPolicy)...)
	if len(m.AllowFrom) == 0 && (m.DMPolicy == "" || m.DMPolicy == DMAllowlist) {
		ps = append(ps, Problem{"matrix.allow_from", "empty: every message would be dropped", "list the Matrix user ids allowed to use the bot, e.g. CONCH_MATRIX_ALLOW_FROM=@alice:example.org,@bob:example.org (or * for everyone)"})
	}
	for _, a := range m.AllowFrom {
		if a != "*" && !validMatrixUserID(strings.TrimSpace(a)) {
			ps = append(ps, Problem{"matrix.allow_from", fmt.Sprintf("%q is not a Matrix user id", a), "use full ids such as @alice:example.org, or * for everyone"})
		}
	}
	switch m.GroupPolicy {
	case "allow", "deny":
	default:
		ps = append(ps, Problem{"matrix.group_policy", "unknown policy " + m.GroupPolicy, "use allow or deny"})
	}
	if m.MaxReconnectAttempts < 1 {
		ps = append(ps, Problem{"matrix.max_reconnect_attempts", "must be at least 1", "set a positive number, e.g. 5"})
	}
	if m.DeviceID != "" && strings.ContainsAny(m.DeviceID, " \t\n/") {
		ps = append(ps, Problem{"matrix.device_id", fmt.Sprintf("%q is not a device id", m.DeviceID), "leave it empty to let the homeserver choose"})
	}
	return ps
}
