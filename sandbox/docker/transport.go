package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"conch/sandbox/sandboxd"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// How conch reaches a sandbox's agent (docs/decisions/2026-11-26-sandboxd-unix-socket.md).
const (
	// TransportSocket: sandboxd listens on a unix socket in a per-container
	// host directory bind-mounted at SocketDir; conch dials it directly.
	// It needs the engine on this machine (a unix:// host).
	TransportSocket = "socket"
	// TransportExec: every connection is one Engine API exec of
	// `conch sandbox-agent` whose stdio the engine relays (remote engines,
	// and the fallback).
	TransportExec = "exec"
)

// SocketDir is where a container sees its socket directory.
const SocketDir = "/run/conch"

const (
	socketName  = "agent.sock"
	keyFileName = "key"
	// agentReadyTimeout bounds the wait for a started agent's socket.
	agentReadyTimeout = 20 * time.Second
)

// useSocket reports whether new containers get the socket transport.
func (r *Runtime) useSocket() bool {
	return r.agentName != "" && r.transport == TransportSocket
}

// transportFor picks the transport from the option and the engine's address.
func transportFor(opt, host string) (string, error) {
	local := strings.HasPrefix(host, "unix://")
	switch opt {
	case "", "auto":
		if local {
			return TransportSocket, nil
		}
		return TransportExec, nil
	case TransportSocket:
		if !local {
			return "", fmt.Errorf("sandbox transport %q needs the engine on this machine (a unix:// host), not %s", opt, host)
		}
		return opt, nil
	case TransportExec:
		return opt, nil
	}
	return "", fmt.Errorf("sandbox transport %q: want auto, socket or exec", opt)
}

// socketsRoot holds one directory per container (bind-mounted at
// SocketDir) and conch's copy of each container's key beside it. It is
// 0700 and the data dir's owner's: no other host user reaches a socket.
func (r *Runtime) socketsRoot() string { return filepath.Join(r.opts.DataDir, "sockets") }

// newSocketDir makes a fresh container's socket directory and returns its
// host path. The directory itself is open to every uid (the container's
// tools uid must create the socket in it, and with rootless Podman that uid
// is a sub-uid conch cannot chown to); its parent is what keeps host users
// out.
func (r *Runtime) newSocketDir() (string, error) {
	root := r.socketsRoot()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	dir := filepath.Join(root, randomHex(8))
	if err := os.Mkdir(dir, 0o777); err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	return dir, nil
}

// keyPath is conch's copy of the key of the container whose socket
// directory is dir (outside the directory: the container never sees it).
func keyPath(dir string) string { return dir + ".key" }

// writeKey gives the container behind dir a new key: conch's copy, and the
// one its agent reads (and removes) at start. It is called before the
// container starts, when no tool process exists yet (and when a dead agent
// is started again).
//
// The directory is writable from inside the container, so the agent's copy
// is owned and moded through its open file, never by path (a path the
// tools replaced with a symlink would make conch chown a host file).
func (r *Runtime) writeKey(dir string) error {
	k := sandboxd.NewKey()
	if err := writeFileAtomic(keyPath(dir), k, 0o600, nil); err != nil {
		return fmt.Errorf("socket key: %w", err)
	}
	// The agent runs as the tools' uid: rootful, conch hands the file to
	// it; rootless, conch's own uid is the container's root and the file
	// must be readable to reach the sub-uid (the directory above keeps
	// host users out either way).
	own := func(f *os.File) error { return f.Chmod(0o644) }
	if uid, gid, ok := numericUser(r.profile.User); ok && os.Geteuid() == 0 {
		own = func(f *os.File) error { return f.Chown(uid, gid) }
	}
	if err := writeFileAtomic(filepath.Join(dir, keyFileName), k, 0o600, own); err != nil {
		return fmt.Errorf("socket key: %w", err)
	}
	return nil
}

