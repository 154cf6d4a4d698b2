// Package mail starts a real mail system for tests: Debian's dovecot (IMAP
// and LMTP) and postfix (SMTP, delivering to dovecot over LMTP), each from a
// private configuration in a temporary directory, listening on random free
// ports on 127.0.0.1. Nothing of the system's own mail configuration is read
// or changed, and systemd is never involved.
//
// Postfix's master must run as root (it drops to the postfix user), so the
// package reports the mail server as missing when the tests do not run as
// root or the binaries are absent (see testenv.Missing).
package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-smtp"

	"conch/internal/testenv"
)

// Domain is the mail domain of every user: alice becomes alice@example.test.
const Domain = "example.test"

const (
	dovecotBin = "/usr/sbin/dovecot"
	postfixBin = "/usr/sbin/postfix"
	masterBin  = "/usr/lib/postfix/sbin/master"
)

// Server is a running dovecot + postfix pair.
type Server struct {
	// Dir holds the configurations, the mail and the logs.
	Dir string
	// IMAPAddr, LMTPAddr and SMTPAddr are host:port on 127.0.0.1. IMAP and
	// SMTP take plain-text logins (no TLS: loopback only).
	IMAPAddr, LMTPAddr, SMTPAddr string

	mailUID, mailGID int

	mu    sync.Mutex
	users map[string]string // local part → password
	// usersMtime is the modification time given to the last users file.
	usersMtime time.Time
	dovecot    *proc
	postfix    *proc
}

// User is a mailbox on the server.
type User struct {
	// Local is the local part and the IMAP login name.
	Local    string
	Address  string
	Password string
}

// proc is a started daemon.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns the test binary's one mail server, starting it on first
// use. Call Cleanup from TestMain to stop it; without that, the daemons die
// with the test binary (they get SIGKILL when their parent exits).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if reason := unavailable(); reason != "" {
		testenv.Missing(tb, "mail server", reason)
	}
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		tb.Fatalf("start mail server: %v", sharedErr)
	}
	return shared
}

// Cleanup stops the shared server, if one was started, and removes its directory.
func Cleanup() {
	if shared != nil {
		shared.Stop()
		os.RemoveAll(shared.Dir)
	}
}

// Start starts a private mail server for one test and stops it when the
// test ends (for tests that stop and start parts of it).
func Start(tb testing.TB) *Server {
	tb.Helper()
	if reason := unavailable(); reason != "" {
		testenv.Missing(tb, "mail server", reason)
	}
	s, err := start()
	if err != nil {
		tb.Fatalf("start mail server: %v", err)
	}
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("dovecot log tail:\n%s\npostfix log tail:\n%s", s.LogTail("dovecot.log", 3000), s.LogTail("postfix/postfix.log", 3000))
		}
		os.RemoveAll(s.Dir)
	})
	return s
}

// unavailable says why the mail server cannot run here, or "".
func unavailable() string {
	for _, bin := range []string{dovecotBin, postfixBin, masterBin, "/usr/lib/dovecot/lmtp", "/usr/lib/dovecot/imap"} {
		if _, err := os.Stat(bin); err != nil {
			return bin + " is not installed (apt-get install dovecot-imapd dovecot-lmtpd postfix; see scripts/ci-deps.sh)"
		}
	}
	if os.Geteuid() != 0 {
		return "postfix's master must start as root"
	}
	for _, name := range []string{"postfix", "nobody", "dovecot", "dovenull"} {
		if _, err := user.Lookup(name); err != nil {
			return "system user " + name + " is missing (installed with the postfix and dovecot packages)"
		}
	}
	return ""
}

