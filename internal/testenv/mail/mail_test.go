package mail

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

func TestSendAndReceive(t *testing.T) {
	s := Shared(t)
	alice, bob := s.AddUser(t, UniqueName("alice")), s.AddUser(t, UniqueName("bob"))
	raw := "From: " + alice.Address + "\r\nTo: " + bob.Address + "\r\nSubject: hello\r\nMessage-ID: <t1@example.test>\r\n\r\nhi bob\r\n"
	s.MustSend(t, alice.Address, []string{bob.Address}, []byte(raw))
	msgs := s.MustWait(t, bob, 1, 20*time.Second)
	if got := msgs[0].Header.Get("Subject"); got != "hello" {
		t.Errorf("subject: got %q, want hello", got)
	}

	// The same mail is visible over IMAP with bob's password.
	c, err := imapclient.DialInsecure(s.IMAPAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(bob.Local, bob.Password).Wait(); err != nil {
		t.Fatalf("login: %v", err)
	}
	sel, err := c.Select("INBOX", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if sel.NumMessages != 1 || sel.UIDValidity == 0 {
		t.Errorf("select: got %d messages, uidvalidity %d; want 1 and non-zero", sel.NumMessages, sel.UIDValidity)
	}
	if err := c.Login(bob.Local, "wrong").Wait(); err == nil {
		t.Error("login with a wrong password: got nil error")
	}
}

func TestStopIMAPQueuesMail(t *testing.T) {
	s := Start(t)
	alice, bob := s.AddUser(t, "alice"), s.AddUser(t, "bob")
	s.StopIMAP()
	if c, err := net.DialTimeout("tcp", s.IMAPAddr, time.Second); err == nil {
		c.Close()
		t.Fatal("IMAP port answers while dovecot is stopped")
	}
	raw := "From: " + alice.Address + "\r\nTo: " + bob.Address + "\r\nSubject: queued\r\n\r\nwhile down\r\n"
	s.MustSend(t, alice.Address, []string{bob.Address}, []byte(raw))
	time.Sleep(500 * time.Millisecond)
	if msgs, _ := s.Messages(bob); len(msgs) != 0 {
		t.Fatalf("got %d delivered messages while dovecot was down, want 0", len(msgs))
	}
	if err := s.StartIMAP(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, err := s.WaitMessages(ctx, bob, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msgs[0].Raw), "while down") {
		t.Errorf("got %q, want the queued mail", msgs[0].Raw)
	}
}
