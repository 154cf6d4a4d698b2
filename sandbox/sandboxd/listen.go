package sandboxd

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The socket transport (docs/decisions/2026-11-26-sandboxd-unix-socket.md):
// sandboxd listens on a unix socket in a directory the host bind-mounts into
// the container, and conch dials it directly, so no engine relays the
// protocol. Each accepted connection is one session of the same protocol as
// over an exec stream.
//
// Who may use the socket: the tools run as the same uid as sandboxd (it
// must start and signal them without capabilities), so the filesystem alone
// cannot keep them from the path. Two checks that do not depend on it:
//
//   - sandboxd serves only peers outside its pid namespace (SO_PEERCRED
//     reports pid 0 for them): every process in the sandbox is in it, conch
//     on the host or in its own container is not. The kernel fills the
//     credentials at connect; a tool cannot forge them.
//   - conch serves nothing to a listener that cannot prove it holds the
//     container's key (an HMAC over fresh nonces both ways): a tool that
//     unlinked the socket and bound its own learns nothing and is refused.
//     The key reaches sandboxd in a file conch writes before the container
//     starts, which sandboxd reads and removes before any tool exists.
//
// A connection whose handshake fails is closed without a word.

// Socket transport constants.
const (
	// KeySize is the length of a container's socket key.
	KeySize = 32
	// handshakeMagic opens a client's handshake (protocol 1).
	handshakeMagic = "CONCHSD1"
	nonceSize      = 32
	// handshakeTimeout bounds the handshake on both sides.
	handshakeTimeout = 10 * time.Second
)

// ErrHandshake reports a socket peer that failed authentication.
var ErrHandshake = errors.New("sandbox agent socket: handshake failed")

// NewKey returns a fresh random socket key.
func NewKey() []byte {
	k := make([]byte, KeySize)
	_, _ = rand.Read(k)
	return k
}

func mac(key []byte, label string, a, b []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(label))
	h.Write(a)
	h.Write(b)
	return h.Sum(nil)
}

// clientHandshake proves to the listener that the client holds key and
// checks that the listener does. It runs before the protocol's hello.
func clientHandshake(rw io.ReadWriter, key []byte) error {
	nc := make([]byte, nonceSize)
	_, _ = rand.Read(nc)
	if _, err := rw.Write(append([]byte(handshakeMagic), nc...)); err != nil {
		return fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	buf := make([]byte, nonceSize+sha256.Size)
	if _, err := io.ReadFull(rw, buf); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Slow, not false: the caller must not take it for an impostor.
			return fmt.Errorf("sandbox agent socket: no answer in time: %w", err)
		}
		return fmt.Errorf("%w: no answer from the listener (not conch's agent, or another key): %v", ErrHandshake, err)
	}
	ns, proof := buf[:nonceSize], buf[nonceSize:]
	if !hmac.Equal(proof, mac(key, "conch-sandboxd server", nc, ns)) {
		return fmt.Errorf("%w: the listener does not hold the container's key", ErrHandshake)
	}
	if _, err := rw.Write(mac(key, "conch-sandboxd client", nc, ns)); err != nil {
		return fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	return nil
}

