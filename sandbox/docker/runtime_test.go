package docker_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

func withAgent(t testing.TB) func(*docker.Options) {
	bin := engine.SandboxdBinary(t)
	return func(o *docker.Options) { o.SandboxdBinary = bin }
}

// TestHardeningFromInside proves every hardening setting from inside a
// sandbox, on both engines.
func TestHardeningFromInside(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt := newRuntime(t, eng, withAgent(t))
		ctx := ctxT(t)
		sb, err := rt.Sandbox(ctx, key("!hardening:example.org"))
		if err != nil {
			t.Fatalf("Sandbox: %v", err)
		}
		probes := []struct {
			name string
			argv []string
			ok   func(res conch.ExecResult) bool
			want string
		}{
			{"uid 1000", []string{"id", "-u"}, outIs("1000"), "1000"},
			{"gid 1000", []string{"id", "-g"}, outIs("1000"), "1000"},
			{"no capabilities", []string{"grep", "^Cap", "/proc/self/status"}, func(r conch.ExecResult) bool {
				for _, l := range strings.Split(out(r), "\n") {
					if f := strings.Fields(l); len(f) != 2 || strings.Trim(f[1], "0") != "" {
						return false
					}
				}
				return strings.Count(out(r), "\n") == 4
			}, "CapInh/CapPrm/CapEff/CapBnd/CapAmb all zero"},
			{"no new privileges", []string{"grep", "^NoNewPrivs", "/proc/self/status"}, outFields("NoNewPrivs:", "1"), "NoNewPrivs: 1"},
			{"root is read-only", []string{"touch", "/probe"}, failsWith("Read-only file system"), "touch / fails read-only"},
			{"usr is read-only", []string{"sh", "-c", "echo x > /usr/bin/probe"}, failsWith("Read-only file system"), "write /usr fails"},
			{"tmp is a writable tmpfs", []string{"sh", "-c", "touch /tmp/probe && grep ' /tmp ' /proc/mounts"}, func(r conch.ExecResult) bool {
				return r.ExitCode == 0 && strings.HasPrefix(out(r), "tmpfs /tmp tmpfs")
			}, "tmpfs on /tmp"},
			{"workspace is writable", []string{"sh", "-c", "touch /workspace/probe && stat -c %u /workspace"}, outIs("1000"), "owned by 1000"},
			{"mount fails", []string{"mount", "-t", "tmpfs", "none", "/mnt"}, func(r conch.ExecResult) bool { return r.ExitCode != 0 }, "non-zero exit"},
			{"only loopback", []string{"ls", "/sys/class/net"}, outIs("lo"), "lo"},
			{"pids limit", []string{"cat", "/sys/fs/cgroup/pids/pids.max"}, outIs("128"), "128"},
			{"memory limit", []string{"cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}, outIs(strconv.Itoa(512 << 20)), "512 MiB"},
			{"one cpu", []string{"sh", "-c", "echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"}, func(r conch.ExecResult) bool {
				f := strings.Fields(out(r))
				if len(f) != 2 {
					return false
				}
				q, _ := strconv.Atoi(f[0])
				p, _ := strconv.Atoi(f[1])
				return p > 0 && q == p
			}, "quota == period"},
			{"init is pid 1", []string{"cat", "/proc/1/comm"}, func(r conch.ExecResult) bool {
				c := out(r)
				return c == "docker-init" || c == "podman-init" || c == "catatonit" || c == "tini"
			}, "an init"},
			{"no engine socket", []string{"sh", "-c", "ls -d /var/run/docker.sock /run/docker.sock /run/podman/podman.sock " + engine.BaseDir + " 2>/dev/null | wc -l"}, outIs("0"), "none visible"},
			{"nofile limit", []string{"sh", "-c", "ulimit -n"}, outIs("4096"), "4096"},
			{"utf-8 locale", []string{"sh", "-c", "echo $LANG"}, outIs("C.UTF-8"), "C.UTF-8"},
			{"init runs as another user", []string{"stat", "-c", "%u", "/proc/1"}, outIs("1001"), "1001"},
			{"init cannot be signalled", []string{"kill", "-STOP", "1"}, func(r conch.ExecResult) bool { return r.ExitCode != 0 }, "non-zero exit"},
			{"ptrace of init and the agent fails", []string{"python3", "-c", ptraceProbe}, func(r conch.ExecResult) bool {
				f := strings.Fields(out(r))
				return r.ExitCode == 0 && len(f) == 6 && f[0] == "1" && f[3] != "1" &&
					f[1] == "-1" && f[2] == "1" && f[4] == "-1" && f[5] == "1"
			}, "1 -1 1 <agent> -1 1 (EPERM for both)"},
			{"seccomp filter in force", []string{"grep", "^Seccomp:", "/proc/self/status"}, outFields("Seccomp:", "2"), "Seccomp: 2 (filter)"},
			{"namespace and kernel-surface syscalls refused", []string{"python3", "-c", syscallProbe}, outIs(syscallWant), syscallWant},
			{"unshare of mount and network namespaces fails", []string{"sh", "-c", "unshare -m true 2>/dev/null; echo $?; unshare -n true 2>/dev/null; echo $?"}, outFields("1", "1"), "1 1"},
			{"no raw sockets", []string{"python3", "-c", rawSocketProbe}, outIs("EPERM"), "EPERM"},
			{"no egress", []string{"python3", "-c", egressProbe}, outIs("blocked"), "blocked"},
			{"tools present", []string{"sh", "-c", "for c in bash tmux git python3 ps; do command -v $c; done | wc -l"}, outIs("5"), "5"},
		}
		for _, p := range probes {
			t.Run(p.name, func(t *testing.T) {
				res := run(t, sb, p.argv...)
				if !p.ok(res) {
					t.Errorf("%q: got exit %d output %q, want %s", p.argv, res.ExitCode, out(res), p.want)
				}
			})
		}

		t.Run("fork bomb stops at the pids limit", func(t *testing.T) {
			// Forks until the kernel refuses, reports the count, then ends
			// its children. The host (this test) survives.
			bomb := `import os, signal, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60); os._exit(0)
        n += 1
except OSError as e:
    print(n, e.errno, flush=True)
os.killpg(0, signal.SIGKILL)`
			res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"python3", "-c", bomb}, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			f := strings.Fields(out(res))
			if len(f) != 2 {
				t.Fatalf("got output %q (exit %d), want \"<forks> <errno>\"", out(res), res.ExitCode)
			}
			n, _ := strconv.Atoi(f[0])
			if n <= 0 || n >= 128 || f[1] != "11" {
				t.Errorf("got %d forks and errno %s, want fewer than 128 and EAGAIN (11)", n, f[1])
			}
			if r := run(t, sb, "echo", "alive"); out(r) != "alive" {
				t.Errorf("after the bomb: got %q, want alive", out(r))
			}
		})

		t.Run("user namespaces", func(t *testing.T) {
			// Refused by the seccomp profile on both engines (Podman's own
			// default profile allowed it).
			r := run(t, sb, "sh", "-c", "unshare -Ur true 2>&1; echo $?; unshare -Ur unshare -m true 2>/dev/null; echo $?")
			if f := strings.Split(out(r), "\n"); len(f) != 3 || !strings.Contains(f[0], "Operation not permitted") || f[1] != "1" || f[2] != "1" {
				t.Errorf("unshare -Ur; unshare -Ur unshare -m: got %q, want both refused (EPERM, exit 1)", out(r))
			}
		})

		t.Run("long command is killed at its timeout with its children", func(t *testing.T) {
			res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "sleep 601 & sleep 602"}, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != conch.StoppedTimeout {
				t.Errorf("got stopped %q exit %d, want %q", res.Stopped, res.ExitCode, conch.StoppedTimeout)
			}
			if r := run(t, sb, "sh", "-c", "ps -eo args | grep -c '^sleep 60[12]'"); out(r) != "0" {
				t.Errorf("sleeps left after the timeout: got %q, want 0", out(r))
			}
		})

		t.Run("output flood is cut and killed", func(t *testing.T) {
			var seen int64
			res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"yes"}, Timeout: 3 * time.Second, OutputLimit: 4096,
				OnOutput: func(b []byte) { seen += int64(len(b)) }})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("flood: %d bytes streamed in %s, %d kept, stopped %q", seen, res.Duration.Round(time.Millisecond), len(res.Output), res.Stopped)
			if len(res.Output) > 4096 || !res.Truncated || res.Stopped == conch.StoppedNone {
				t.Errorf("got %d bytes kept, truncated %v, stopped %q; want at most 4096, truncated, stopped", len(res.Output), res.Truncated, res.Stopped)
			}
			if r := run(t, sb, "sh", "-c", "ps -eo comm | grep -c '^yes$'"); out(r) != "0" {
				t.Errorf("yes still runs: %q", out(r))
			}
		})

		t.Run("background processes end with the call", func(t *testing.T) {
			if r := run(t, sb, "sh", "-c", "sleep 600 & echo started"); out(r) != "started" {
				t.Fatalf("got %q, want started", out(r))
			}
			if r := run(t, sb, "sh", "-c", "ps -eo args | grep -c '^sleep 600'"); out(r) != "0" {
				t.Errorf("sleep 600 processes after the call: got %q, want 0", out(r))
			}
		})

		t.Run("fork bomb under timeout ends with the call", func(t *testing.T) {
			res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"timeout", "10", "bash", "-c", ":(){ :|:& };:"}, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("bomb: exit %d stopped %q after %s", res.ExitCode, res.Stopped, res.Duration)
			if r := run(t, sb, "sh", "-c", "ps -eo comm | grep -c '^bash$'"); out(r) != "0" {
				t.Errorf("bash processes after the call: got %q, want 0", out(r))
			}
			if r := run(t, sb, "echo", "alive"); out(r) != "alive" {
				t.Errorf("after the bomb: got %q, want alive", out(r))
			}
		})

		t.Run("fork bomb that leaves its session is recovered", func(t *testing.T) {
			res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"python3", "-c", escapedBomb}, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if out(res) != "started" {
				t.Fatalf("got %q (exit %d), want started", out(res), res.ExitCode)
			}
			time.Sleep(2 * time.Second) // let it fill the pids limit
			t.Logf("while the bomb runs: %s", rt.Describe(ctx, key("!hardening:example.org")))
			start := time.Now()
			r, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"echo", "alive"}, Timeout: time.Minute})
			if err != nil || out(r) != "alive" {
				t.Fatalf("after the bomb: got %q, %v; want alive", out(r), err)
			}
			t.Logf("recovered in %s", time.Since(start).Round(time.Millisecond))
			if r := run(t, sb, "sh", "-c", "ps -eo comm | grep -c '^python3$'"); out(r) != "0" {
				t.Errorf("bomb processes after recovery: got %q, want 0", out(r))
			}
			if d := rt.Describe(ctx, key("!hardening:example.org")); !strings.Contains(d, "processes ") || strings.Contains(d, "at its limit") {
				t.Errorf("Describe after recovery: got %q, want a process count below the limit", d)
			}
		})

		t.Run("memory hog is OOM-killed and reported", func(t *testing.T) {
			hog := "b = []\nwhile True: b.append(bytearray(32 << 20))"
			res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"python3", "-c", hog}, Timeout: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stopped != conch.StoppedOOM || res.ExitCode != 137 {
				t.Errorf("got exit %d stopped %q, want 137 %q", res.ExitCode, res.Stopped, conch.StoppedOOM)
			}
			if r := run(t, sb, "echo", "alive"); out(r) != "alive" {
				t.Errorf("after the hog: got %q, want alive", out(r))
			}
			// An ordinary SIGKILL is not an OOM.
			r := run(t, sb, "sh", "-c", "kill -KILL $$")
			if r.ExitCode != 137 || r.Stopped != conch.StoppedNone {
				t.Errorf("self-kill: got exit %d stopped %q, want 137 and no reason", r.ExitCode, r.Stopped)
			}
		})
	})
}

