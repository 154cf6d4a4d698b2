package config

import (
	"fmt"
	"net"
	"net/mail"
	"os"
	"strings"
)

// EmailConfig configures the email channel (IMAP in, SMTP out).
//
// Secrets (imap_password, smtp_password) may instead be given as files
// (imap_password_file, smtp_password_file); LoadSecrets reads them.
type EmailConfig struct {
	// Address is conch's own address: the From of replies, the domain of
	// their Message-IDs, and a sender whose mail is never answered.
	Address string `toml:"address" env:"ADDRESS"`

	IMAPHost string `toml:"imap_host" env:"IMAP_HOST"`
	IMAPPort int    `toml:"imap_port" env:"IMAP_PORT"`
	// IMAPUsername defaults to Address.
	IMAPUsername     string `toml:"imap_username" env:"IMAP_USERNAME"`
	IMAPPassword     string `toml:"imap_password" env:"IMAP_PASSWORD"`
	IMAPPasswordFile string `toml:"imap_password_file" env:"IMAP_PASSWORD_FILE"`

	SMTPHost string `toml:"smtp_host" env:"SMTP_HOST"`
	SMTPPort int    `toml:"smtp_port" env:"SMTP_PORT"`
	// SMTPUsername empty means no AUTH (a relay that trusts the host).
	SMTPUsername     string `toml:"smtp_username" env:"SMTP_USERNAME"`
	SMTPPassword     string `toml:"smtp_password" env:"SMTP_PASSWORD"`
	SMTPPasswordFile string `toml:"smtp_password_file" env:"SMTP_PASSWORD_FILE"`

	// TLS is implicit | starttls | none for IMAP. SMTP follows it: implicit
	// TLS on port 465, STARTTLS on any other port, none when TLS is none;
	// SMTPTLS overrides that. none is only accepted for loopback hosts.
	TLS     string `toml:"tls" env:"TLS"`
	SMTPTLS string `toml:"smtp_tls" env:"SMTP_TLS"`

	// Mailbox is the IMAP folder watched for new mail.
	Mailbox string `toml:"mailbox" env:"MAILBOX"`
	// AllowFrom lists addresses and @domain entries whose mail is answered;
	// "*" allows everyone.
	AllowFrom []string `toml:"allow_from" env:"ALLOW_FROM" envSeparator:","`
	// Session is thread (one conversation per mail thread) or sender (one per person).
	Session string `toml:"session" env:"SESSION"`
	// TrustedAuthservID, when set, makes the channel require a DMARC pass
	// (or an aligned DKIM/SPF pass) in that server's Authentication-Results.
	TrustedAuthservID string `toml:"trusted_authserv_id" env:"TRUSTED_AUTHSERV_ID"`

	// IDLE uses IMAP IDLE when the server has it; false always polls.
	IDLE bool `toml:"idle" env:"IDLE"`
	// IdleRefresh re-issues IDLE (and checks the connection) this often.
	IdleRefresh Duration `toml:"idle_refresh" env:"IDLE_REFRESH"`
	// PollInterval is the polling period without IDLE.
	PollInterval Duration `toml:"poll_interval" env:"POLL_INTERVAL"`
	// MaxMessageBytes: larger mails are not downloaded; the sender is told.
	MaxMessageBytes int64 `toml:"max_message_bytes" env:"MAX_MESSAGE_BYTES"`
	// MaxAttachmentBytes caps one received file.
	MaxAttachmentBytes int64 `toml:"max_attachment_bytes" env:"MAX_ATTACHMENT_BYTES"`
	// MaxPerHour caps the mails per sender handled (and so answered) in an hour.
	MaxPerHour int `toml:"max_per_hour" env:"MAX_PER_HOUR"`
	// StartAttempts is how many failed connections in a row at start end
	// conch (a wrong host or password); once connected, it retries forever.
	StartAttempts int `toml:"start_attempts" env:"START_ATTEMPTS"`
}

// Enabled reports whether the email channel is configured.
func (e EmailConfig) Enabled() bool { return e.Address != "" || e.IMAPHost != "" }

// Username returns the IMAP login name.
func (e EmailConfig) Username() string {
	if e.IMAPUsername != "" {
		return e.IMAPUsername
	}
	return e.Address
}

// SMTPMode returns the TLS mode of the SMTP connection.
func (e EmailConfig) SMTPMode() string {
	switch {
	case e.SMTPTLS != "":
		return e.SMTPTLS
	case e.TLS == "none":
		return "none"
	case e.SMTPPort == 465:
		return "implicit"
	}
	return "starttls"
}

// LoadSecrets fills the passwords from their _file settings when the value
// itself is not set.
func (e *EmailConfig) LoadSecrets() error {
	read := func(key, path string, dst *string) error {
		if path == "" || *dst != "" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("email.%s: %w", key, err)
		}
		*dst = strings.TrimSpace(string(b))
		if *dst == "" {
			return fmt.Errorf("email.%s: %s is empty", key, path)
		}
		return nil
	}
	if err := read("imap_password_file", e.IMAPPasswordFile, &e.IMAPPassword); err != nil {
		return err
	}
	return read("smtp_password_file", e.SMTPPasswordFile, &e.SMTPPassword)
}

