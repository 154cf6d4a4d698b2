package config

// MatrixConfig configures the Matrix channel. Owned by the Matrix channel's authors.
type MatrixConfig struct {
	Homeserver  string   `toml:"homeserver" env:"HOMESERVER"`
	UserID      string   `toml:"user_id" env:"USER_ID"`
	AccessToken string   `toml:"access_token" env:"ACCESS_TOKEN"`
	Password    string   `toml:"password" env:"PASSWORD"`
	AllowFrom   []string `toml:"allow_from" env:"ALLOW_FROM" envSeparator:","`
	// GroupPolicy is allow | deny for rooms with more than one other member.
	GroupPolicy          string `toml:"group_policy" env:"GROUP_POLICY"`
	MaxReconnectAttempts int    `toml:"max_reconnect_attempts" env:"MAX_RECONNECT_ATTEMPTS"`
}

// Enabled reports whether the Matrix channel is configured.
func (m MatrixConfig) Enabled() bool { return m.Homeserver != "" }

func (m MatrixConfig) validate() []Problem {
	if !m.Enabled() {
		return nil
	}
	var ps []Problem
	if m.UserID == "" {
		ps = append(ps, Problem{"matrix.user_id", "not set", "set CONCH_MATRIX_USER_ID or [matrix] user_id, e.g. @conch:example.org"})
	}
	if m.AccessToken == "" && m.Password == "" {
		ps = append(ps, Problem{"matrix.access_token", "neither access_token nor password is set", "set CONCH_MATRIX_ACCESS_TOKEN or CONCH_MATRIX_PASSWORD"})
	}
	switch m.GroupPolicy {
	case "allow", "deny":
	default:
		ps = append(ps, Problem{"matrix.group_policy", "unknown policy " + m.GroupPolicy, "use allow or deny"})
	}
	return ps
}