// serverHandshake is the listener's side of clientHandshake.
func serverHandshake(rw io.ReadWriter, key []byte) error {
	buf := make([]byte, len(handshakeMagic)+nonceSize)
	if _, err := io.ReadFull(rw, buf); err != nil {
		return fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	if string(buf[:len(handshakeMagic)]) != handshakeMagic {
		return fmt.Errorf("%w: not a conch client", ErrHandshake)
	}
	nc := buf[len(handshakeMagic):]
	ns := make([]byte, nonceSize)
	_, _ = rand.Read(ns)
	if _, err := rw.Write(append(ns, mac(key, "conch-sandboxd server", nc, ns)...)); err != nil {
		return fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(rw, proof); err != nil {
		return fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	if !hmac.Equal(proof, mac(key, "conch-sandboxd client", nc, ns)) {
		return fmt.Errorf("%w: the client does not hold the container's key", ErrHandshake)
	}
	return nil
}

// DialSocket connects to the agent listening at path and authenticates both
// ends with key. The returned stream carries the protocol from its hello on.
func DialSocket(ctx context.Context, path string, key []byte) (io.ReadWriteCloser, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	dl := time.Now().Add(handshakeTimeout)
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	_ = c.SetDeadline(dl)
	if err := clientHandshake(c, key); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// ListenOptions configure ServeSocket.
type ListenOptions struct {
	// Path is the socket's path; its directory must exist.
	Path string
	// KeyFile holds the key clients must prove; it is read and removed
	// before the socket exists.
	KeyFile string
	// Key is used instead of KeyFile when set (tests).
	Key []byte
	// AllowSameNamespace serves peers in the listener's own pid namespace
	// too: for tests on a host only, never in a sandbox.
	AllowSameNamespace bool
	// Server serves each connection; nil means a sandbox's defaults.
	Server *Server
	// Logger receives refused connections; nil logs to stderr.
	Logger *slog.Logger
	// Ready, if set, is called once the socket listens.
	Ready func()
	// Accepted, if set, sees every accepted connection before its checks
	// (tests break them).
	Accepted func(io.Closer)
}

// ServeSocket is `conch sandbox-agent --listen`: it makes itself
// untraceable by the tools (SetNotDumpable), turns SIGPIPE into write
// errors, stops on SIGTERM or SIGINT, and runs Listen.
func ServeSocket(ctx context.Context, o ListenOptions) error {
	if err := SetNotDumpable(); err != nil {
		return fmt.Errorf("sandbox agent: %w", err)
	}
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if o.Server == nil {
		o.Server = &Server{ReclaimProcesses: true}
	}
	return Listen(ctx, o)
}

// Listen reads and removes the key, listens on the socket and serves every
// authenticated peer outside its pid namespace as one session, until ctx
// ends. Sessions are independent: a connection's end kills only the
// programs it started.
func Listen(ctx context.Context, o ListenOptions) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	key := o.Key
	if key == nil {
		b, err := os.ReadFile(o.KeyFile)
		if err != nil {
			return fmt.Errorf("sandbox agent: key: %w", err)
		}
		if err := os.Remove(o.KeyFile); err != nil {
			return fmt.Errorf("sandbox agent: remove key file: %w", err)
		}
		if len(b) != KeySize {
			return fmt.Errorf("sandbox agent: key file holds %d bytes, want %d", len(b), KeySize)
		}
		key = b
	}
	srv := o.Server
	if srv == nil {
		srv = &Server{}
	}
	// The socket is bound under a temporary name and renamed into place
	// once it listens: conch never finds a socket that refuses. A socket
	// left by an earlier agent of this container is replaced.
	tmp := filepath.Join(filepath.Dir(o.Path), fmt.Sprintf(".%s.%d", filepath.Base(o.Path), os.Getpid()))
	_ = os.Remove(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return fmt.Errorf("sandbox agent: listen: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Rename(tmp, o.Path); err != nil {
		ln.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("sandbox agent: listen: %w", err)
	}
	if o.Ready != nil {
		o.Ready()
	}
	stopAccept := context.AfterFunc(ctx, func() { ln.Close() })
	defer stopAccept()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("sandbox agent: accept: %w", err)
		}
		if o.Accepted != nil {
			o.Accepted(c)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			if err := admit(c, key, o.AllowSameNamespace); err != nil {
				log.Warn("sandbox agent: connection refused", "err", err)
				return
			}
			if err := srv.Serve(ctx, c, c); err != nil && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				log.Warn("sandbox agent: session ended", "err", err)
			}
		}()
	}
}

// admit checks a new connection's peer: outside the pid namespace (unless
// allowed) and holding the key.
func admit(c *net.UnixConn, key []byte, sameNS bool) error {
	cred, err := peerCred(c)
	if err != nil {
		return err
	}
	if cred.Pid != 0 && !sameNS {
		return fmt.Errorf("peer pid %d uid %d is inside the sandbox: only conch may connect", cred.Pid, cred.Uid)
	}
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := serverHandshake(c, key); err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}

// peerCred returns the connecting process's credentials as the kernel
// recorded them at connect, translated into this process's namespaces (pid
// 0: a process this pid namespace cannot see).
func peerCred(c *net.UnixConn) (*syscall.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, fmt.Errorf("peer credentials: %w", serr)
	}
	return cred, nil
}
