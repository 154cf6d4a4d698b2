package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	testmail "conch/internal/testenv/mail"
)

func emailEnv(srv *testmail.Server, conch, alice testmail.User) []string {
	host, port := splitHostPort(srv.IMAPAddr)
	_, smtpPort := splitHostPort(srv.SMTPAddr)
	return []string{
		"CONCH_EMAIL_ADDRESS=" + conch.Address,
		"CONCH_EMAIL_IMAP_HOST=" + host,
		"CONCH_EMAIL_IMAP_PORT=" + port,
		"CONCH_EMAIL_IMAP_USERNAME=" + conch.Local,
		"CONCH_EMAIL_IMAP_PASSWORD=" + conch.Password,
		"CONCH_EMAIL_SMTP_HOST=" + host,
		"CONCH_EMAIL_SMTP_PORT=" + smtpPort,
		"CONCH_EMAIL_TLS=none",
		"CONCH_EMAIL_ALLOW_FROM=@" + testmail.Domain,
	}
}

func splitHostPort(addr string) (string, string) {
	i := strings.LastIndex(addr, ":")
	return addr[:i], addr[i+1:]
}

func personMail(from, to, subject, id, body string, extra ...string) []byte {
	var h strings.Builder
	for _, e := range extra {
		h.WriteString(e + "\r\n")
	}
	return []byte("From: " + from + "\r\nTo: " + to + "\r\nSubject: " + subject + "\r\nMessage-ID: <" + id + ">\r\nDate: " +
		time.Now().Format(time.RFC1123Z) + "\r\n" + h.String() + "Content-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n")
}

// TestUpEmailKill9 runs the real `conch up` against real dovecot and
// postfix: a mail is answered in its thread; conch is killed with SIGKILL
// after the mail was stored and while the model works on it; after the
// restart the mail is answered exactly once, and a stranger gets nothing.
func TestUpEmailKill9(t *testing.T) {
	testenv.Short(t)
	ms := testmail.Start(t)
	conchUser, alice := ms.AddUser(t, "conch"), ms.AddUser(t, "alice")
	mallory := ms.AddUser(t, "mallory")
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := append(testEnv(srv, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN=")
	env = append(env, emailEnv(ms, conchUser, alice)...)
	env = append(env, "CONCH_EMAIL_ALLOW_FROM="+alice.Address)

	// 1. A plain round trip through conch up.
	srv.Push(fakellm.Text("Here is **the plan**."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "email: watching mailbox")
	ms.MustSend(t, mallory.Address, []string{conchUser.Address}, personMail(mallory.Address, conchUser.Address, "hi", "m1@example.test", "answer me"))
	ms.MustSend(t, alice.Address, []string{conchUser.Address}, personMail("Alice <"+alice.Address+">", conchUser.Address, "Plan", "a1@example.test", "What is the plan?"))
	msgs := ms.MustWait(t, alice, 1, 60*time.Second)
	if got := msgs[0].Header.Get("In-Reply-To"); got != "<a1@example.test>" || msgs[0].Header.Get("Subject") != "Re: Plan" {
		t.Fatalf("reply headers: In-Reply-To %q Subject %q", got, msgs[0].Header.Get("Subject"))
	}
	if !strings.Contains(string(msgs[0].Raw), "<strong>the plan</strong>") {
		t.Fatalf("reply lacks the HTML part:\n%s", msgs[0].Raw)
	}
	if req, ok := srv.Last(); !ok || len(req.Messages) == 0 || !strings.Contains(req.Messages[len(req.Messages)-1].Text, "What is the plan?") {
		t.Fatalf("the model did not see the mail's text: %+v", req.Messages)
	}

	// 2. The next mail is stored, the model is thinking: kill -9.
	srv.Push(fakellm.Hang(), fakellm.Text("Answered after the crash."))
	first := msgs[0].Header.Get("Message-Id")
	ms.MustSend(t, alice.Address, []string{conchUser.Address}, personMail("Alice <"+alice.Address+">", conchUser.Address, "Re: Plan", "a2@example.test",
		"And then?\n\nOn Monday conch wrote:\n> Here is the plan.", "In-Reply-To: "+first, "References: <a1@example.test> "+first))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := srv.Wait(ctx, 2); err != nil {
		t.Fatalf("the model was not asked about the second mail: %v\n%s", err, p.stderr)
	}
	p.kill9(t)

	p = startConch(t, env, "up")
	ms.MustWait(t, alice, 2, 60*time.Second)
	// Give a duplicate time to show up.
	time.Sleep(3 * time.Second)
	msgs, _ = ms.Messages(alice)
	answers := map[string]int{}
	for _, m := range msgs {
		answers[m.Header.Get("In-Reply-To")]++
	}
	if len(msgs) != 2 || answers["<a1@example.test>"] != 1 || answers["<a2@example.test>"] != 1 {
		t.Fatalf("alice got %d replies %v, want one per mail; stderr:\n%s", len(msgs), answers, p.stderr)
	}
	if !strings.Contains(string(msgs[1].Raw), "Answered after the crash.") {
		t.Fatalf("second reply:\n%s", msgs[1].Raw)
	}
	if got, want := msgs[1].Header.Get("References"), "<a1@example.test> "+first+" <a2@example.test>"; got != want {
		t.Errorf("second reply References %q, want %q", got, want)
	}
	// The model saw the new text only, in the same conversation as the first mail.
	if req, ok := srv.Last(); !ok || len(req.Messages) < 3 || strings.Contains(req.Messages[len(req.Messages)-1].Text, "Here is the plan.") ||
		!strings.Contains(req.Messages[0].Text, "What is the plan?") {
		t.Errorf("model request after the crash: %+v", req.Messages)
	}
	if n, _ := ms.Messages(mallory); len(n) != 0 {
		t.Errorf("mallory got %d mails, want none", len(n))
	}
	if n := srv.Count(); n != 3 {
		t.Errorf("model calls: got %d, want 3 (one, the interrupted one, its resumption)", n)
	}
}

// TestDoctorEmail: doctor logs in over IMAP and SMTP, warns about TLS off,
// and names the key of a wrong password.
func TestDoctorEmail(t *testing.T) {
	testenv.Short(t)
	ms := testmail.Start(t)
	conchUser, alice := ms.AddUser(t, "conch"), ms.AddUser(t, "alice")
	srv := fakellm.New(t)
	base := append(testEnv(srv, fakellm.OpenAI, t.TempDir()), "CONCH_TEST_ARGS=doctor")
	base = append(base, emailEnv(ms, conchUser, alice)...)
	run := func(extra ...string) (string, error) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(append([]string(nil), base...), extra...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, _ := run()
	for _, want := range []string{"✓ email imap: " + conchUser.Local + " at " + ms.IMAPAddr, "IDLE supported", "✓ email smtp: " + ms.SMTPAddr, "! email tls: none"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	out, err := run("CONCH_EMAIL_IMAP_PASSWORD=wrong")
	if err == nil || !strings.Contains(out, "✗ email imap") || !strings.Contains(out, "email.imap_password") {
		t.Fatalf("doctor with a wrong password (err %v):\n%s", err, out)
	}
	out, err = run("CONCH_EMAIL_TLS=maybe", "CONCH_EMAIL_SMTP_PORT="+strconv.Itoa(70000))
	if err == nil || !strings.Contains(out, "email.tls: unknown mode") || !strings.Contains(out, "email.smtp_port") {
		t.Fatalf("doctor with a bad config (err %v):\n%s", err, out)
	}
}
