package mail

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

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
