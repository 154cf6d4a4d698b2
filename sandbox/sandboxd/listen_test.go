package sandboxd_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv"
	"conch/sandbox/sandboxd"
	"conch/sandbox/sandboxd/sandboxdtest"
)

// listen starts a listener in a fresh short directory and returns its
// socket path; it stops at cleanup.
func listen(t *testing.T, o sandboxd.ListenOptions) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	o.Path = filepath.Join(dir, "agent.sock")
	if o.Server == nil {
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "workspace"), 0o755); err != nil {
			t.Fatal(err)
		}
		o.Server = sandboxdtest.NewServer(root)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	o.Ready = func() { close(ready) }
	done := make(chan error, 1)
	go func() { done <- sandboxd.Listen(ctx, o) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Listen: %v", err)
		}
		os.RemoveAll(dir)
	})
	return o.Path
}

// TestSocketKeyFileIsRemoved: the listener reads its key from the file and
// removes it before the socket exists; a client with the key is served.
func TestSocketKeyFileIsRemoved(t *testing.T) {
	key := sandboxd.NewKey()
	kf := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(kf, key, 0o600); err != nil {
		t.Fatal(err)
	}
	path := listen(t, sandboxd.ListenOptions{KeyFile: kf, AllowSameNamespace: true, Logger: slog.New(slog.DiscardHandler)})
	if _, err := os.Stat(kf); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("key file after start: %v, want it removed", err)
	}
	c := sandboxd.NewClient(func(ctx context.Context) (io.ReadWriteCloser, error) {
		return sandboxd.DialSocket(ctx, path, key)
	}, sandboxd.ClientOptions{})
	defer c.Close()
	res, err := c.Exec(ctxT(t), conch.ExecRequest{Argv: []string{"echo", "over the socket"}})
	if err != nil || strings.TrimSpace(string(res.Output)) != "over the socket" {
		t.Fatalf("Exec: %+v, %v", res, err)
	}
}

// TestSocketRefusesPeersInItsNamespace: in a sandbox the listener serves
// only peers outside its pid namespace; this test process is inside its
// own, so even with the right key it is refused (and logged).
func TestSocketRefusesPeersInItsNamespace(t *testing.T) {
	key := sandboxd.NewKey()
	var log testenv.SyncBuffer
	path := listen(t, sandboxd.ListenOptions{Key: key, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	_, err := sandboxd.DialSocket(ctxT(t), path, key)
	if !errors.Is(err, sandboxd.ErrHandshake) {
		t.Fatalf("dial from inside the namespace: got %v, want ErrHandshake", err)
	}
	waitFor(t, func() bool { return strings.Contains(log.String(), "inside the sandbox") }, "a log line naming the refused peer")
}

// TestSocketWrongKey: a client without the key learns nothing (no hello);
// a client facing a listener without its key refuses it.
func TestSocketWrongKey(t *testing.T) {
	key := sandboxd.NewKey()
	path := listen(t, sandboxd.ListenOptions{Key: key, AllowSameNamespace: true, Logger: slog.New(slog.DiscardHandler)})
	if _, err := sandboxd.DialSocket(ctxT(t), path, sandboxd.NewKey()); !errors.Is(err, sandboxd.ErrHandshake) {
		t.Errorf("dial with another key: got %v, want ErrHandshake", err)
	}
	// Raw: the opener with garbage, then a forged proof: never a hello.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(append([]byte("CONCHSD1"), make([]byte, 32)...)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 64)); err != nil {
		t.Fatalf("server's proof: %v", err)
	}
	if _, err := c.Write(make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Errorf("after a forged proof: read %d bytes, %v; want the connection closed", n, err)
	}

	// An impostor listener that answers without the key.
	dir, _ := os.MkdirTemp("", "sd")
	defer os.RemoveAll(dir)
	fake := filepath.Join(dir, "fake.sock")
	ln, err := net.Listen("unix", fake)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.ReadFull(c, make([]byte, 40))
		_, _ = c.Write(make([]byte, 64))
		_, _ = io.Copy(io.Discard, c)
	}()
	if _, err := sandboxd.DialSocket(ctxT(t), fake, key); !errors.Is(err, sandboxd.ErrHandshake) {
		t.Errorf("dial an impostor: got %v, want ErrHandshake", err)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