// writeFileAtomic writes path through a new temporary file (O_EXCL: never
// an existing file or link), which own, if set, adjusts by its descriptor,
// and renames it into place.
func writeFileAtomic(path string, data []byte, mode os.FileMode, own func(*os.File) error) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && own != nil {
		err = own(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func numericUser(u string) (uid, gid int, ok bool) {
	us, gs, _ := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	if err != nil {
		return 0, 0, false
	}
	gid = uid
	if gs != "" {
		if gid, err = strconv.Atoi(gs); err != nil {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

// socketDirOf is the host directory mounted at SocketDir in c ("" when c
// was made for the exec transport).
func socketDirOf(c container.InspectResponse) string {
	for _, m := range c.Mounts {
		if m.Destination == SocketDir && m.Source != "" {
			return m.Source
		}
	}
	return ""
}

// removeSocketDir forgets a removed container's socket directory and key.
func (r *Runtime) removeSocketDir(dir string) {
	if dir == "" || filepath.Dir(dir) != r.socketsRoot() {
		return
	}
	_ = os.RemoveAll(dir)
	_ = os.Remove(keyPath(dir))
	_ = os.RemoveAll(hostSocket(dir)) // a directory a tool put there is moved out whole
	r.mu.Lock()
	delete(r.launched, dir)
	r.mu.Unlock()
}

// sweepSocketDirs removes the socket directories no container of the
// instance mounts (their containers were removed while conch was away).
func (r *Runtime) sweepSocketDirs(used map[string]bool) {
	ents, err := os.ReadDir(r.socketsRoot())
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(r.socketsRoot(), e.Name())
		dir := strings.TrimSuffix(strings.TrimSuffix(p, ".key"), ".sock")
		if !used[dir] {
			r.removeSocketDir(dir)
		}
	}
}

// startAgent starts the container's listening agent with one detached exec
// (it lives as long as the container; docs/decisions/2026-11-26-sandboxd-starts-by-one-exec.md).
func (r *Runtime) startAgent(ctx context.Context, id, name string) error {
	ex, err := r.api.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd: []string{AgentDir + "/" + r.agentName, "sandbox-agent",
			"--listen", SocketDir + "/" + socketName, "--key-file", SocketDir + "/" + keyFileName},
		WorkingDir: WorkspaceDir, User: r.profile.User,
	})
	if err != nil {
		if notRunning(err) {
			return fmt.Errorf("start sandbox agent in %s: %w: %v", name, errContainerGone, err)
		}
		return r.engineErr("start sandbox agent in "+name, err)
	}
	if _, err := r.api.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return r.engineErr("start sandbox agent in "+name, err)
	}
	return nil
}

// startContainer gives a socket container a new key, starts it and its
// agent. dir is its socket directory ("" for the exec transport).
func (r *Runtime) startContainer(ctx context.Context, id, name, dir string) error {
	if dir != "" {
		_ = os.RemoveAll(hostSocket(dir)) // the last agent's, dead with its container
		_ = os.RemoveAll(filepath.Join(dir, socketName))
		if err := r.writeKey(dir); err != nil {
			return err
		}
	}
	if _, err := r.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return err
	}
	if dir == "" {
		return nil
	}
	return r.launchAgent(ctx, id, name, dir)
}

// launchAgent starts the agent of a container just started (startContainer
// wrote its key before the start, when no tool process could read it).
func (r *Runtime) launchAgent(ctx context.Context, id, name, dir string) error {
	r.mu.Lock()
	r.launched[dir] = launch{at: time.Now()}
	r.mu.Unlock()
	return r.startAgent(ctx, id, name)
}

// claimRestart reports whether this dial is the one to restart dir's
// container for its agent: none was launched lately and none is being
// launched (two dials finding the agent gone at once restart it once; the
// other waits for the new agent).
func (r *Runtime) claimRestart(dir string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.launched[dir]; ok && !l.up && time.Since(l.at) < agentReadyTimeout {
		return false
	}
	r.launched[dir] = launch{at: time.Now()}
	return true
}

// restartForAgent restarts a running container whose agent does not listen
// (it died, or a tool killed it: they share a uid). A new agent needs a new
// key, and the one moment a key can be put where the agent reads it without
// a tool able to read it too is before the container starts: so the
// container is stopped and started again. Its processes, terminals
// included, end (they are reported gone); its workspace stays.
func (r *Runtime) restartForAgent(ctx context.Context, id, name, dir string) error {
	timeout := 0
	if _, err := r.api.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("restart %s for its agent: %w: %v", name, errContainerGone, err)
		}
		return r.engineErr("restart "+name+" for its agent", err)
	}
	return r.startContainer(ctx, id, name, dir)
}

