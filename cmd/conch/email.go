package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"conch"
	"conch/channel/email"
	"conch/config"
	"conch/gateway"
)

// emailOptions maps [email] onto the channel's options.
func emailOptions(ec config.EmailConfig) email.Options {
	return email.Options{
		Address:            ec.Address,
		IMAPAddr:           net.JoinHostPort(ec.IMAPHost, strconv.Itoa(ec.IMAPPort)),
		IMAPUsername:       ec.Username(),
		IMAPPassword:       ec.IMAPPassword,
		IMAPTLS:            email.TLSMode(ec.TLS),
		SMTPAddr:           net.JoinHostPort(ec.SMTPHost, strconv.Itoa(ec.SMTPPort)),
		SMTPUsername:       ec.SMTPUsername,
		SMTPPassword:       ec.SMTPPassword,
		SMTPTLS:            email.TLSMode(ec.SMTPMode()),
		Mailbox:            ec.Mailbox,
		Session:            ec.Session,
		TrustedAuthservID:  ec.TrustedAuthservID,
		NoIDLE:             !ec.IDLE,
		IdleRefresh:        ec.IdleRefresh.D(),
		PollInterval:       ec.PollInterval.D(),
		MaxMessageBytes:    ec.MaxMessageBytes,
		MaxAttachmentBytes: ec.MaxAttachmentBytes,
		MaxPerHour:         ec.MaxPerHour,
		StartAttempts:      ec.StartAttempts,
	}
}

// emailChannel builds the email channel when [email] is configured.
func emailChannel(_ context.Context, _ *app, d *deps) (conch.Channel, gateway.Allowlist, error) {
	ec := d.cfg.Email
	if !ec.Enabled() {
		return nil, gateway.Allowlist{}, nil
	}
	if err := ec.LoadSecrets(); err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("email: %w", err)
	}
	if ec.TLS == "none" || ec.SMTPMode() == "none" {
		d.log.Warn("email: TLS is off (email.tls = none): only for a mail server on this machine")
	}
	opts := emailOptions(ec)
	opts.Cursors, opts.Sent, opts.Logger = d.db, d.db, d.log
	ch, err := email.New(opts)
	if err != nil {
		return nil, gateway.Allowlist{}, fmt.Errorf("email: %w", err)
	}
	// Admission applies the allowlist (addresses and @domain entries); the
	// channel asks it (Handler.Admits) before the sender's authentication
	// results, so a forged From is dropped before it is stored.
	return ch, gateway.NewAllowlist(ec.AllowFrom...), nil
}

// doctorEmail checks the IMAP login and mailbox, the SMTP login, and says
// where the channel stands in the mailbox.
func (a *app) doctorEmail(ctx context.Context, cfg *config.Config, check func(string, error, string)) {
	ec := cfg.Email
	if err := ec.LoadSecrets(); err != nil {
		check("email imap", err, "")
		return
	}
	if ec.TLS == "none" || ec.SMTPMode() == "none" {
		fmt.Fprintln(a.stdout, "! email tls: none — passwords and mail travel in clear; only for a test server on this machine")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := emailOptions(ec)
	opts.CommandTimeout = 15 * time.Second
	db, err := openDataStore(ctx, cfg.DataDir, io.Discard)
	if err == nil {
		defer db.Close()
		opts.Cursors, opts.Sent = db, db
	}
	info, err := email.CheckIMAP(ctx, opts)
	check("email imap", err, info)
	info, err = email.CheckSMTP(ctx, opts)
	check("email smtp", err, info)
	if db != nil {
		pos, _ := db.Cursor(ctx, "email:"+ec.Mailbox+":uid")
		if pos != "" {
			parts := strings.Split(pos, ":")
			if len(parts) == 3 {
				at, _ := strconv.ParseInt(parts[2], 10, 64)
				fmt.Fprintf(a.stdout, "- email cursor: UIDVALIDITY %s, last handled UID %s (moved %s)\n", parts[0], parts[1], time.Unix(at, 0).UTC().Format(time.RFC3339))
			}
		} else {
			fmt.Fprintln(a.stdout, "- email cursor: none yet (at its first start conch leaves mail already in the mailbox alone)")
		}
	}
}