// ptraceProbe tries PTRACE_ATTACH on pid 1 and on its parent (the agent)
// and prints "pid result errno" for each.
// An attach that succeeds is undone at once (the tracee would stay
// stopped), and the target's comm and /proc owner go to stderr.
const ptraceProbe = `import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
for pid in (1, os.getppid()):
    ctypes.set_errno(0)
    r = libc.ptrace(16, pid, None, None)
    e = ctypes.get_errno()
    if r == 0:
        os.waitpid(pid, 0x40000000)
        libc.ptrace(17, pid, None, None)
        print("attached to", open("/proc/%d/comm" % pid).read().strip(), "owner", os.stat("/proc/%d" % pid).st_uid, file=sys.stderr)
    print(pid, r, e)`

// syscallProbe calls each syscall the seccomp profile must refuse and
// prints name=errno: EPERM (1) for all, ENOSYS (38) for clone3 (so glibc
// falls back to clone). Syscall numbers for x86_64 and aarch64.
const syscallProbe = `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
x86 = os.uname().machine == "x86_64"
nr = {"unshare": (272, 97), "setns": (308, 268), "keyctl": (250, 219), "bpf": (321, 280), "userfaultfd": (323, 282),
      "perf_event_open": (298, 241), "io_uring_setup": (425, 425), "clone3": (435, 435)}
args = {"unshare": (0x10000000,), "setns": (0, 0x10000000), "keyctl": (0, 0), "bpf": (0, 0, 0), "userfaultfd": (0,),
        "perf_event_open": (0, 0, -1, -1, 0), "io_uring_setup": (1, 0), "clone3": (0, 0)}
res = []
for name in sorted(nr):
    ctypes.set_errno(0)
    r = libc.syscall(nr[name][0 if x86 else 1], *args[name])
    res.append("%s=%d" % (name, ctypes.get_errno() if r == -1 else -999))
print(" ".join(res))`

