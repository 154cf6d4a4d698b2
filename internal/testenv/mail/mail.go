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
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"sync"
	"testing"
	"time"

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
