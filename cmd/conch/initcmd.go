package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"conch/channel/email"
	"conch/channel/matrix"
	"conch/channel/telegram"
	"conch/channel/web"
	"conch/config"
	"conch/sandbox/docker"
)

// initOptions are conch init's flags; an empty one is asked for on a
// terminal and left as it is (or as the config file has it) otherwise.
type initOptions struct {
	provider, model, baseURL string
	apiKeyStdin              bool
	engine                   string
	noImage                  bool
	telegramTokenFile        string
	telegramAllow            []string
	matrixHomeserver         string
	matrixUser               string
	matrixTokenFile          string
	matrixAllow              []string
	emailAddress             string
	emailIMAP, emailSMTP     string
	emailUser                string
	emailSMTPUser            string
	emailPasswordFile        string
	emailAllow               []string
	service, userService     bool
	nonInteractive           bool
}

// Files conch init keeps beside conch.toml, mode 0600.
const (
	modelKeyFile    = "model.key"
	telegramKeyFile = "telegram.token"
	matrixKeyFile   = "matrix.token"
	emailKeyFile    = "email.password"
)

var providers = []string{"openai", "anthropic", "gemini"}

func (a *app) initCmd() *cobra.Command {
	var o initOptions
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Set conch up: model and key, channels, container engine, sandbox image, conch.toml",
		Long: `Set conch up, or change its setup: asks for the model provider and key (the key is
checked by listing the provider's models and saved to model.key, mode 0600, beside
conch.toml — never echoed or logged), the model, the channels (the web chat always;
Telegram, Matrix and email checked live), finds the container engine (or says how to install one),
builds the sandbox image, writes conch.toml with comments, offers the systemd
service and prints the web chat's login link.

Run again, it edits conch.toml: only the keys it sets change; comments and every
other key stay. Without a terminal (or with --non-interactive) it asks nothing:
flags give the answers and the key comes on standard input (--api-key-stdin):

  printf '%s\n' "$OPENAI_API_KEY" | conch init --non-interactive \
      --provider openai --model gpt-5-mini --api-key-stdin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runInit(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.provider, "provider", "", "model provider: "+strings.Join(providers, ", "))
	f.StringVar(&o.model, "model", "", "model name (one the key lists)")
	f.StringVar(&o.baseURL, "base-url", "", "the provider's API base URL (a proxy or a compatible server)")
	f.BoolVar(&o.apiKeyStdin, "api-key-stdin", false, "read the API key from standard input's first line")
	f.StringVar(&o.engine, "engine", "", "container engine: auto, docker, podman or none (default: found)")
	f.BoolVar(&o.noImage, "no-image", false, "do not build the sandbox image now (conch up builds it when first needed)")
	f.StringVar(&o.telegramTokenFile, "telegram-token-file", "", "open Telegram with the bot token in this file (checked live)")
	f.StringSliceVar(&o.telegramAllow, "telegram-allow", nil, "Telegram user ids that may talk to conch, comma separated")
	f.StringVar(&o.matrixHomeserver, "matrix-homeserver", "", "open Matrix on this homeserver (with --matrix-user and --matrix-token-file; checked live)")
	f.StringVar(&o.matrixUser, "matrix-user", "", "the bot's Matrix user id, e.g. @conch:example.org")
	f.StringVar(&o.matrixTokenFile, "matrix-token-file", "", "a file with the bot's access token")
	f.StringSliceVar(&o.matrixAllow, "matrix-allow", nil, "Matrix user ids that may talk to conch, comma separated")
	f.StringVar(&o.emailAddress, "email-address", "", "open email for this address (with --email-imap, --email-smtp, --email-password-file; checked live)")
	f.StringVar(&o.emailIMAP, "email-imap", "", "IMAP server, host:port")
	f.StringVar(&o.emailSMTP, "email-smtp", "", "SMTP server, host:port")
	f.StringVar(&o.emailUser, "email-user", "", "login name on both servers (default: the address)")
	f.StringVar(&o.emailSMTPUser, "email-smtp-user", "", `SMTP login name when it differs from --email-user; "none": the SMTP server takes mail without a login`)
	f.StringVar(&o.emailPasswordFile, "email-password-file", "", "a file with the mailbox's password")
	f.StringSliceVar(&o.emailAllow, "email-allow", nil, "addresses (or @domains) that may write to conch, comma separated")
	f.BoolVar(&o.service, "service", false, "install and start the systemd service at the end")
	f.BoolVar(&o.userService, "user", false, "with --service: a unit of your own user (systemctl --user)")
	f.BoolVar(&o.nonInteractive, "non-interactive", false, "ask nothing, even on a terminal")
	return cmd
}

// initSession is one run of conch init.
type initSession struct {
	a           *app
	o           initOptions
	interactive bool
	in          *bufio.Reader
	stdinFD     int
	// done ends a question being waited for: ctrl-C while conch init asks
	// ends it (the terminal restored), instead of being ignored until Enter.
	done      <-chan struct{}
	path, dir string
	doc       *tomlDoc
	fresh     bool
}

func (a *app) runInit(ctx context.Context, o initOptions) error {
	s := &initSession{a: a, o: o, in: bufio.NewReader(a.stdin), stdinFD: -1, done: ctx.Done()}
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		s.stdinFD = int(f.Fd())
		s.interactive = !o.nonInteractive
	}
	if o.apiKeyStdin && s.interactive {
		return errors.New("--api-key-stdin reads a key from a pipe; on a terminal conch init asks for it (hidden)")
	}
	s.path = a.configPath
	if s.path == "" {
		s.path = config.DefaultPath()
	}
	s.dir = filepath.Dir(s.path)
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("config dir: %w", err)
	}
	text, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.fresh = true
		s.doc = parseTOMLDoc(initHeader)
	case err != nil:
		return fmt.Errorf("config file: %w", err)
	default:
		s.doc = parseTOMLDoc(string(text))
		s.say("Editing %s: only the keys conch init sets change.", s.path)
	}

	if err := s.model(ctx); err != nil {
		return err
	}
	if err := s.telegram(ctx); err != nil {
		return err
	}
	if err := s.matrix(ctx); err != nil {
		return err
	}
	if err := s.email(ctx); err != nil {
		return err
	}
	s.say("Slack and Discord: fill in their sections of %s (README), then `conch doctor` checks them live.", s.path)
	engineFound, err := s.engine(ctx)
	if err != nil {
		return err
	}
	if err := s.write(); err != nil {
		return err
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return fmt.Errorf("the written %s does not load: %w", s.path, err)
	}
	if engineFound && !s.o.noImage {
		if err := s.buildImage(ctx); err != nil {
			return err
		}
	}
	if err := s.service(ctx); err != nil {
		return err
	}
	return s.link(ctx, cfg)
}

// initHeader opens a conch.toml conch init writes.
const initHeader = `# conch.toml, written by conch init. Edit it freely: conch init run again
# changes only the keys it sets, and keeps comments and every other key.
# Every key and its default: config/default.toml in the source, or
# ` + "`conch config`" + ` for what is in force. CONCH_* variables override this file.
`

func (s *initSession) say(format string, args ...any) {
	fmt.Fprintf(s.a.stderr, format+"\n", args...)
}

// ask reads one line on a terminal; def is what Enter keeps.
func (s *initSession) ask(question, def string) (string, error) {
	if def != "" {
		fmt.Fprintf(s.a.stderr, "%s [%s]: ", question, def)
	} else {
		fmt.Fprintf(s.a.stderr, "%s: ", question)
	}
	line, err := s.readLine()
	if err != nil && line == "" {
		if errors.Is(err, errInterrupted) {
			return "", err
		}
		return "", fmt.Errorf("%s: no answer (%w)", question, err)
	}
	if line = strings.TrimSpace(line); line == "" {
		return def, nil
	}
	return line, nil
}

// errInterrupted: ctrl-C (or SIGTERM) while a question waited for its answer.
var errInterrupted = exitError{code: 130}

// readLine waits for one line of input, or for the run to be interrupted.
// The read itself cannot be interrupted; an interrupted run ends, and the
// read with it.
func (s *initSession) readLine() (string, error) {
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := s.in.ReadString('\n')
		got <- result{line, err}
	}()
	select {
	case r := <-got:
		return r.line, r.err
	case <-s.done:
		fmt.Fprintln(s.a.stderr)
		return "", errInterrupted
	}
}

// askSecret reads a line without echo; the answer is never printed. Echo
// goes off before the question shows, so a key typed or pasted the moment
// it does is not echoed either (turning it off after printing, as
// term.ReadPassword does, left a window in which the terminal echoed it).
func (s *initSession) askSecret(question string) (string, error) {
	restore, err := echoOff(s.stdinFD)
	if err != nil {
		return "", fmt.Errorf("read %s: turn the terminal's echo off: %w", question, err)
	}
	defer restore()
	fmt.Fprintf(s.a.stderr, "%s (input hidden): ", question)
	line, err := s.readLine()
	if errors.Is(err, errInterrupted) {
		return "", err
	}
	fmt.Fprintln(s.a.stderr)
	if err != nil && line == "" {
		return "", fmt.Errorf("read %s: %w", question, err)
	}
	return strings.TrimSpace(line), nil
}

func (s *initSession) yes(question string, def bool) (bool, error) {
	d := "y/N"
	if def {
		d = "Y/n"
	}
	ans, err := s.ask(question+" ("+d+")", "")
	if err != nil {
		return false, err
	}
	if ans == "" {
		return def, nil
	}
	return strings.HasPrefix(strings.ToLower(ans), "y"), nil
}

func (s *initSession) current(table, key string) string {
	raw, _ := s.doc.get(table, key)
	return unquote(raw)
}

// model settles the provider, the key (proved by listing the models) and the model.
func (s *initSession) model(ctx context.Context) error {
	m := config.ModelConfig{Provider: s.o.provider, BaseURL: s.o.baseURL}
	if m.Provider == "" {
		m.Provider = s.current("model", "provider")
	}
	if s.interactive {
		def := m.Provider
		if def == "" {
			def = "openai"
		}
		p, err := s.ask("Model provider ("+strings.Join(providers, ", ")+")", def)
		if err != nil {
			return err
		}
		m.Provider = p
	}
	if !slices.Contains(providers, m.Provider) {
		return fmt.Errorf("model provider %q: choose one of %s (--provider)", m.Provider, strings.Join(providers, ", "))
	}
	if m.BaseURL == "" {
		m.BaseURL = s.current("model", "base_url")
	}

	keyPath := s.current("model", "api_key_file")
	if keyPath == "" {
		keyPath = filepath.Join(s.dir, modelKeyFile)
	}
	saved, _ := os.ReadFile(keyPath)
	savedKey := strings.TrimSpace(string(saved))
	switch {
	case s.o.apiKeyStdin:
		line, err := s.in.ReadString('\n')
		if line = strings.TrimSpace(line); line == "" {
			return fmt.Errorf("--api-key-stdin: no key on standard input (%v)", err)
		}
		m.APIKey = line
	case s.interactive:
		q := "API key for " + m.Provider
		if savedKey != "" {
			q += " (Enter keeps the saved one)"
		}
		k, err := s.askSecret(q)
		if err != nil {
			return err
		}
		m.APIKey = k
	}
	if m.APIKey == "" {
		m.APIKey = savedKey
	}
	if m.APIKey == "" {
		return fmt.Errorf("no API key: give it on standard input with --api-key-stdin (or run conch init on a terminal); it is saved to %s, mode 0600", keyPath)
	}

	s.say("Checking the key: listing %s's models...", m.Provider)
	models, err := listModels(ctx, m)
	if err != nil {
		return err
	}
	if len(models) == 0 {
		return fmt.Errorf("%s lists no model for this key", m.Provider)
	}
	s.say("The key works: %d models.", len(models))
	name := s.o.model
	if name == "" {
		name = s.current("model", "name")
	}
	if s.interactive {
		show := models
		if len(show) > 40 {
			show = show[:40]
		}
		for i, id := range show {
			fmt.Fprintf(s.a.stderr, "  %2d. %s\n", i+1, id)
		}
		if len(models) > len(show) {
			fmt.Fprintf(s.a.stderr, "  ... and %d more (type a name)\n", len(models)-len(show))
		}
		def := name
		if def == "" {
			def = show[0]
		}
		ans, err := s.ask("Model (number or name)", def)
		if err != nil {
			return err
		}
		if n, err := strconv.Atoi(ans); err == nil && n >= 1 && n <= len(show) {
			ans = show[n-1]
		}
		name = ans
	}
	if name == "" {
		return fmt.Errorf("no model: pass --model, one of %s", sample(models))
	}
	if !slices.Contains(models, name) {
		return fmt.Errorf("model %q is not among the %d models this key lists (%s)", name, len(models), sample(models))
	}

	if err := writeSecret(keyPath, m.APIKey); err != nil {
		return err
	}
	s.doc.set("model", "provider", tomlString(m.Provider), "")
	s.doc.set("model", "name", tomlString(name), "")
	if m.BaseURL != "" {
		s.doc.set("model", "base_url", tomlString(m.BaseURL), "")
	}
	s.doc.set("model", "api_key_file", tomlString(keyPath), "")
	s.say("Model: %s/%s; key saved to %s (mode 0600).", m.Provider, name, keyPath)
	return nil
}

func sample(ids []string) string {
	if len(ids) > 8 {
		return strings.Join(ids[:8], ", ") + ", ..."
	}
	return strings.Join(ids, ", ")
}

// writeSecret writes a secret file, mode 0600, through a temporary file.
func writeSecret(path, secret string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil { // an old .tmp kept its mode
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// telegram opens the Telegram channel when asked, with its token checked live.
func (s *initSession) telegram(ctx context.Context) error {
	token := ""
	switch {
	case s.o.telegramTokenFile != "":
		b, err := os.ReadFile(s.o.telegramTokenFile)
		if err != nil {
			return fmt.Errorf("--telegram-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	case s.interactive:
		def := s.current("telegram", "bot_token_file") != ""
		open, err := s.yes("Open Telegram (a bot token from @BotFather)?", def)
		if err != nil || !open {
			return err
		}
		if token, err = s.askSecret("Telegram bot token (Enter keeps the saved one)"); err != nil {
			return err
		}
		if token == "" && def {
			b, _ := os.ReadFile(s.current("telegram", "bot_token_file"))
			token = strings.TrimSpace(string(b))
		}
	default:
		return nil
	}
	if token == "" {
		return errors.New("telegram: no bot token")
	}
	// The API URL as conch up will see it (config file, CONCH_TELEGRAM_API_URL, default).
	cfg, err := s.a.loadOperatorConfig()
	if err != nil {
		return err
	}
	apiURL := cfg.Telegram.APIURL
	name, err := telegram.CheckBot(ctx, apiURL, token)
	if err != nil {
		return fmt.Errorf("telegram: the bot token does not work: %w", err)
	}
	allow := s.o.telegramAllow
	if s.interactive && len(allow) == 0 {
		ans, err := s.ask("Telegram user ids that may talk to "+name+" (comma separated; message @userinfobot to learn yours)", strings.Trim(s.current("telegram", "allow_from"), "[]"))
		if err != nil {
			return err
		}
		for _, f := range strings.Split(ans, ",") {
			if f = strings.Trim(strings.TrimSpace(f), `"`); f != "" {
				allow = append(allow, f)
			}
		}
	}
	path := filepath.Join(s.dir, telegramKeyFile)
	if err := writeSecret(path, token); err != nil {
		return err
	}
	s.doc.set("telegram", "bot_token_file", tomlString(path), "")
	if len(allow) > 0 {
		s.doc.set("telegram", "allow_from", tomlStrings(allow), "")
	} else {
		s.say("Telegram: nobody may talk to the bot yet: add user ids to telegram.allow_from (or use dm_policy = \"pairing\").")
	}
	s.say("Telegram: %s works; token saved to %s (mode 0600).", name, path)
	return nil
}