const syscallWant = "bpf=1 clone3=38 io_uring_setup=1 keyctl=1 perf_event_open=1 setns=1 unshare=1 userfaultfd=1"

// rawSocketProbe opens a raw socket and prints the error's name.
const rawSocketProbe = `import errno, socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    print("opened")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))`

// egressProbe tries to reach a public address.
const egressProbe = `import socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    print("connected")
except OSError:
    print("blocked")`

// escapedBomb leaves the call's session and forks for ever, each child too,
// retrying when the pids limit refuses.
const escapedBomb = `import os, time
if os.fork() == 0:
    os.setsid()
    while True:
        try:
            if os.fork() == 0:
                try:
                    os.setsid()
                except OSError:
                    pass
        except OSError:
            time.sleep(0.05)
print("started", flush=True)`

func outIs(want string) func(conch.ExecResult) bool {
	return func(r conch.ExecResult) bool { return r.ExitCode == 0 && out(r) == want }
}

func outFields(want ...string) func(conch.ExecResult) bool {
	return func(r conch.ExecResult) bool {
		return r.ExitCode == 0 && strings.Join(strings.Fields(out(r)), " ") == strings.Join(want, " ")
	}
}

func failsWith(msg string) func(conch.ExecResult) bool {
	return func(r conch.ExecResult) bool { return r.ExitCode != 0 && strings.Contains(string(r.Output), msg) }
}

