package mail

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
)

// AddUser creates a mailbox with a fresh password. Names are unique per
// server; on the shared server, UniqueName avoids clashes between tests.
func (s *Server) AddUser(tb testing.TB, local string) User {
	tb.Helper()
	pw := make([]byte, 8)
	_, _ = rand.Read(pw)
	u := User{Local: local, Address: local + "@" + Domain, Password: "pw-" + hex.EncodeToString(pw)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[local]; ok {
		tb.Fatalf("mail user %s exists already", local)
	}
	s.users[local] = u.Password
	var b strings.Builder
	for name, p := range s.users {
		fmt.Fprintf(&b, "%s:{PLAIN}%s\n", name, p)
	}
	// Dovecot re-reads the file when it changes; write it whole.
	tmp := s.path("dovecot", "users.tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	// Dovecot notices a changed passwd-file by its mtime in whole seconds:
	// two writes within one second would look like one. Each write gets a
	// later second than the one before.
	next := time.Now().Truncate(time.Second)
	if !next.After(s.usersMtime) {
		next = s.usersMtime.Add(time.Second)
	}
	s.usersMtime = next
	if err := os.Chtimes(tmp, s.usersMtime, s.usersMtime); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, s.path("dovecot", "users")); err != nil {
		tb.Fatal(err)
	}
	if s.dovecot != nil {
		if err := s.waitLogin(u, 10*time.Second); err != nil {
			tb.Fatalf("new mail user %s cannot log in: %v\n%s", local, err, s.LogTail("dovecot.log", 2000))
		}
	}
	return u
}

// waitLogin retries an IMAP login until dovecot has read the new user.
func (s *Server) waitLogin(u User, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := s.tryLogin(u)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) tryLogin(u User) error {
	c, err := imapclient.DialInsecure(s.IMAPAddr, &imapclient.Options{Dialer: &net.Dialer{Timeout: 5 * time.Second}})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Login(u.Local, u.Password).Wait(); err != nil {
		return err
	}
	return c.Logout().Wait()
}

// UniqueName returns prefix plus a random suffix, for user names on a shared server.
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