// launch is this conch's last start of a container's agent.
type launch struct {
	at time.Time
	// up: its socket was taken, so it did start.
	up bool
}

// awaitingAgent reports whether dir's agent was launched by this conch
// lately and has not been seen listening yet: then it is waited for, not
// launched again.
func (r *Runtime) awaitingAgent(dir string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.launched[dir]
	return ok && !l.up && time.Since(l.at) < agentReadyTimeout
}

func (r *Runtime) agentUp(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.launched[dir]; ok {
		l.up = true
		r.launched[dir] = l
	}
}

// hostSocket is where conch keeps the agent's listening socket once it
// has taken it out of the container's directory (beside the key, outside
// every container's view).
func hostSocket(dir string) string { return dir + ".sock" }

// socketDial is the socket transport's sandboxd.DialFunc for container id
// behind dir. The agent binds its socket in the container's directory;
// conch moves it out to hostSocket(dir), which no process in the sandbox
// can see, and dials it there. A socket that is missing, refuses, or
// answers without the key (the agent died, or something else was found)
// restarts the container for a new agent with a new key (restartForAgent),
// once per dial; a just-launched agent is waited for. A dial that runs out
// of time is only an error: a slow agent is not a missing one.
func (r *Runtime) socketDial(id, name, dir string) sandboxd.DialFunc {
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		path := hostSocket(dir)
		relaunched := false
		wait := 100 * time.Microsecond
		for {
			key, err := os.ReadFile(keyPath(dir))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("dial sandbox agent in %s: key: %w", name, err)
			}
			if err == nil {
				c, derr := dialUnix(ctx, path, key)
				if derr == nil {
					return c, nil
				}
				if ctx.Err() != nil || errors.Is(derr, os.ErrDeadlineExceeded) {
					return nil, fmt.Errorf("dial sandbox agent in %s: %w", name, derr)
				}
				if !errors.Is(derr, sandboxd.ErrHandshake) && !errors.Is(derr, syscall.ENOENT) && !errors.Is(derr, syscall.ECONNREFUSED) {
					return nil, fmt.Errorf("dial sandbox agent in %s: %w", name, derr)
				}
				err = derr
			}
			// A freshly started agent's socket: take it out of the
			// container's reach, then dial it.
			if rerr := os.Rename(filepath.Join(dir, socketName), path); rerr == nil {
				// Whatever was there came from inside the container: only
				// a socket is dialled (a link would point conch anywhere
				// on the host).
				if fi, lerr := os.Lstat(path); lerr != nil || fi.Mode().Type() != os.ModeSocket {
					_ = os.RemoveAll(path) // a directory too; RemoveAll follows no link
					r.log.Warn("sandbox agent: refused a non-socket in the socket directory", "container", name)
				} else {
					r.agentUp(dir)
				}
				continue
			}
			if !r.awaitingAgent(dir) {
				if relaunched {
					return nil, fmt.Errorf("dial sandbox agent in %s: no agent listening %s after its start: %w (%v)", name, agentReadyTimeout, errAgentGone, err)
				}
				if r.claimRestart(dir) {
					relaunched = true
					r.log.Warn("sandbox agent not listening: restarting its container for a new one (its processes and terminals end; the workspace stays)", "container", name, "err", err)
					if err := r.restartForAgent(ctx, id, name, dir); err != nil {
						return nil, err
					}
				}
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			wait = min(wait*2, time.Millisecond)
		}
	}
}

// errAgentGone: the container runs but its agent does not listen.
var errAgentGone = errors.New("sandbox agent not listening")

// dialUnix dials path, through /proc/self/fd when it is longer than a
// socket address may be.
func dialUnix(ctx context.Context, path string, key []byte) (io.ReadWriteCloser, error) {
	if len(path) < 100 {
		return sandboxd.DialSocket(ctx, path, key)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return sandboxd.DialSocket(ctx, fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path)), key)
}