// TestSlugCollision: the seed's slug maps both ids to one container; ours
// must not.
func TestSlugCollision(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt := newRuntime(t, eng, withAgent(t))
		ctx := ctxT(t)
		a, err := rt.Sandbox(ctx, key("!a:b.c"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := rt.Sandbox(ctx, key("!a-b.c"))
		if err != nil {
			t.Fatal(err)
		}
		if a.ID() == b.ID() {
			t.Fatalf("both conversations got container %s", a.ID())
		}
		if err := a.WriteFile(ctx, "only-a.txt", []byte("a"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ReadFile(ctx, "only-a.txt", 0); !errors.Is(err, fs.ErrNotExist) && conch.KindOf(err) != conch.KindNotFound {
			t.Errorf("b reading a's file: got %v, want not found (separate workspaces)", err)
		}
	})
}

// TestRestartReattach: a second Runtime (conch restarted after kill -9)
// reattaches the same running container; files and processes are there.
func TestRestartReattach(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt1 := newRuntime(t, eng, withAgent(t))
		ctx := ctxT(t)
		k := key("!restart:example.org")
		sb1, err := rt1.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb1.WriteFile(ctx, "notes/before.txt", []byte("written before the restart"), 0o600); err != nil {
			t.Fatal(err)
		}
		// A process that must survive: a tmux session.
		if r := run(t, sb1, "tmux", "new-session", "-d", "-s", "keep", "sleep 600"); r.ExitCode != 0 {
			t.Fatalf("tmux: exit %d: %s", r.ExitCode, r.Output)
		}
		// No Close: a killed conch closes nothing.
		rt2 := reopen(t, eng, rt1.opts)
		if err := rt2.Reconcile(ctx); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		sb2, err := rt2.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if sb2.ID() != sb1.ID() {
			t.Errorf("got container %s after restart, want the same %s", sb2.ID(), sb1.ID())
		}
		b, err := sb2.ReadFile(ctx, "/workspace/notes/before.txt", 0)
		if err != nil || string(b) != "written before the restart" {
			t.Errorf("got %q, %v; want the file written before", b, err)
		}
		if r := run(t, sb2, "tmux", "has-session", "-t", "keep"); r.ExitCode != 0 {
			t.Errorf("tmux session gone after restart: exit %d %s", r.ExitCode, r.Output)
		}
	})
}

