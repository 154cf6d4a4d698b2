// Package realcli installs the REAL coding-agent CLIs for tests: the npm
// package, pinned, into the shared test cache once (under a file lock, so
// parallel test processes install it once), run by the host's node. The
// sandbox image has no node; Stage lays node and the package out in a host
// directory that a test sandbox sees read-only (terminaltest.Box.AgentDir),
// which works because the host and the sandbox image are the same Debian
// and node needs only glibc and libstdc++.
//
// A missing node or npm, a node older than 20, or an npm install that fails
// (no registry) ends the test through testenv.Missing: a skip normally, a
// failure under CONCH_REQUIRE_REAL=1.
package realcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"conch/internal/flock"
	"conch/internal/testenv"
	"conch/internal/testenv/engine"
)

// GeminiPackage and GeminiVersion are the Gemini CLI the tests run.
const (
	GeminiPackage = "@google/gemini-cli"
	GeminiVersion = "0.61.0"
)

// MinNode is the oldest node major version the CLIs support.
const MinNode = 20

// CLI is an installed CLI package and the node that runs it, on the host.
type CLI struct {
	// Name is the command the package installs ("gemini").
	Name string
	// Node is the host's node binary.
	Node string
	// Prefix is the npm prefix the package is installed in.
	Prefix string
	// Entry is the package's JavaScript entry point, relative to Prefix.
	Entry string
}

type result struct {
	cli        *CLI
	missing    string // component that is missing
	skip       string // why
	err        error
	installing sync.Once
}

var (
	mu    sync.Mutex
	cache = map[string]*result{}
)

// Gemini returns the Gemini CLI, installing it on first use.
func Gemini(tb testing.TB) *CLI {
	tb.Helper()
	return get(tb, "gemini", GeminiPackage, GeminiVersion, "node_modules/@google/gemini-cli/bundle/gemini.js")
}

func get(tb testing.TB, name, pkg, version, entry string) *CLI {
	tb.Helper()
	testenv.Short(tb)
	mu.Lock()
	r, ok := cache[pkg+"@"+version]
	if !ok {
		r = &result{}
		cache[pkg+"@"+version] = r
	}
	mu.Unlock()
	r.installing.Do(func() { install(r, name, pkg, version, entry) })
	switch {
	case r.skip != "":
		testenv.Missing(tb, r.missing, r.skip)
	case r.err != nil:
		tb.Fatalf("realcli: %v", r.err)
	}
	return r.cli
}

func install(r *result, name, pkg, version, entry string) {
	node, err := findNode()
	if err != nil {
		r.missing, r.skip = "node", err.Error()
		return
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		r.missing, r.skip = "npm", "npm is not installed (the real-CLI tests need node >= 20 and npm; Debian 12 ships an older node, so install them from nodejs.org or a NodeSource package)"
		return
	}
	root, err := engine.CacheDir()
	if err != nil {
		r.err = fmt.Errorf("cache dir: %w", err)
		return
	}
	dir := filepath.Join(root, "npm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.err = err
		return
	}
	slug := strings.NewReplacer("@", "", "/", "-").Replace(pkg) + "-" + version
	prefix := filepath.Join(dir, slug)
	cli := &CLI{Name: name, Node: node, Prefix: prefix, Entry: entry}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	unlock, err := flock.Lock(ctx, prefix+".lock")
	if err != nil {
		r.err = fmt.Errorf("lock %s: %w", prefix, err)
		return
	}
	defer unlock()
	if exists(filepath.Join(prefix, entry)) {
		r.cli = cli
		return
	}
	// Install beside the final place and rename, so a half-done install
	// (killed, or out of disk) is never taken for a done one.
	tmp, err := os.MkdirTemp(dir, "."+slug+"-")
	if err != nil {
		r.err = err
		return
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund",
		"--ignore-scripts", "--no-save", "--loglevel=error", pkg+"@"+version)
	cmd.Dir = tmp
	cmd.Env = npmEnv(os.Environ())
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.missing = pkg
		r.skip = fmt.Sprintf("npm install %s@%s failed (%v): %s", pkg, version, err, tail(out, 1500))
		return
	}
	if !exists(filepath.Join(tmp, entry)) {
		r.err = fmt.Errorf("npm install %s@%s: no %s afterwards: %s", pkg, version, entry, tail(out, 1500))
		return
	}
	_ = os.RemoveAll(prefix)
	if err := os.Rename(tmp, prefix); err != nil {
		r.err = fmt.Errorf("install %s: %w", pkg, err)
		return
	}
	r.cli = cli
}

// findNode returns the host's node, if it is recent enough.
func findNode() (string, error) {
	p, err := exec.LookPath("node")
	if err != nil {
		return "", errors.New("node is not installed (the real-CLI tests need node >= 20 and npm; Debian 12 ships an older node)")
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		return "", fmt.Errorf("node: %w", err)
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("node --version: %w", err)
	}
	v := strings.TrimSpace(string(out))
	major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), ".", 2)[0])
	if err != nil {
		return "", fmt.Errorf("node --version: cannot read %q", v)
	}
	if major < MinNode {
		return "", fmt.Errorf("node %s is older than %d", v, MinNode)
	}
	return p, nil
}

// Stage lays the CLI out in dir, a host directory a sandbox sees (read-only)
// at some mount point: dir/bin/node, dir/bin/<Name> and the package under
// dir/pkg. Files are hard links where the filesystem allows, else copies.
// Run Command(mount) in the sandbox to start the CLI.
func (c *CLI) Stage(dir string) error {
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return fmt.Errorf("stage %s: %w", c.Name, err)
	}
	if err := linkOrCopy(c.Node, filepath.Join(bin, "node"), 0o755); err != nil {
		return fmt.Errorf("stage node: %w", err)
	}
	pkg := filepath.Join(dir, "pkg")
	err := filepath.WalkDir(c.Prefix, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(c.Prefix, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(pkg, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return linkOrCopy(p, dst, info.Mode().Perm()|0o444)
		}
		return nil // sockets and the like: not part of a package
	})
	if err != nil {
		return fmt.Errorf("stage %s: %w", c.Name, err)
	}
	if err := os.Symlink(filepath.Join("..", "pkg", c.Entry), filepath.Join(bin, c.Name)); err != nil {
		return fmt.Errorf("stage %s: %w", c.Name, err)
	}
	return nil
}

// Command is the shell command that starts the CLI staged at mount (as the
// sandbox sees Stage's dir), with node on its PATH: to follow the
// environment assignments conch's Coder puts before a profile's Command.
func (c *CLI) Command(mount string) string {
	return "PATH=" + mount + "/bin:\"$PATH\" " + c.Name
}

func linkOrCopy(src, dst string, mode fs.FileMode) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// npmEnv makes node trust the system's CA bundle too: behind a TLS-
// intercepting proxy npm's own cafile covers the registry but not every
// request node makes, and without it installs stall or fail with
// SELF_SIGNED_CERT_IN_CHAIN.
func npmEnv(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "NODE_EXTRA_CA_CERTS=") {
			return env
		}
	}
	for _, bundle := range []string{os.Getenv("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"} {
		if bundle == "" {
			continue
		}
		if _, err := os.Stat(bundle); err == nil {
			return append(env, "NODE_EXTRA_CA_CERTS="+bundle)
		}
	}
	return env
}
