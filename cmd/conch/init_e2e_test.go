package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"conch/config"
	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/homeserver"
	testmail "conch/internal/testenv/mail"
	tgfake "conch/internal/testenv/telegram"
)

// conchRunStdin runs conch with stdin and waits for it, 3 minutes at most.
func conchRunStdin(t *testing.T, env []string, args, stdin string) (stdout, stderr string, code int) {
	t.Helper()
	return conchRunStdinWithin(t, env, args, stdin, 3*time.Minute)
}

func conchRunStdinWithin(t *testing.T, env []string, args, stdin string, wait time.Duration) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(env, "CONCH_TEST_ARGS="+args)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("conch %s: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// initEnv is a shell with nothing of conch set but where its config and
// data go: all conch init writes must come from conch init.
func initEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONCH_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "CONCH_TEST_AS_MAIN=1",
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"CONCH_DATA_DIR="+filepath.Join(dir, "data"))
}

// TestInitNonInteractive: conch init with flags and the key on stdin proves
// the key by listing the models, saves it 0600 and never shows it, writes a
// conch.toml that `conch up` runs from with nothing else set (the web chat
// answers through the model), and run again edits the file: the user's
// comments and keys stay, the changed key changes, the saved key is kept.
// A wrong key, an unknown model and a missing key are refused clearly.
func TestInitNonInteractive(t *testing.T) {
	const key = "sk-init-secret-0123456789"
	srv := fakellm.New(t)
	srv.RequireKey(key)
	dir := t.TempDir()
	env := initEnv(dir)
	base := srv.BaseURL(fakellm.OpenAI)
	args := "init --non-interactive --provider openai --base-url " + base + " --engine none --api-key-stdin"

	// Refusals first: nothing is written.
	_, errOut, code := conchRunStdin(t, env, args+" --model test-model", "sk-wrong\n")
	if code == 0 || !strings.Contains(errOut, "API key was refused") || strings.Contains(errOut, "sk-wrong") {
		t.Fatalf("wrong key: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = conchRunStdin(t, env, args+" --model no-such-model", key+"\n")
	if code == 0 || !strings.Contains(errOut, `model "no-such-model" is not among the 2 models`) || !strings.Contains(errOut, "test-model-mini") {
		t.Fatalf("unknown model: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = conchRunStdin(t, env, "init --non-interactive --provider openai --model test-model --engine none --base-url "+base, "")
	if code == 0 || !strings.Contains(errOut, "no API key: give it on standard input with --api-key-stdin") {
		t.Fatalf("no key: exit %d, stderr %q", code, errOut)
	}
	cfgPath := filepath.Join(dir, "config", "conch", "conch.toml")
	if _, err := os.Stat(cfgPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused init wrote %s: %v", cfgPath, err)
	}

	out, errOut, code := conchRunStdin(t, env, args+" --model test-model", key+"\n")
	if code != 0 {
		t.Fatalf("conch init: exit %d\n%s\n%s", code, out, errOut)
	}
	link := strings.TrimSpace(out)
	if !strings.Contains(link, "/login?token=") || !strings.Contains(errOut, "The key works: 2 models.") {
		t.Fatalf("conch init: stdout %q, stderr %q", out, errOut)
	}
	keyPath := filepath.Join(dir, "config", "conch", modelKeyFile)
	st, err := os.Stat(keyPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	if b, _ := os.ReadFile(keyPath); strings.TrimSpace(string(b)) != key {
		t.Fatal("the key file does not hold the key")
	}
	toml, _ := os.ReadFile(cfgPath)
	for _, want := range []string{"# conch.toml, written by conch init", `provider = "openai"`, `name = "test-model"`, `api_key_file = "` + keyPath + `"`, `engine = "none"`} {
		if !strings.Contains(string(toml), want) {
			t.Errorf("conch.toml lacks %q:\n%s", want, toml)
		}
	}

	// The user edits the file; conch init run again keeps the edits.
	edited := strings.Replace(string(toml), "[model]", "# my own note about the model\n[model]\ntimeout = \"90s\" # slow proxy", 1) +
		"\n[budget]\n# mine too\ndaily_usd = 5\n"
	if err := os.WriteFile(cfgPath, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = conchRunStdin(t, env, "init --non-interactive --model test-model-mini", "")
	if code != 0 {
		t.Fatalf("conch init again: exit %d\n%s\n%s", code, out, errOut)
	}
	toml, _ = os.ReadFile(cfgPath)
	for _, want := range []string{"# my own note about the model", `timeout = "90s" # slow proxy`, "# mine too", "daily_usd = 5", `name = "test-model-mini"`, `base_url = "` + base + `"`} {
		if !strings.Contains(string(toml), want) {
			t.Errorf("conch init again lost %q:\n%s", want, toml)
		}
	}
	if strings.Contains(string(toml), `name = "test-model"`+"\n") || strings.Count(string(toml), "name = ") != 1 {
		t.Errorf("model name not replaced in place:\n%s", toml)
	}
	cfg, err := config.Load(cfgPath, nil)
	if err != nil || cfg.Model.Name != "test-model-mini" || cfg.Budget.DailyUSD != 5 {
		t.Fatalf("the edited file: %+v %v", cfg, err)
	}

	// conch up runs from what init wrote alone, and the web chat answers.
	for _, out := range []string{out, errOut, string(toml)} {
		if strings.Contains(out, key) {
			t.Fatal("the key was shown or written into conch.toml")
		}
	}
	addr := freeAddr(t)
	upEnv := append(env, "CONCH_GATEWAY_LISTEN="+addr)
	srv.Push(fakellm.Text("hello from the model init chose"))
	p := startConch(t, upEnv, "up")
	p.waitStderr(t, "conch is up")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := webLogin(t, upEnv, "http://"+addr)
	conn := c.socket(t, ctx, c.newConversation(t))
	if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"send","id":"m1","text":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	if _, answers, _ := readAnswers(t, ctx, conn, 1); len(answers) != 1 {
		t.Fatalf("answers: %v", answers)
	} else {
		for _, a := range answers {
			if len(a) != 1 || a[0] != "hello from the model init chose" {
				t.Fatalf("answer: %q", a)
			}
		}
	}
	req, ok := srv.Last()
	if !ok || req.APIKey != key || req.Model != "test-model-mini" {
		t.Fatalf("the model call: %+v", req)
	}
	p.stop(t)
	logs, _ := os.ReadFile(filepath.Join(dir, "data", "logs", "conch.log"))
	if strings.Contains(string(logs), key) {
		t.Fatal("the key is in conch's log")
	}
}

// stop ends conch up with SIGTERM and waits for a clean exit.
func (p *conchProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("conch exited with %v after SIGTERM; stderr:\n%s", err, p.stderr)
	}
}

// TestInitTelegram: conch init opens Telegram with a token checked live
// against the Bot API (the wire-exact fake), saves it 0600 beside the config
// and writes the allowlist; a token the Bot API refuses is refused.
func TestInitTelegram(t *testing.T) {
	const key = "sk-tg"
	srv := fakellm.New(t)
	tg := tgfake.Start(t)
	dir := t.TempDir()
	env := append(initEnv(dir), "CONCH_TELEGRAM_API_URL="+tg.URL)
	good := filepath.Join(dir, "token")
	bad := filepath.Join(dir, "bad-token")
	os.WriteFile(good, []byte(tg.Token+"\n"), 0o600)
	os.WriteFile(bad, []byte("123:not-the-token\n"), 0o600)
	args := "init --non-interactive --provider openai --model test-model --engine none --api-key-stdin --base-url " + srv.BaseURL(fakellm.OpenAI)

	_, errOut, code := conchRunStdin(t, env, args+" --telegram-token-file "+bad, key+"\n")
	if code == 0 || !strings.Contains(errOut, "telegram: the bot token does not work") || strings.Contains(errOut, "not-the-token") {
		t.Fatalf("bad token: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code := conchRunStdin(t, env, args+" --telegram-token-file "+good+" --telegram-allow 4242,777", key+"\n")
	if code != 0 || !strings.Contains(errOut, "Telegram: ") || strings.Contains(out+errOut, tg.Token) {
		t.Fatalf("conch init with Telegram: exit %d\n%s\n%s", code, out, errOut)
	}
	saved := filepath.Join(dir, "config", "conch", telegramKeyFile)
	if st, err := os.Stat(saved); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	cfg, err := config.Load(filepath.Join(dir, "config", "conch", "conch.toml"), nil)
	if err != nil || cfg.Telegram.BotTokenFile != saved || strings.Join(cfg.Telegram.AllowFrom, ",") != "4242,777" {
		t.Fatalf("config: %+v %v", cfg.Telegram, err)
	}
}

// TestInitMatrix: conch init opens Matrix with a login checked live against
// a real homeserver (dendrite): the token is saved 0600, the config names
// it; a token of another account is refused.
func TestInitMatrix(t *testing.T) {
	testenv.Short(t)
	hs := homeserver.Start(t)
	botID, botToken, _ := hs.Register(t, "conch")
	_, otherToken, _ := hs.Register(t, "other")
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := initEnv(dir)
	good := filepath.Join(dir, "token")
	other := filepath.Join(dir, "other-token")
	os.WriteFile(good, []byte(botToken+"\n"), 0o600)
	os.WriteFile(other, []byte(otherToken+"\n"), 0o600)
	args := "init --non-interactive --provider openai --model test-model --engine none --api-key-stdin --base-url " + srv.BaseURL(fakellm.OpenAI) +
		" --matrix-homeserver " + hs.URL + " --matrix-user " + string(botID) + " --matrix-allow @alice:localhost --matrix-token-file "

	_, errOut, code := conchRunStdin(t, env, args+other, "k\n")
	if code == 0 || !strings.Contains(errOut, "matrix: the login does not work") || strings.Contains(errOut, otherToken) {
		t.Fatalf("another account's token: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code := conchRunStdin(t, env, args+good, "k\n")
	if code != 0 || strings.Contains(out+errOut, botToken) {
		t.Fatalf("conch init with Matrix: exit %d\n%s\n%s", code, out, errOut)
	}
	saved := filepath.Join(dir, "config", "conch", matrixKeyFile)
	if st, err := os.Stat(saved); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	cfg, err := config.Load(filepath.Join(dir, "config", "conch", "conch.toml"), nil)
	if err != nil || cfg.Matrix.AccessTokenFile != saved || cfg.Matrix.Homeserver != hs.URL || cfg.Matrix.UserID != string(botID) {
		t.Fatalf("config: %+v %v", cfg.Matrix, err)
	}
}

// TestInitEmail: conch init opens email with the IMAP and SMTP logins
// checked live against real servers (dovecot and postfix); the password is
// saved 0600 and only named by the config; a wrong password is refused.
func TestInitEmail(t *testing.T) {
	testenv.Short(t)
	ms := testmail.Start(t)
	bot := ms.AddUser(t, "conch")
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := append(initEnv(dir), "CONCH_EMAIL_TLS=none") // the test servers speak plain text
	good := filepath.Join(dir, "pw")
	bad := filepath.Join(dir, "bad-pw")
	os.WriteFile(good, []byte(bot.Password+"\n"), 0o600)
	os.WriteFile(bad, []byte("wrong-password\n"), 0o600)
	args := "init --non-interactive --provider openai --model test-model --engine none --api-key-stdin --base-url " + srv.BaseURL(fakellm.OpenAI) +
		" --email-address " + bot.Address + " --email-imap " + ms.IMAPAddr + " --email-smtp " + ms.SMTPAddr + " --email-user " + bot.Local + " --email-smtp-user none" +
		" --email-allow @" + testmail.Domain + " --email-password-file "

	_, errOut, code := conchRunStdin(t, env, args+bad, "k\n")
	if code == 0 || !strings.Contains(errOut, "email: the IMAP login does not work") || strings.Contains(errOut, "wrong-password") {
		t.Fatalf("wrong password: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code := conchRunStdin(t, env, args+good, "k\n")
	if code != 0 || strings.Contains(out+errOut, bot.Password) {
		t.Fatalf("conch init with email: exit %d\n%s\n%s", code, out, errOut)
	}
	saved := filepath.Join(dir, "config", "conch", emailKeyFile)
	if st, err := os.Stat(saved); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v %v", st, err)
	}
	cfg, err := config.Load(filepath.Join(dir, "config", "conch", "conch.toml"), []string{"CONCH_EMAIL_TLS=none"})
	if err != nil || cfg.Email.Address != bot.Address || cfg.Email.IMAPPasswordFile != saved || cfg.Email.SMTPPasswordFile != "" {
		t.Fatalf("config: %+v %v", cfg.Email, err)
	}
	if out, errOut, code := conchRun(t, append(env, "CONCH_TEST_AS_MAIN=1"), "doctor"); code != 0 || !strings.Contains(out, "✓ email imap") {
		t.Fatalf("doctor on what init wrote: exit %d\n%s%s", code, out, errOut)
	}
}

// TestInitExplainsMissingEngine: with no container engine answering, conch
// init says how to install one and writes a config conch up runs with
// (sandboxes off), instead of failing.
func TestInitExplainsMissingEngine(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := append(initEnv(dir), "CONCH_SANDBOX_HOST=unix://"+filepath.Join(dir, "no-such.sock"))
	out, errOut, code := conchRunStdin(t, env, "init --non-interactive --provider openai --model test-model --api-key-stdin --base-url "+srv.BaseURL(fakellm.OpenAI), "k\n")
	if code != 0 {
		t.Fatalf("conch init: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"No container engine answered", "sudo apt-get install docker.io", "podman", "Until then conch runs without sandboxes"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "config", "conch", "conch.toml"), nil)
	if err != nil || cfg.Sandbox.Engine != "none" {
		t.Fatalf("sandbox.engine: %+v %v", cfg.Sandbox.Engine, err)
	}
}