// TestOrphansRemoved: at start, sandboxes of conversations the store does
// not know are removed with their workspaces; known ones stay.
func TestOrphansRemoved(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt1 := newRuntime(t, eng, nil)
		ctx := ctxT(t)
		keep, drop := key("!keep:example.org"), key("!drop:example.org")
		sbKeep, err := rt1.Sandbox(ctx, keep)
		if err != nil {
			t.Fatal(err)
		}
		sbDrop, err := rt1.Sandbox(ctx, drop)
		if err != nil {
			t.Fatal(err)
		}
		o := rt1.opts
		o.Known = func(context.Context) ([]conch.ConversationKey, error) { return []conch.ConversationKey{keep}, nil }
		rt2 := reopen(t, eng, o)
		if err := rt2.Reconcile(ctx); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		api := eng.Client(t)
		if _, err := api.ContainerInspect(ctx, sbDrop.ID(), client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("orphan container: got %v, want not found", err)
		}
		dropVol := docker.ContainerName(o.InstanceID, drop)
		if _, err := api.VolumeInspect(ctx, dropVol, client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("orphan workspace volume: got %v, want not found", err)
		}
		ins, err := api.ContainerInspect(ctx, sbKeep.ID(), client.ContainerInspectOptions{})
		if err != nil || !ins.Container.State.Running {
			t.Errorf("known sandbox: got %v, want running", err)
		}
	})
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestIdleStopAndRetention: an idle sandbox is stopped and restarted on
// next use with its workspace; after the retention its container goes, the
// workspace stays, and the next use creates a new container on it.
func TestIdleStopAndRetention(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		rt := newRuntime(t, eng, func(o *docker.Options) {
			withAgent(t)(o)
			o.IdleStop, o.Retention, o.SweepEvery = time.Minute, time.Hour, time.Hour
			o.Now = clock.Now
		})
		ctx := ctxT(t)
		api := eng.Client(t)
		running := func(id string) bool {
			ins, err := api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatalf("inspect: %v", err)
			}
			return ins.Container.State.Running
		}
		sb, err := rt.Sandbox(ctx, key("!idle:example.org"))
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.WriteFile(ctx, "kept.txt", []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
		first := sb.ID()

		clock.Add(30 * time.Second)
		if err := rt.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if !running(first) {
			t.Fatal("stopped after 30s, want running until the 1m idle stop")
		}
		clock.Add(31 * time.Second)
		if err := rt.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if running(first) {
			t.Fatal("running after 61s idle, want stopped")
		}
		if b, err := sb.ReadFile(ctx, "kept.txt", 0); err != nil || string(b) != "kept" {
			t.Fatalf("after idle stop: got %q, %v; want kept", b, err)
		}
		if sb.ID() != first || !running(first) {
			t.Errorf("after use: got container %s running=%v, want %s restarted", sb.ID(), running(first), first)
		}

		clock.Add(2 * time.Minute)
		if err := rt.Sweep(ctx); err != nil { // idle stop
			t.Fatal(err)
		}
		clock.Add(time.Hour)
		if err := rt.Sweep(ctx); err != nil { // retention
			t.Fatal(err)
		}
		if _, err := api.ContainerInspect(ctx, first, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Fatalf("after retention: inspect got %v, want not found", err)
		}
		if b, err := sb.ReadFile(ctx, "kept.txt", 0); err != nil || string(b) != "kept" {
			t.Fatalf("after retention: got %q, %v; want the workspace kept", b, err)
		}
		if sb.ID() == first {
			t.Errorf("after retention: got the old container id, want a new container")
		}
	})
}

