package docker_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"
	"conch/sandbox/sandboxd/sandboxdtest"

	"github.com/moby/moby/client"
)

// socketOf is the host path of the agent's socket of sb (the only one in
// the runtime's sockets directory).
func socketOf(t *testing.T, rt *testRuntime) string {
	t.Helper()
	socks, _ := filepath.Glob(filepath.Join(rt.opts.DataDir, "sockets", "*.sock"))
	if len(socks) != 1 {
		t.Fatalf("got sockets %q, want one", socks)
	}
	return socks[0]
}

// TestSocketTransport: the agent is reached over its unix socket, which no
// process in the sandbox and no other host user can reach, and which the
// tools cannot take over: a listener they put in its place is refused by
// the key handshake and the agent is started again.
func TestSocketTransport(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt := newRuntime(t, eng, withAgent(t))
		ctx := ctxT(t)
		sb, err := rt.Sandbox(ctx, key("!socket:example.org"))
		if err != nil {
			t.Fatal(err)
		}
		if r := run(t, sb, "true"); r.ExitCode != 0 {
			t.Fatalf("true: exit %d", r.ExitCode)
		}
		sock := socketOf(t, rt)
		root := filepath.Join(rt.opts.DataDir, "sockets")
		if fi, err := os.Stat(root); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("sockets directory: %v, %v; want mode 0700", fi, err)
		}
		// Not through the engine: the agent has no attached exec.
		ins, err := eng.Client(t).ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(ins.Container.ExecIDs); n != 1 {
			// The one detached exec that started the listening agent.
			t.Errorf("container has %d execs, want 1 (the agent's start)", n)
		}

		t.Run("another host user cannot connect", func(t *testing.T) {
			py := "/usr/bin/python3" // not a per-user shim: uid 65534 runs it
			if _, err := os.Stat(py); err != nil {
				testenv.Missing(t, "python3", "the host probe connects as another user with /usr/bin/python3")
			}
			cmd := exec.Command(py, "-c",
				`import socket,sys
s=socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("connected")
except OSError as e:
    print(e.errno)`, sock)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("python3 as uid 65534: %v: %s", err, b)
			}
			if got := strings.TrimSpace(string(b)); got != "13" { // EACCES
				t.Errorf("connect as uid 65534: got %q, want 13 (EACCES)", got)
			}
		})

		t.Run("the tools find no socket and no key", func(t *testing.T) {
			r := run(t, sb, "python3", "-c", socketFinderProbe)
			if got := out(r); got != "none" {
				t.Errorf("from inside as the tools' uid: got %q, want none", got)
			}
		})

		t.Run("a listener the tools put in its place is refused", func(t *testing.T) {
			if r := run(t, sb, "sh", "-c", "setsid -f python3 -c '"+imposterProbe+"' >/dev/null 2>&1; sleep 0.3; ls /run/conch"); out(r) != "agent.sock" {
				t.Fatalf("imposter: exit %d %q", r.ExitCode, out(r))
			}
			// The tools can kill the agent (it runs as their uid): the
			// call that does it loses its session.
			_, _ = sb.Exec(ctx, conch.ExecRequest{Argv: []string{"pkill", "-KILL", "-f", "sandbox-agent --listen"}, Timeout: 10 * time.Second})
			// The next call finds the imposter, refuses it, and restarts the
			// container for a new agent: a new key can reach an agent
			// unread by the tools (who share its uid) only before they
			// exist. The imposter ended with the container; its log is in
			// the workspace, which stays.
			r := run(t, sb, "cat", "/workspace/imposter.log")
			if r.ExitCode != 0 {
				t.Fatalf("after the agent was killed: exit %d %q", r.ExitCode, out(r))
			}
			for _, l := range strings.Fields(out(r)) {
				if l != "40" {
					t.Errorf("the imposter received %s bytes of a connection, want only the 40-byte handshake opener (log %q)", l, out(r))
				}
			}
			if !strings.Contains(out(r), "40") {
				t.Errorf("imposter log %q: conch never tried it (the test proved nothing)", out(r))
			}
			if _, err := os.Stat(sock); err != nil {
				t.Errorf("the agent's socket is not back at %s: %v", sock, err)
			}
			if r := run(t, sb, "sh", "-c", "pgrep -f '"+imposterName+"' || echo gone"); out(r) != "gone" {
				t.Errorf("the imposter still runs (%q): the new agent's key was given while tools ran", out(r))
			}
		})

		t.Run("a link the tools put in its place is not followed", func(t *testing.T) {
			// A listener on the host that the link points at: conch must
			// never connect to it.
			hd, err := os.MkdirTemp("", "hl")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(hd)
			hostSock := filepath.Join(hd, "s.sock")
			ln, err := net.Listen("unix", hostSock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var connects atomic.Int32
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					connects.Add(1)
					c.Close()
				}
			}()
			// And links where conch writes the restarted agent's key: conch
			// must not chown, chmod or write the host file behind them.
			hostFile := filepath.Join(hd, "secret")
			if err := os.WriteFile(hostFile, []byte("host only"), 0o600); err != nil {
				t.Fatal(err)
			}
			if r := run(t, sb, "sh", "-c", "pkill -f '"+imposterName+"'; ln -sfn "+hostSock+" /run/conch/agent.sock && ln -sfn "+hostFile+
				" /run/conch/key && ln -sfn "+hostFile+" /run/conch/key.tmp && ls /run/conch"); r.ExitCode != 0 {
				t.Fatalf("plant a link: exit %d %q", r.ExitCode, out(r))
			}
			_, _ = sb.Exec(ctx, conch.ExecRequest{Argv: []string{"pkill", "-KILL", "-f", "sandbox-agent --listen"}, Timeout: 10 * time.Second})
			if r := run(t, sb, "true"); r.ExitCode != 0 {
				t.Fatalf("after the agent was killed: exit %d %q", r.ExitCode, out(r))
			}
			if fi, err := os.Stat(hostFile); err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
				t.Errorf("host file behind the key links: %v, %v; want it untouched (0600, ours)", fi, err)
			}
			if b, _ := os.ReadFile(hostFile); string(b) != "host only" {
				t.Errorf("host file behind the key links holds %q", b)
			}
			if n := connects.Load(); n != 0 {
				t.Errorf("conch connected %d times to the host socket the link pointed at", n)
			}
			if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
				t.Errorf("the agent's socket at %s: %v, %v; want a socket", sock, fi, err)
			}
		})

		t.Run("removing the sandbox removes its socket directory and key", func(t *testing.T) {
			if err := rt.Remove(ctx, key("!socket:example.org")); err != nil {
				t.Fatal(err)
			}
			if left, _ := filepath.Glob(filepath.Join(root, "*")); len(left) != 0 {
				t.Errorf("left in %s: %q", root, left)
			}
		})
	})
}