func start() (*Server, error) {
	// Not t.TempDir: its parents are private to root, and dovecot's mail
	// processes (nobody) and postfix must reach their directories.
	dir, err := os.MkdirTemp("", "conch-mail-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	nobody, _ := user.Lookup("nobody")
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	s := &Server{Dir: dir, users: map[string]string{}, mailUID: uid, mailGID: gid}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s.IMAPAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.LMTPAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	s.SMTPAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
	if err := s.writeDovecot(ports[0], ports[1]); err != nil {
		return nil, err
	}
	if err := s.writePostfix(ports[1], ports[2]); err != nil {
		return nil, err
	}
	if err := s.StartIMAP(); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.startPostfix(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (s *Server) path(parts ...string) string {
	return filepath.Join(append([]string{s.Dir}, parts...)...)
}

func (s *Server) writeDovecot(imapPort, lmtpPort int) error {
	for _, d := range []string{"dovecot/run", "dovecot/state", "maildirs"} {
		if err := os.MkdirAll(s.path(d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chown(s.path("maildirs"), s.mailUID, s.mailGID); err != nil {
		return err
	}
	if err := os.WriteFile(s.path("dovecot", "users"), nil, 0o644); err != nil {
		return err
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	conf := fmt.Sprintf(`# conch test mail server (generated)
base_dir = %[1]s/dovecot/run
state_dir = %[1]s/dovecot/state
instance_name = conch-test-%[2]s
log_path = %[1]s/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:%[1]s/maildirs/%%n
mail_uid = %[3]d
mail_gid = %[4]d
first_valid_uid = 1
first_valid_gid = 1
# Tests log in with wrong passwords on purpose: no penalty delays for loopback.
login_trusted_networks = 127.0.0.0/8
auth_failure_delay = 0
mailbox_idle_check_interval = 1 secs
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%n %[1]s/dovecot/users
}
userdb {
  driver = static
  args = uid=%[3]d gid=%[4]d home=%[1]s/maildirs/%%n allow_all_users=yes
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[5]d
  }
  inet_listener imaps {
    port = 0
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = %[6]d
  }
}
protocol lmtp {
  postmaster_address = postmaster@%[7]s
}
`, s.Dir, hex.EncodeToString(id), s.mailUID, s.mailGID, imapPort, lmtpPort, Domain)
	return os.WriteFile(s.path("dovecot", "dovecot.conf"), []byte(conf), 0o644)
}

func (s *Server) writePostfix(lmtpPort, smtpPort int) error {
	pf := s.path("postfix")
	for _, d := range []string{"spool", "data"} {
		if err := os.MkdirAll(filepath.Join(pf, d), 0o755); err != nil {
			return err
		}
	}
	pfUser, _ := user.Lookup("postfix")
	puid, _ := strconv.Atoi(pfUser.Uid)
	if err := os.Chown(filepath.Join(pf, "data"), puid, -1); err != nil {
		return err
	}
	// maillog_file must live under one of maillog_file_prefixes.
	mainCF := fmt.Sprintf(`compatibility_level = 3.6
queue_directory = %[1]s/spool
data_directory = %[1]s/data
command_directory = /usr/sbin
daemon_directory = /usr/lib/postfix/sbin
meta_directory = /etc/postfix
shlib_directory = /usr/lib/postfix
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = mail.%[2]s
mydomain = %[2]s
myorigin = %[2]s
mydestination =
local_recipient_maps =
virtual_mailbox_domains = %[2]s
virtual_transport = lmtp:inet:127.0.0.1:%[3]d
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
alias_maps =
alias_database =
maillog_file_prefixes = %[1]s
maillog_file = %[1]s/postfix.log
smtputf8_enable = no
biff = no
message_size_limit = 62914560
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
syslog_name = postfix-conch-test
`, pf, Domain, lmtpPort)
	masterCF := fmt.Sprintf(`127.0.0.1:%d inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
`, smtpPort)
	if err := os.WriteFile(filepath.Join(pf, "main.cf"), []byte(mainCF), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pf, "master.cf"), []byte(masterCF), 0o644)
}

// launch starts a daemon in its own process group that dies with the test binary.
func (s *Server) launch(logName string, name string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(s.path(logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// Not CommandContext: the daemon outlives the caller's context.
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop ends a daemon and everything it started, and waits for it.
func (p *proc) stop(sig syscall.Signal) {
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	// Children that left the group (none expected) would keep the ports.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// StartIMAP starts dovecot (IMAP and LMTP) and waits until both ports answer.
func (s *Server) StartIMAP() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dovecot != nil {
		return errors.New("dovecot is already running")
	}
	p, err := s.launch("dovecot.out", dovecotBin, "-F", "-c", s.path("dovecot", "dovecot.conf"))
	if err != nil {
		return err
	}
	s.dovecot = p
	if err := waitPorts(p, 20*time.Second, s.IMAPAddr, s.LMTPAddr); err != nil {
		return fmt.Errorf("dovecot: %w\n%s\n%s", err, s.LogTail("dovecot.out", 2000), s.LogTail("dovecot.log", 2000))
	}
	if s.postfix != nil {
		// Mail deferred while LMTP was down goes out now, not at postfix's
		// next retry (which can be much later after repeated failures).
		if out, err := exec.Command("/usr/sbin/postqueue", "-c", s.path("postfix"), "-f").CombinedOutput(); err != nil {
			return fmt.Errorf("postqueue -f: %w: %s", err, out)
		}
	}
	return nil
}

// StopIMAP stops dovecot: IMAP logins fail and postfix keeps arriving mail
// in its queue (LMTP is down) until StartIMAP.
func (s *Server) StopIMAP() {
	s.mu.Lock()
	p := s.dovecot
	s.dovecot = nil
	s.mu.Unlock()
	p.stop(syscall.SIGTERM)
}

func (s *Server) startPostfix() error {
	pf := s.path("postfix")
	// check creates the queue directories with their owners.
	out, err := exec.Command(postfixBin, "-c", pf, "check").CombinedOutput()
	if err != nil {
		return fmt.Errorf("postfix check: %w: %s", err, out)
	}
	p, err := s.launch("postfix.out", masterBin, "-c", pf, "-d")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.postfix = p
	s.mu.Unlock()
	if err := waitPorts(p, 20*time.Second, s.SMTPAddr); err != nil {
		return fmt.Errorf("postfix: %w\n%s\n%s", err, s.LogTail("postfix.out", 2000), s.LogTail("postfix/postfix.log", 2000))
	}
	return nil
}

func waitPorts(p *proc, limit time.Duration, addrs ...string) error {
	deadline := time.Now().Add(limit)
	for _, addr := range addrs {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-p.exited:
				return fmt.Errorf("exited before %s answered: %v", addr, p.err)
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s does not answer after %s: %w", addr, limit, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// Stop ends both daemons.
func (s *Server) Stop() {
	s.mu.Lock()
	d, p := s.dovecot, s.postfix
	s.dovecot, s.postfix = nil, nil
	s.mu.Unlock()
	p.stop(syscall.SIGTERM)
	d.stop(syscall.SIGTERM)
}

// LogTail returns the last n bytes of a log file in Dir.
func (s *Server) LogTail(name string, n int) string {
	b, err := os.ReadFile(s.path(name))
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

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

// Send submits raw RFC 5322 bytes through postfix's SMTP port with the
// given envelope. Plain SMTP on loopback: go-smtp's SendMail would insist
// on STARTTLS.
func (s *Server) Send(ctx context.Context, from string, to []string, raw []byte) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", s.SMTPAddr)
	if err != nil {
		return fmt.Errorf("smtp dial: %w", err)
	}
	c := smtp.NewClient(conn)
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if err := c.SendMail(from, to, bytes.NewReader(raw)); err != nil {
		return fmt.Errorf("smtp send: %w", err)
	}
	return c.Quit()
}

// MustSend is Send that fails the test on error.
func (s *Server) MustSend(tb testing.TB, from string, to []string, raw []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Send(ctx, from, to, raw); err != nil {
		tb.Fatal(err)
	}
}

// Message is one mail in a mailbox, read from dovecot's Maildir.
type Message struct {
	Raw    []byte
	Header mail.Header
	// File is the Maildir file name.
	File string
	// Delivered is the file's modification time (delivery time).
	Delivered time.Time
}

// Messages lists the INBOX of u in delivery order. It reads the Maildir
// directly, so it does not disturb IMAP sessions.
func (s *Server) Messages(u User) ([]Message, error) {
	var msgs []Message
	for _, sub := range []string{"new", "cur"} {
		dir := s.path("maildirs", u.Local, sub)
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			raw, err := os.ReadFile(p)
			if errors.Is(err, os.ErrNotExist) {
				continue // moved from new/ to cur/ meanwhile
			}
			if err != nil {
				return nil, err
			}
			info, err := e.Info()
			if err != nil {
				continue
			}
			m := Message{Raw: raw, File: e.Name(), Delivered: info.ModTime()}
			if pm, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
				m.Header = pm.Header
			}
			msgs = append(msgs, m)
		}
	}
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].Delivered.Before(msgs[j].Delivered) })
	return msgs, nil
}

// WaitMessages waits until u's INBOX holds at least n messages and returns them.
func (s *Server) WaitMessages(ctx context.Context, u User, n int) ([]Message, error) {
	for {
		msgs, err := s.Messages(u)
		if err != nil {
			return nil, err
		}
		if len(msgs) >= n {
			return msgs, nil
		}
		select {
		case <-ctx.Done():
			return msgs, fmt.Errorf("mailbox %s: %d message(s), want %d: %w", u.Address, len(msgs), n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// MustWait is WaitMessages that fails the test on timeout.
func (s *Server) MustWait(tb testing.TB, u User, n int, limit time.Duration) []Message {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	msgs, err := s.WaitMessages(ctx, u, n)
	if err != nil {
		tb.Fatalf("%v\npostfix log tail:\n%s", err, s.LogTail("postfix/postfix.log", 2000))
	}
	return msgs
}

// WaitQueueEmpty waits until postfix has no mail left in its queue: every
// accepted mail was delivered (or bounced). Stopping dovecot before that
// can cut an LMTP delivery after dovecot saved the mail but before postfix
// heard so, and postfix then delivers it a second time.
func (s *Server) WaitQueueEmpty(ctx context.Context) error {
	for {
		n := 0
		for _, q := range []string{"maildrop", "incoming", "active", "deferred"} {
			_ = filepath.WalkDir(s.path("postfix", "spool", q), func(_ string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					n++
				}
				return nil
			})
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postfix queue: %d mail(s) left: %w", n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