// IsLoopbackHost reports whether host is localhost or a loopback address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ValidAllowEntry reports whether s is an address, an @domain or "*".
func ValidAllowEntry(s string) bool {
	s = strings.TrimSpace(s)
	if s == "*" {
		return true
	}
	if dom, ok := strings.CutPrefix(s, "@"); ok {
		return dom != "" && strings.Contains(dom, ".") && !strings.ContainsAny(dom, "@ \t<>,")
	}
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s
}

func (e EmailConfig) validate() []Problem {
	if !e.Enabled() {
		return nil
	}
	var ps []Problem
	add := func(key, msg, fix string) { ps = append(ps, Problem{key, msg, fix}) }
	if a, err := mail.ParseAddress(e.Address); e.Address == "" || err != nil || a.Address != e.Address || !strings.Contains(a.Address, "@") {
		add("email.address", fmt.Sprintf("%q is not an email address", e.Address), "set CONCH_EMAIL_ADDRESS or [email] address to conch's own address, e.g. conch@example.org")
	}
	if e.IMAPHost == "" {
		add("email.imap_host", "not set", "set CONCH_EMAIL_IMAP_HOST, e.g. imap.fastmail.com")
	}
	if e.SMTPHost == "" {
		add("email.smtp_host", "not set", "set CONCH_EMAIL_SMTP_HOST, e.g. smtp.fastmail.com")
	}
	for key, port := range map[string]int{"email.imap_port": e.IMAPPort, "email.smtp_port": e.SMTPPort} {
		if port < 1 || port > 65535 {
			add(key, fmt.Sprintf("%d is not a TCP port", port), "use 993 for IMAP and 587 (or 465) for SMTP")
		}
	}
	if e.IMAPPassword == "" && e.IMAPPasswordFile == "" {
		add("email.imap_password", "not set", "set CONCH_EMAIL_IMAP_PASSWORD or [email] imap_password_file (an app password for providers with two-factor login)")
	}
	if e.SMTPUsername != "" && e.SMTPPassword == "" && e.SMTPPasswordFile == "" {
		add("email.smtp_password", "smtp_username is set but no password", "set CONCH_EMAIL_SMTP_PASSWORD or [email] smtp_password_file, or clear smtp_username for a relay without AUTH")
	}
	for _, m := range []struct{ key, v string }{{"email.tls", e.TLS}, {"email.smtp_tls", e.SMTPTLS}} {
		switch m.v {
		case "implicit", "starttls", "none":
		case "":
			if m.key == "email.tls" {
				add(m.key, "not set", "use implicit (port 993), starttls (port 143) or none (loopback test servers only)")
			}
		default:
			add(m.key, fmt.Sprintf("unknown mode %q", m.v), "use implicit, starttls or none")
		}
	}
	if e.TLS == "none" && e.IMAPHost != "" && !IsLoopbackHost(e.IMAPHost) {
		add("email.tls", "none sends the password in clear to "+e.IMAPHost, "use implicit or starttls; none is only for a test server on 127.0.0.1")
	}
	if e.SMTPMode() == "none" && e.SMTPHost != "" && !IsLoopbackHost(e.SMTPHost) {
		add("email.smtp_tls", "none sends mail in clear to "+e.SMTPHost, "use implicit or starttls; none is only for a test server on 127.0.0.1")
	}
	if strings.TrimSpace(e.Mailbox) == "" {
		add("email.mailbox", "empty", "use INBOX or the folder conch should watch")
	}
	if len(e.AllowFrom) == 0 {
		add("email.allow_from", "empty: every mail would be dropped", "list allowed senders, e.g. CONCH_EMAIL_ALLOW_FROM=alice@example.org,@example.com (or * for everyone)")
	}
	for _, a := range e.AllowFrom {
		if !ValidAllowEntry(a) {
			add("email.allow_from", fmt.Sprintf("%q is not an address or @domain", a), "use alice@example.org, @example.org or *")
		}
	}
	switch e.Session {
	case "thread", "sender":
	default:
		add("email.session", fmt.Sprintf("unknown session mode %q", e.Session), "use thread (one conversation per mail thread) or sender (one per person)")
	}
	if strings.ContainsAny(e.TrustedAuthservID, " \t;") {
		add("email.trusted_authserv_id", fmt.Sprintf("%q is not an authserv-id", e.TrustedAuthservID), "use the host name your provider writes first in Authentication-Results, e.g. mx.example.org")
	}
	if e.IdleRefresh.D() < 10e9 {
		add("email.idle_refresh", "shorter than 10s", "use e.g. 10m (servers drop IDLE after 29 minutes at the earliest)")
	}
	if e.PollInterval.D() < 1e9 {
		add("email.poll_interval", "shorter than 1s", "use e.g. 30s")
	}
	if e.MaxMessageBytes < 1<<10 {
		add("email.max_message_bytes", "too small", "use e.g. 41943040 (40 MiB)")
	}
	if e.MaxAttachmentBytes < 1 {
		add("email.max_attachment_bytes", "must be positive", "use e.g. 26214400 (25 MiB)")
	}
	if e.MaxPerHour < 1 {
		add("email.max_per_hour", "must be at least 1", "use e.g. 30")
	}
	if e.StartAttempts < 1 {
		add("email.start_attempts", "must be at least 1", "use e.g. 5")
	}
	return ps
}