// matrix opens the Matrix channel when asked, its login checked live.
func (s *initSession) matrix(ctx context.Context) error {
	hs, user, token, allow := s.o.matrixHomeserver, s.o.matrixUser, "", s.o.matrixAllow
	switch {
	case hs != "" || s.o.matrixTokenFile != "":
		if hs == "" || user == "" || s.o.matrixTokenFile == "" {
			return errors.New("matrix: --matrix-homeserver, --matrix-user and --matrix-token-file go together")
		}
		b, err := os.ReadFile(s.o.matrixTokenFile)
		if err != nil {
			return fmt.Errorf("--matrix-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	case s.interactive:
		had := s.current("matrix", "access_token_file") != ""
		open, err := s.yes("Open Matrix (a bot account's access token)?", had)
		if err != nil || !open {
			return err
		}
		if hs, err = s.ask("Homeserver URL", s.current("matrix", "homeserver")); err != nil {
			return err
		}
		if user, err = s.ask("The bot's user id (@name:server)", s.current("matrix", "user_id")); err != nil {
			return err
		}
		if token, err = s.askSecret("Its access token (Enter keeps the saved one)"); err != nil {
			return err
		}
		if token == "" && had {
			b, _ := os.ReadFile(s.current("matrix", "access_token_file"))
			token = strings.TrimSpace(string(b))
		}
		if len(allow) == 0 {
			ans, err := s.ask("Matrix user ids that may talk to conch (comma separated)", strings.Trim(s.current("matrix", "allow_from"), "[]"))
			if err != nil {
				return err
			}
			for _, f := range strings.Split(ans, ",") {
				if f = strings.Trim(strings.TrimSpace(f), `"`); f != "" {
					allow = append(allow, f)
				}
			}
		}
	default:
		return nil
	}
	if token == "" {
		return errors.New("matrix: no access token")
	}
	if err := matrix.CheckLogin(ctx, hs, user, token); err != nil {
		return fmt.Errorf("matrix: the login does not work: %w", err)
	}
	path := filepath.Join(s.dir, matrixKeyFile)
	if err := writeSecret(path, token); err != nil {
		return err
	}
	s.doc.set("matrix", "homeserver", tomlString(hs), "")
	s.doc.set("matrix", "user_id", tomlString(user), "")
	s.doc.set("matrix", "access_token_file", tomlString(path), "")
	if len(allow) > 0 {
		s.doc.set("matrix", "allow_from", tomlStrings(allow), "")
	} else {
		s.say("Matrix: nobody may talk to the bot yet: add user ids to matrix.allow_from.")
	}
	s.say("Matrix: %s at %s works; token saved to %s (mode 0600).", user, hs, path)
	return nil
}

// email opens the email channel when asked: IMAP and SMTP logins checked
// live, as conch doctor checks them.
func (s *initSession) email(ctx context.Context) error {
	cfg, err := s.a.loadOperatorConfig() // TLS modes and the rest as conch up will see them
	if err != nil {
		return err
	}
	ec := cfg.Email
	password := ""
	o := s.o
	switch {
	case o.emailAddress != "" || o.emailIMAP != "" || o.emailPasswordFile != "":
		if o.emailAddress == "" || o.emailIMAP == "" || o.emailSMTP == "" || o.emailPasswordFile == "" {
			return errors.New("email: --email-address, --email-imap, --email-smtp and --email-password-file go together")
		}
		b, err := os.ReadFile(o.emailPasswordFile)
		if err != nil {
			return fmt.Errorf("--email-password-file: %w", err)
		}
		password = strings.TrimSpace(string(b))
	case s.interactive:
		had := s.current("email", "imap_password_file") != ""
		open, err := s.yes("Open email (an IMAP and SMTP mailbox of its own)?", had)
		if err != nil || !open {
			return err
		}
		if o.emailAddress, err = s.ask("Its address", s.current("email", "address")); err != nil {
			return err
		}
		if o.emailIMAP, err = s.ask("IMAP server (host:port)", joinHostPort(s.current("email", "imap_host"), s.current("email", "imap_port"), "993")); err != nil {
			return err
		}
		if o.emailSMTP, err = s.ask("SMTP server (host:port)", joinHostPort(s.current("email", "smtp_host"), s.current("email", "smtp_port"), "587")); err != nil {
			return err
		}
		if o.emailUser, err = s.ask("Login name", orDefault(s.current("email", "imap_username"), o.emailAddress)); err != nil {
			return err
		}
		if password, err = s.askSecret("Password (Enter keeps the saved one)"); err != nil {
			return err
		}
		if password == "" && had {
			b, _ := os.ReadFile(s.current("email", "imap_password_file"))
			password = strings.TrimSpace(string(b))
		}
		if len(o.emailAllow) == 0 {
			ans, err := s.ask("Addresses or @domains that may write to conch (comma separated)", strings.Trim(s.current("email", "allow_from"), "[]"))
			if err != nil {
				return err
			}
			for _, f := range strings.Split(ans, ",") {
				if f = strings.Trim(strings.TrimSpace(f), `"`); f != "" {
					o.emailAllow = append(o.emailAllow, f)
				}
			}
		}
	default:
		return nil
	}
	if password == "" {
		return errors.New("email: no password")
	}
	imapHost, imapPort, err := splitPort(o.emailIMAP)
	if err != nil {
		return fmt.Errorf("email: IMAP server: %w", err)
	}
	smtpHost, smtpPort, err := splitPort(o.emailSMTP)
	if err != nil {
		return fmt.Errorf("email: SMTP server: %w", err)
	}
	ec.Address, ec.IMAPHost, ec.IMAPPort, ec.SMTPHost, ec.SMTPPort = o.emailAddress, imapHost, imapPort, smtpHost, smtpPort
	smtpUser := orDefault(o.emailSMTPUser, o.emailUser)
	ec.IMAPUsername, ec.SMTPUsername = o.emailUser, smtpUser
	ec.IMAPPassword, ec.SMTPPassword = password, password
	if smtpUser == "none" {
		ec.SMTPUsername, ec.SMTPPassword = "", ""
	}
	opts := emailOptions(ec)
	opts.CommandTimeout = 15 * time.Second
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := email.CheckIMAP(cctx, opts); err != nil {
		return fmt.Errorf("email: the IMAP login does not work: %w", err)
	}
	if _, err := email.CheckSMTP(cctx, opts); err != nil {
		return fmt.Errorf("email: the SMTP login does not work: %w", err)
	}
	path := filepath.Join(s.dir, emailKeyFile)
	if err := writeSecret(path, password); err != nil {
		return err
	}
	s.doc.set("email", "address", tomlString(ec.Address), "")
	s.doc.set("email", "imap_host", tomlString(imapHost), "")
	s.doc.set("email", "imap_port", strconv.Itoa(imapPort), "")
	s.doc.set("email", "smtp_host", tomlString(smtpHost), "")
	s.doc.set("email", "smtp_port", strconv.Itoa(smtpPort), "")
	if o.emailUser != "" {
		s.doc.set("email", "imap_username", tomlString(o.emailUser), "")
	}
	s.doc.set("email", "imap_password_file", tomlString(path), "")
	if smtpUser != "none" {
		if smtpUser != "" {
			s.doc.set("email", "smtp_username", tomlString(smtpUser), "")
		}
		s.doc.set("email", "smtp_password_file", tomlString(path), "")
	}
	if len(o.emailAllow) > 0 {
		s.doc.set("email", "allow_from", tomlStrings(o.emailAllow), "")
	} else {
		s.say("Email: nobody may write to conch yet: add addresses to email.allow_from.")
	}
	s.say("Email: %s works (IMAP %s, SMTP %s); password saved to %s (mode 0600).", ec.Address, o.emailIMAP, o.emailSMTP, path)
	return nil
}

func joinHostPort(host, port, def string) string {
	if host == "" {
		return ""
	}
	return host + ":" + orDefault(port, def)
}

func splitPort(hostPort string) (string, int, error) {
	i := strings.LastIndex(hostPort, ":")
	if i <= 0 {
		return "", 0, fmt.Errorf("%q: want host:port", hostPort)
	}
	port, err := strconv.Atoi(hostPort[i+1:])
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: want host:port", hostPort)
	}
	return hostPort[:i], port, nil
}

// engine finds the container engine, or says how to get one. It reports
// whether one answered.
func (s *initSession) engine(ctx context.Context) (bool, error) {
	engine := s.o.engine
	if engine == "" {
		engine = s.current("sandbox", "engine")
	}
	if engine == "" {
		engine = "auto"
	}
	if engine == "none" {
		s.doc.set("sandbox", "engine", tomlString("none"), "")
		s.say("Container engine: none (no sandboxes: the model gets no computer).")
		return false, nil
	}
	host := s.current("sandbox", "host")
	if cfg, err := s.a.loadOperatorConfig(); err == nil && cfg.Sandbox.Host != "" {
		host = cfg.Sandbox.Host // CONCH_SANDBOX_HOST, as conch up will see it
	}
	host, err := docker.DetectHost(host, engine, os.Getenv)
	var info docker.Info
	if err == nil {
		info, err = docker.Probe(ctx, host, engine)
	}
	if err != nil {
		s.say("No container engine answered (%v).\n"+
			"Every conversation's computer is a container: install Docker or Podman, e.g. on Debian or Ubuntu\n"+
			"  sudo apt-get install docker.io && sudo usermod -aG docker $USER   (log in again)\n"+
			"  or: sudo apt-get install podman && systemctl --user enable --now podman.socket\n"+
			"then run conch init again. Until then conch runs without sandboxes.", err)
		if s.interactive {
			ok, err := s.yes("Continue without a container engine?", true)
			if err != nil {
				return false, err
			}
			if !ok {
				return false, errors.New("stopped: install a container engine and run conch init again")
			}
		}
		s.doc.set("sandbox", "engine", tomlString("none"), "")
		return false, nil
	}
	s.doc.set("sandbox", "engine", tomlString(engine), "")
	s.say("Container engine: %s %s at %s.", info.Engine, info.Version, info.Host)
	return true, nil
}

// write saves conch.toml through a temporary file.
func (s *initSession) write() error {
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s.doc.String()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	if s.fresh {
		s.say("Wrote %s.", s.path)
	} else {
		s.say("Updated %s.", s.path)
	}
	return nil
}

// buildImage builds the sandbox image when it is missing or outdated, one
// line per step with the time so far.
func (s *initSession) buildImage(ctx context.Context) error {
	s.say("Checking the sandbox image (a first build downloads Debian packages: a minute or two)...")
	start := time.Now()
	skipped := false
	err := s.a.withRuntime(ctx, func(ctx context.Context, d *deps) error {
		rt, ok := d.runtime.(*docker.Runtime)
		if !ok {
			// Kubernetes nodes start images the operator pushed
			// (docs/kubernetes.md): nothing to build on this machine.
			skipped = true
			return nil
		}
		// Built when missing or from an older definition; a current one is kept.
		_, err := rt.EnsureImage(ctx, func(line string) {
			fmt.Fprintf(s.a.stderr, "  [%5.1fs] %s\n", time.Since(start).Seconds(), line)
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("sandbox image: %w (conch sandbox image build tries again)", err)
	}
	if skipped {
		s.say("Sandbox images come from your cluster's registry on Kubernetes (docs/kubernetes.md): nothing to build here.")
		return nil
	}
	s.say("Sandbox image ready in %s.", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// service installs the systemd service when asked.
func (s *initSession) service(ctx context.Context) error {
	install := s.o.service
	if s.interactive && !install {
		var err error
		if install, err = s.yes("Install conch as a systemd service (starts now and at boot)?", false); err != nil {
			return err
		}
	}
	if !install {
		s.say("Start conch with `conch up` (or later: conch service install).")
		return nil
	}
	sc := &serviceCmds{a: s.a, systemctl: execSystemctl, where: unitPath, userUnit: s.o.userService}
	return sc.install(ctx, false, "")
}

// link prints the web chat's login link.
func (s *initSession) link(ctx context.Context, cfg *config.Config) error {
	if err := webAvailable(cfg); err != nil {
		s.say("Web chat: %v", err)
		return nil
	}
	d, err := s.a.build(ctx, cfg, io.Discard)
	if err != nil {
		return err
	}
	defer d.Close()
	link, err := loginLink(ctx, cfg, web.NewAuth(d.db, d.db, cfg.Web.LoginTTL.D(), cfg.Web.SessionTTL.D(), nil), false)
	if err != nil {
		return err
	}
	s.say("Done. When conch is up, open the web chat (the link works once, for %s; `conch web url` prints another):", cfg.Web.LoginTTL.D())
	fmt.Fprintln(s.a.stdout, link)
	return nil
}
