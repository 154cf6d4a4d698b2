package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestEmailEnv(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load("", []string{
		"HOME=" + t.TempDir(),
		"XDG_CONFIG_HOME=" + t.TempDir(),
		"CONCH_EMAIL_ADDRESS=conch@example.org",
		"CONCH_EMAIL_IMAP_HOST=imap.example.org",
		"CONCH_EMAIL_IMAP_PASSWORD_FILE=" + pwFile,
		"CONCH_EMAIL_SMTP_HOST=smtp.example.org",
		"CONCH_EMAIL_SMTP_USERNAME=conch@example.org",
		"CONCH_EMAIL_SMTP_PASSWORD=smtp-pw",
		"CONCH_EMAIL_ALLOW_FROM=alice@example.org,@example.com",
		"CONCH_EMAIL_TRUSTED_AUTHSERV_ID=mx.example.org",
	})
	if err != nil {
		t.Fatal(err)
	}
	e := c.Email
	if err := e.LoadSecrets(); err != nil {
		t.Fatal(err)
	}
	if !e.Enabled() || e.IMAPPassword != "s3cret" || e.Username() != "conch@example.org" || e.SMTPPassword != "smtp-pw" {
		t.Errorf("got %+v, want the address, the password from its file and the username defaulting to the address", e)
	}
	if got, want := e.AllowFrom, []string{"alice@example.org", "@example.com"}; !reflect.DeepEqual(got, want) {
		t.Errorf("allow_from: got %q, want %q", got, want)
	}
	if e.IMAPPort != 993 || e.SMTPPort != 587 || e.TLS != "implicit" || e.SMTPMode() != "starttls" || e.Mailbox != "INBOX" || e.Session != "thread" || !e.IDLE {
		t.Errorf("defaults: got %+v", e)
	}
	if ps := e.validate(); len(ps) != 0 {
		t.Errorf("validate: got %v, want no problems", ps)
	}
	if (EmailConfig{}).Enabled() {
		t.Error("an empty [email] is enabled")
	}
}

func TestEmailValidate(t *testing.T) {
	base, err := Load("", []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	good := base.Email
	good.Address, good.IMAPHost, good.SMTPHost, good.IMAPPassword = "conch@example.org", "imap.example.org", "smtp.example.org", "pw"
	good.AllowFrom = []string{"alice@example.org"}
	if ps := good.validate(); len(ps) != 0 {
		t.Fatalf("good config: %v", ps)
	}
	tests := []struct {
		name string
		mod  func(*EmailConfig)
		key  string
	}{
		{"bad address", func(e *EmailConfig) { e.Address = "conch" }, "email.address"},
		{"no imap host", func(e *EmailConfig) { e.IMAPHost = "" }, "email.imap_host"},
		{"no smtp host", func(e *EmailConfig) { e.SMTPHost = "" }, "email.smtp_host"},
		{"bad port", func(e *EmailConfig) { e.SMTPPort = 70000 }, "email.smtp_port"},
		{"no password", func(e *EmailConfig) { e.IMAPPassword = "" }, "email.imap_password"},
		{"smtp user without password", func(e *EmailConfig) { e.SMTPUsername = "u" }, "email.smtp_password"},
		{"unknown tls", func(e *EmailConfig) { e.TLS = "maybe" }, "email.tls"},
		{"tls none to a remote host", func(e *EmailConfig) { e.TLS = "none" }, "email.tls"},
		{"smtp tls none to a remote host", func(e *EmailConfig) { e.SMTPTLS = "none" }, "email.smtp_tls"},
		{"empty allowlist", func(e *EmailConfig) { e.AllowFrom = nil }, "email.allow_from"},
		{"bad allow entry", func(e *EmailConfig) { e.AllowFrom = []string{"alice"} }, "email.allow_from"},
		{"bad session", func(e *EmailConfig) { e.Session = "room" }, "email.session"},
		{"bad authserv-id", func(e *EmailConfig) { e.TrustedAuthservID = "mx example" }, "email.trusted_authserv_id"},
		{"tiny idle refresh", func(e *EmailConfig) { e.IdleRefresh = Duration(1e9) }, "email.idle_refresh"},
		{"no rate", func(e *EmailConfig) { e.MaxPerHour = 0 }, "email.max_per_hour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := good
			e.AllowFrom = append([]string(nil), good.AllowFrom...)
			tt.mod(&e)
			ps := e.validate()
			found := false
			for _, p := range ps {
				if p.Key == tt.key && p.Fix != "" {
					found = true
				}
			}
			if !found {
				t.Errorf("got %v, want a problem with key %s and a fix", ps, tt.key)
			}
		})
	}
	loop := good
	loop.TLS, loop.IMAPHost, loop.SMTPHost = "none", "127.0.0.1", "localhost"
	if ps := loop.validate(); len(ps) != 0 {
		t.Errorf("tls none on loopback: got %v, want no problems", ps)
	}
	if !strings.Contains((&ValidationError{Problems: []Problem{{"email.tls", "m", "f"}}}).Error(), "email.tls: m (f)") {
		t.Error("validation error format")
	}
}