// TestWarmPool: a new conversation takes a pre-started pool container,
// which becomes its own (renamed, recorded) and survives a restart.
func TestWarmPool(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt := newRuntime(t, eng, func(o *docker.Options) {
			withAgent(t)(o)
			o.WarmPool = 1
		})
		ctx := ctxT(t)
		// Fills at once (conch's own and the background refill's) make
		// the pool full, not fuller.
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := rt.FillPool(ctx); err != nil {
					t.Errorf("FillPool: %v", err)
				}
			})
		}
		wg.Wait()
		if n := rt.PoolSize(); n != 1 {
			t.Fatalf("pool size %d, want 1", n)
		}
		api := eng.Client(t)
		pooled, err := api.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).
			Add("label", docker.LabelInstance+"="+rt.opts.InstanceID).Add("label", docker.LabelPool+"=1")})
		if err != nil || len(pooled.Items) != 1 {
			t.Fatalf("pool containers: %v %d, want 1", err, len(pooled.Items))
		}
		poolID := pooled.Items[0].ID

		k := key("!warm:example.org")
		sb, err := rt.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if sb.ID() != poolID {
			t.Errorf("got container %s, want the pool's %s", sb.ID(), poolID)
		}
		ins, err := api.ContainerInspect(ctx, poolID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.TrimPrefix(ins.Container.Name, "/"), docker.ContainerName(rt.opts.InstanceID, k); got != want {
			t.Errorf("assigned container name %s, want %s", got, want)
		}
		if err := sb.WriteFile(ctx, "warm.txt", []byte("warm"), 0o644); err != nil {
			t.Fatal(err)
		}

		rt.Close()
		rt2 := reopen(t, eng, rt.opts)
		if err := rt2.Reconcile(ctx); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		sb2, err := rt2.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if sb2.ID() != poolID {
			t.Errorf("after restart: got %s, want the assigned pool container %s", sb2.ID(), poolID)
		}
		if b, err := sb2.ReadFile(ctx, "warm.txt", 0); err != nil || string(b) != "warm" {
			t.Errorf("after restart: got %q, %v; want warm", b, err)
		}
		if err := rt2.Remove(ctx, k); err != nil {
			t.Fatal(err)
		}
		if _, err := api.ContainerInspect(ctx, poolID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("after Remove: got %v, want the container gone", err)
		}
		vol := ""
		for _, m := range ins.Container.Mounts {
			if m.Destination == docker.WorkspaceDir {
				vol = m.Name
			}
		}
		if _, err := api.VolumeInspect(ctx, vol, client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("after Remove: volume %s: got %v, want gone", vol, err)
		}
	})
}

// TestAgentUpgrade: conch restarted with a new binary keeps the running
// sandbox and its next agent connection runs the new binary.
func TestAgentUpgrade(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		rt1 := newRuntime(t, eng, withAgent(t))
		ctx := ctxT(t)
		k := key("!upgrade:example.org")
		sb1, err := rt1.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		before := run(t, sb1, "ls", docker.AgentDir)
		// A different binary: the same program with trailing bytes.
		b, err := os.ReadFile(engine.SandboxdBinary(t))
		if err != nil {
			t.Fatal(err)
		}
		newer := filepath.Join(t.TempDir(), "conch")
		if err := os.WriteFile(newer, append(b, "upgrade"...), 0o755); err != nil {
			t.Fatal(err)
		}
		rt1.Close()
		o := rt1.opts
		o.SandboxdBinary = newer
		rt2 := reopen(t, eng, o)
		if err := rt2.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		sb2, err := rt2.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if sb2.ID() != sb1.ID() {
			t.Errorf("upgrade recreated the sandbox: got %s, want %s", sb2.ID(), sb1.ID())
		}
		after := run(t, sb2, "ls", docker.AgentDir)
		if out(after) == out(before) || strings.Contains(out(after), "\n") {
			t.Errorf("agent dir before %q after %q, want one new binary", out(before), out(after))
		}
	})
}