// socketFinderProbe looks, as the tools' uid, for every unix socket the
// kernel knows with a path, and for the key: it prints what it could
// connect to or read, or "none".
const socketFinderProbe = `import os, socket
found = []
for line in open("/proc/net/unix").read().splitlines()[1:]:
    f = line.split()
    if len(f) < 8 or not f[7].startswith("/"):
        continue
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    try:
        s.connect(f[7])
        s.sendall(b"x" * 40)
        if s.recv(1):
            found.append("answered:" + f[7])
    except OSError:
        pass
for p in ("/run/conch/key", "/run/conch/agent.sock"):
    if os.path.exists(p):
        found.append(p)
print(" ".join(found) or "none")`

// imposterName finds the impostor by its command line (pkill -f).
const imposterName = "imposter[.]log" // a pattern that does not match itself

// imposterProbe listens where the agent binds its socket and logs how many
// bytes each connection brings before it closes it.
const imposterProbe = `import socket, os
s = socket.socket(socket.AF_UNIX)
s.bind("/run/conch/agent.sock")
s.listen(8)
while True:
    c, _ = s.accept()
    c.settimeout(2)
    n = 0
    try:
        while n < 40:
            b = c.recv(4096)
            if not b:
                break
            n += len(b)
        c.settimeout(0.5)
        while True:
            b = c.recv(4096)
            if not b:
                break
            n += len(b)
    except OSError:
        pass
    c.close()
    with open("/workspace/imposter.log", "a") as f:
        f.write("%d\n" % n)`

// TestContractOverTransports runs the behaviour every conch.Sandbox must
// have against a real container on both engines, over both transports.
func TestContractOverTransports(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		for _, tr := range []string{docker.TransportSocket, docker.TransportExec} {
			t.Run(tr, func(t *testing.T) {
				rt := newRuntime(t, eng, func(o *docker.Options) { withAgent(t)(o); o.Transport = tr })
				sb, err := rt.Sandbox(ctxT(t), key("!contract:example.org"))
				if err != nil {
					t.Fatal(err)
				}
				sandboxdtest.Contract(t, sb)
			})
		}
	})
}
