// Package engine starts REAL container engines for tests: dockerd and Podman
// (`podman system service`), each on a private socket under
// /tmp/conch-testenv, with its own data directories, and imports the sandbox
// image into each once. An engine that already answers on its socket is
// reused, so `go test ./...` starts each engine once for all packages; it is
// left running afterwards (scripts/testenv-engines.sh stop ends it).
//
// A missing binary, or not being root, skips the test through
// testenv.Missing (a failure under CONCH_REQUIRE_REAL=1).
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sandboximage "conch/images/sandbox"
	"conch/internal/flock"
	"conch/internal/testenv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// BaseDir holds the engines' sockets, data and logs.
const BaseDir = "/tmp/conch-testenv"

// Image is the sandbox image tag imported into every test engine.
const Image = "conch-sandbox:latest"

// Engine is a running engine.
type Engine struct {
	// Name is docker or podman.
	Name string
	// Host is the API address, unix://….
	Host string
	// Image is the sandbox image, present and current.
	Image string
	// CacheDir is the shared test cache (rootfs tarball, agent binary).
	CacheDir string
}

// String names the engine for subtests.
func (e *Engine) String() string { return e.Name }

// Client returns an Engine API client for probing; closed at cleanup.
func (e *Engine) Client(tb testing.TB) *client.Client {
	tb.Helper()
	c, err := client.New(client.WithHost(e.Host))
	if err != nil {
		tb.Fatalf("engine client: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

type result struct {
	eng *Engine
	// skip is a reason to skip (a missing component); err a real failure.
	skip string
	err  error
}

var (
	mu      sync.Mutex
	started = map[string]*result{}
)

// Docker returns the test dockerd, starting it if needed.
func Docker(tb testing.TB) *Engine { return get(tb, "docker") }

// Podman returns the test Podman service, starting it if needed.
func Podman(tb testing.TB) *Engine { return get(tb, "podman") }

// Each runs f as a subtest per engine ("docker", "podman"); an engine that
// is missing skips its subtest only.
func Each(t *testing.T, f func(t *testing.T, e *Engine)) {
	t.Helper()
	for _, name := range []string{"docker", "podman"} {
		t.Run(name, func(t *testing.T) {
			f(t, get(t, name))
		})
	}
}

func get(tb testing.TB, name string) *Engine {
	tb.Helper()
	testenv.Short(tb)
	mu.Lock()
	r, ok := started[name]
	if !ok {
		r = start(name)
		started[name] = r
	}
	mu.Unlock()
	switch {
	case r.skip != "":
		testenv.Missing(tb, name, r.skip)
	case r.err != nil:
		tb.Fatalf("start %s: %v", name, r.err)
	}
	return r.eng
}

// CacheDir is the cache shared by all test processes: os.UserCacheDir()/conch-test.
func CacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	d = filepath.Join(d, "conch-test")
	return d, os.MkdirAll(d, 0o755)
}

func start(name string) *result {
	var bins []string
	switch name {
	case "docker":
		bins = []string{"dockerd", "containerd", "runc"}
	case "podman":
		bins = []string{"podman", "conmon", "runc"}
	}
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			return &result{skip: b + " is not installed (scripts/ci-deps.sh installs it)"}
		}
	}
	if os.Geteuid() != 0 {
		return &result{skip: name + " test engine needs root"}
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		if cache, cerr := CacheDir(); cerr != nil || !exists(sandboximage.RootfsPath(cache)) {
			return &result{skip: "debootstrap is not installed and no cached sandbox rootfs exists (scripts/ci-deps.sh)"}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cache, err := CacheDir()
	if err != nil {
		return &result{err: err}
	}
	dir := filepath.Join(BaseDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &result{err: err}
	}
	sock := filepath.Join(dir, name+".sock")
	e := &Engine{Name: name, Host: "unix://" + sock, Image: Image, CacheDir: cache}
	unlock, err := flock.Lock(ctx, filepath.Join(BaseDir, name+".lock"))
	if err != nil {
		return &result{err: err}
	}
	defer unlock()
	if pid := lostCwd(dir, name); pid > 0 && answers(ctx, e.Host) {
		// Left by an older run whose working directory is gone: its
		// containers cannot start. Replace it.
		if err := stopPid(ctx, pid); err != nil {
			return &result{err: fmt.Errorf("replace %s test engine: %w", name, err)}
		}
	}
	if !answers(ctx, e.Host) {
		if err := launch(ctx, name, dir, sock); err != nil {
			return &result{err: err}
		}
	}
	if err := ensureImage(ctx, e); err != nil {
		return &result{err: err}
	}
	return &result{eng: e}
}

// launch starts the daemon detached (it outlives the test process, so that
// other packages reuse it) and waits until its socket answers.
func launch(ctx context.Context, name, dir, sock string) error {
	_ = os.Remove(sock)
	var cmd *exec.Cmd
	switch name {
	case "docker":
		_ = killStale(filepath.Join(dir, "dockerd.pid"))
		cmd = exec.Command("dockerd",
			"--host", "unix://"+sock,
			"--data-root", filepath.Join(dir, "data"),
			"--exec-root", filepath.Join(dir, "x"),
			"--pidfile", filepath.Join(dir, "dockerd.pid"),
			"--bridge", "none", "--iptables=false", "--ip-masq=false", "--userland-proxy=false")
	case "podman":
		conf := filepath.Join(dir, "containers.conf")
		// crun fails on cgroup v1 hosts and raising rlimits is not permitted
		// here: runc, cgroupfs and explicit ulimits.
		if err := os.WriteFile(conf, []byte(`[containers]
default_ulimits = ["nofile=4096:4096", "nproc=1024:1024"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`), 0o644); err != nil {
			return err
		}
		cmd = exec.Command("podman",
			"--root", filepath.Join(dir, "root"),
			"--runroot", filepath.Join(dir, "run"),
			"--tmpdir", filepath.Join(dir, "tmp"),
			"system", "service", "--time=0", "unix://"+sock)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	}
	logf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The engine outlives this test process: it must not keep the test's
	// working directory (a package directory of a clone that may be
	// deleted), or Podman's conmon fails every container with "Failed to get
	// working directory".
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if name == "podman" {
		// dockerd writes its own pidfile; scripts/testenv-engines.sh reads both.
		_ = os.WriteFile(filepath.Join(dir, "podman.pid"), []byte(fmt.Sprintln(cmd.Process.Pid)), 0o644)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited while starting (%v); log: %s", name, err, tail(filepath.Join(dir, name+".log")))
		case <-deadline:
			return fmt.Errorf("%s did not answer on %s within 90s; log: %s", name, sock, tail(filepath.Join(dir, name+".log")))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if answers(ctx, "unix://"+sock) {
				return nil
			}
		}
	}
}

// killStale ends a daemon left by an earlier run whose socket no longer
// answers (its pidfile would stop a new one from starting).
func killStale(pidfile string) error {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return err
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 1 {
		return errors.New("bad pidfile")
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "dockerd" {
		return os.Remove(pidfile)
	}
	return syscall.Kill(pid, syscall.SIGTERM)
}

func answers(ctx context.Context, host string) bool {
	c, err := client.New(client.WithHost(host))
	if err != nil {
		return false
	}
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = c.Ping(pctx, client.PingOptions{})
	return err == nil
}

// ensureImage imports the sandbox image from the cached rootfs (building it
// with debootstrap the first time) unless the engine has the current one.
func ensureImage(ctx context.Context, e *Engine) error {
	c, err := client.New(client.WithHost(e.Host))
	if err != nil {
		return err
	}
	defer c.Close()
	ins, err := c.ImageInspect(ctx, e.Image)
	if err == nil && ins.Config != nil && ins.Config.Labels[sandboximage.HashLabel] == sandboximage.Hash() {
		return nil
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image: %w", err)
	}
	path, err := sandboximage.CachedRootfs(ctx, sandboximage.RootfsOptions{CacheDir: e.CacheDir})
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: f, SourceName: "-"}, e.Image,
		client.ImageImportOptions{Changes: sandboximage.Changes(e.Image)})
	if err != nil {
		return fmt.Errorf("import image into %s: %w", e.Name, err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("import image into %s: %w", e.Name, err)
	}
	if strings.Contains(string(out), `"error"`) {
		return fmt.Errorf("import image into %s: %s", e.Name, out)
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// SandboxdBinary builds, once per test process, a static binary that serves
// `sandbox-agent` into the shared cache. The go command's build cache makes
// later builds fast.
func SandboxdBinary(tb testing.TB) string {
	tb.Helper()
	agentOnce.Do(func() {
		cache, err := CacheDir()
		if err != nil {
			agentErr = err
			return
		}
		root, err := moduleRoot()
		if err != nil {
			agentErr = err
			return
		}
		// agentmain serves exactly what `conch sandbox-agent` serves
		// (agent.ServeStdio) without compiling every channel and model SDK;
		// CONCH_TEST_AGENT_PKG=./cmd/conch tests the real binary.
		pkg := "./internal/testenv/engine/agentmain"
		if p := os.Getenv("CONCH_TEST_AGENT_PKG"); p != "" {
			pkg = p
		}
		bin := filepath.Join(cache, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			agentErr = err
			return
		}
		tmp := filepath.Join(bin, fmt.Sprintf(".conch-%d", os.Getpid()))
		cmd := exec.Command("go", "build", "-o", tmp, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
			return
		}
		// Content-addressed: test processes of other checkouts build their
		// own agent into the same cache, and a shared name let one
		// replace the other's binary under a running test.
		sum, err := fileSHA(tmp)
		if err != nil {
			agentErr = err
			return
		}
		agentPath = filepath.Join(bin, "conch-"+sum[:16])
		agentErr = os.Rename(tmp, agentPath)
	})
	if agentErr != nil {
		tb.Fatalf("agent binary: %v", agentErr)
	}
	return agentPath
}

func fileSHA(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the conch module")
	}
	return filepath.Dir(mod), nil
}

// pidFile is where the engine launched in dir records its pid.
func pidFile(dir, name string) string {
	if name == "docker" {
		return filepath.Join(dir, "dockerd.pid")
	}
	return filepath.Join(dir, "podman.pid")
}

// lostCwd returns the pid of the running engine if its working directory
// was deleted under it, else 0.
func lostCwd(dir, name string) int {
	b, err := os.ReadFile(pidFile(dir, name))
	if err != nil {
		return 0
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 1 {
		return 0
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil || !strings.HasSuffix(cwd, " (deleted)") {
		return 0
	}
	return pid
}

// stopPid ends a process with SIGTERM and waits for it to go.
func stopPid(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("process %d did not stop: %w", pid, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// Private is a dockerd of one test's own, for tests that restart or break
// the engine (the shared one serves every other test process and must never
// be restarted). It has its own sockets and data under BaseDir/private, the
// sandbox image imported (from the shared cached rootfs: some seconds), and
// is stopped and removed at the test's cleanup.
type Private struct {
	*Engine
	dir, sock string
	// DataRoot is the engine's data root.
	DataRoot string
}

// PrivateOption configures PrivateDocker.
type PrivateOption func(*privateConfig)

type privateConfig struct {
	xfsQuota int64
}

// WithXFSQuota gives the private dockerd a data root on an xfs file system
// of its own (a sparse loop image of size bytes) mounted with project quotas
// (prjquota): its local volume driver then enforces the volume option size=.
// A missing mkfs.xfs (xfsprogs), loop devices or kernel support for xfs
// quotas ends the test through testenv.Missing.
func WithXFSQuota(size int64) PrivateOption {
	return func(c *privateConfig) { c.xfsQuota = size }
}

var privateSeq int

// PrivateDocker starts a private dockerd for t.
func PrivateDocker(t *testing.T, opts ...PrivateOption) *Private {
	t.Helper()
	var cfg privateConfig
	for _, o := range opts {
		o(&cfg)
	}
	base := Docker(t) // the same requirements; and the rootfs is cached
	mu.Lock()
	privateSeq++
	seq := privateSeq
	mu.Unlock()
	dir := filepath.Join(BaseDir, "private", fmt.Sprintf("%d-%d", os.Getpid(), seq))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Private{Engine: &Engine{Name: "docker", Image: base.Image, CacheDir: base.CacheDir}, dir: dir,
		sock: filepath.Join(dir, "docker.sock"), DataRoot: filepath.Join(dir, "data")}
	p.Host = "unix://" + p.sock
	mounted := false
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Logf("stop private dockerd: %v", err)
		}
		if mounted {
			if err := unmount(p.DataRoot); err != nil {
				t.Logf("unmount private dockerd's data root: %v", err)
				return // never remove through a mount
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("remove private dockerd's data: %v", err)
		}
	})
	if cfg.xfsQuota > 0 {
		mountXFSQuota(t, filepath.Join(dir, "data.xfs"), p.DataRoot, cfg.xfsQuota)
		mounted = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := launch(ctx, "docker", dir, p.sock); err != nil {
		t.Fatalf("start private dockerd: %v", err)
	}
	if err := ensureImage(ctx, p.Engine); err != nil {
		t.Fatalf("private dockerd: %v", err)
	}
	return p
}

// mountXFSQuota makes a sparse xfs image of size bytes at img and mounts it
// on dir with project quotas, through a loop device that mount releases at
// the unmount (autoclear).
func mountXFSQuota(t *testing.T, img, dir string, size int64) {
	t.Helper()
	if _, err := exec.LookPath("mkfs.xfs"); err != nil {
		testenv.Missing(t, "xfsprogs", "mkfs.xfs is not installed (scripts/ci-deps.sh installs xfsprogs)")
	}
	if !exists("/dev/loop-control") {
		testenv.Missing(t, "loop devices", "/dev/loop-control is absent (no loop driver, or a container without it)")
	}
	if fss, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(fss), "\txfs\n") {
		testenv.Missing(t, "kernel xfs", "xfs is not in /proc/filesystems")
	}
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("xfs image: %v", err)
	}
	if out, err := exec.Command("mkfs.xfs", "-q", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs %s: %v: %s", img, err, out)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-o", "loop,prjquota", img, dir).CombinedOutput()
	if err == nil {
		return
	}
	// Tell a kernel without xfs quotas (CONFIG_XFS_QUOTA unset: it refuses
	// prjquota and mounts without) from a real failure.
	if plain, perr := exec.Command("mount", "-o", "loop,ro", img, dir).CombinedOutput(); perr == nil {
		if uerr := unmount(dir); uerr != nil {
			t.Fatalf("unmount %s: %v", dir, uerr)
		}
		// A kernel's build options are not something a test machine's
		// setup can install, so this is a skip even under
		// CONCH_REQUIRE_REAL: the refusal path is tested on every machine
		// (TestWorkspaceQuota/docker), the enforcement only where the
		// kernel has xfs quotas.
		t.Skip("the kernel mounts xfs but refuses prjquota (built without CONFIG_XFS_QUOTA), so Docker cannot enforce a volume size here: " +
			strings.TrimSpace(string(out)))
	} else {
		t.Fatalf("mount -o loop,prjquota %s: %v: %s (and without prjquota: %v: %s)", img, err, out, perr, plain)
	}
}

// unmount unmounts dir (lazily if it is busy).
func unmount(dir string) error {
	out, err := exec.Command("umount", dir).CombinedOutput()
	if err == nil {
		return nil
	}
	if lout, lerr := exec.Command("umount", "-l", dir).CombinedOutput(); lerr != nil {
		return fmt.Errorf("umount %s: %v: %s; lazily: %v: %s", dir, err, out, lerr, lout)
	}
	return nil
}

// Stop ends the engine as a service manager would (SIGTERM, then waiting):
// dockerd stops its containers on the way out.
func (p *Private) Stop() error {
	b, err := os.ReadFile(pidFile(p.dir, "docker"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 1 {
		return fmt.Errorf("bad pidfile %q", b)
	}
	if syscall.Kill(pid, 0) != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return stopPid(ctx, pid)
}

// Restart stops the engine and starts it again on the same data: the
// containers it had are there, stopped.
func (p *Private) Restart() error {
	if err := p.Stop(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return launch(ctx, "docker", p.dir, p.sock)
}
