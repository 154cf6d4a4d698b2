package homeserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"conch/internal/flock"
)

// Version is the dendrite release the tests run against.
const Version = "v0.15.2"

const modulePath = "github.com/element-hq/dendrite"

// commands are the dendrite binaries the tests need.
var commands = []string{"dendrite", "generate-config", "generate-keys"}

// Binaries locates the dendrite executables.
type Binaries struct {
	Dir string
}

// Path returns the path of one dendrite command.
func (b Binaries) Path(cmd string) string { return filepath.Join(b.Dir, cmd) }

// CacheDir is where the dendrite binaries are built once and kept:
// $CONCH_DENDRITE_DIR if set, else <user cache dir>/conch-test/dendrite-<Version>.
func CacheDir() (string, error) {
	if d := os.Getenv("CONCH_DENDRITE_DIR"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("homeserver cache dir: %w", err)
	}
	return filepath.Join(base, "conch-test", "dendrite-"+Version), nil
}

// Prebuild builds the dendrite binaries into CacheDir unless they are already
// there. Concurrent callers (parallel test binaries) serialise on a file lock,
// so dendrite is built once. A cold build takes about three minutes; it needs
// the Go module proxy and a C compiler (dendrite uses cgo SQLite).
func Prebuild(ctx context.Context) (Binaries, error) {
	dir, err := CacheDir()
	if err != nil {
		return Binaries{}, err
	}
	bins := Binaries{Dir: filepath.Join(dir, "bin")}
	if complete(bins) {
		return bins, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("prebuild dendrite: %w", err)
	}
	unlock, err := flock.Lock(ctx, filepath.Join(dir, "build.lock"))
	if err != nil {
		return Binaries{}, fmt.Errorf("prebuild dendrite: %w", err)
	}
	defer unlock()
	if complete(bins) { // built by another process while we waited
		return bins, nil
	}
	if _, err := exec.LookPath("go"); err != nil {
		return Binaries{}, fmt.Errorf("prebuild dendrite: the go command is not on PATH: %w", err)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		return Binaries{}, fmt.Errorf("prebuild dendrite: dendrite needs cgo and no C compiler (gcc) is on PATH: %w", err)
	}
	if err := build(ctx, dir, bins); err != nil {
		return Binaries{}, err
	}
	return bins, nil
}

func markerPath(b Binaries) string { return filepath.Join(b.Dir, ".complete-"+Version) }

func complete(b Binaries) bool {
	if _, err := os.Stat(markerPath(b)); err != nil {
		return false
	}
	for _, c := range commands {
		if _, err := os.Stat(b.Path(c)); err != nil {
			return false
		}
	}
	return true
}

// build installs the commands from a throwaway module that pins dendrite.
// go install pkg@version does not work here: the module proxy refuses the
// version list that go install consults for deprecations.
func build(ctx context.Context, dir string, bins Binaries) error {
	src := filepath.Join(dir, "src")
	if err := os.RemoveAll(src); err != nil {
		return fmt.Errorf("prebuild dendrite: %w", err)
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return fmt.Errorf("prebuild dendrite: %w", err)
	}
	var imports strings.Builder
	pkgs := make([]string, len(commands))
	getArgs := []string{"get"}
	for i, c := range commands {
		pkgs[i] = modulePath + "/cmd/" + c
		fmt.Fprintf(&imports, "\t_ %q\n", pkgs[i])
		getArgs = append(getArgs, pkgs[i]+"@"+Version)
	}
	files := map[string]string{
		"go.mod":   "module conchdendritebuild\n\ngo 1.22\n",
		"tools.go": "//go:build tools\n\npackage tools\n\nimport (\n" + imports.String() + ")\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("prebuild dendrite: %w", err)
		}
	}
	tmpBin := bins.Dir + ".tmp"
	_ = os.RemoveAll(tmpBin)
	env := append(os.Environ(),
		"CGO_ENABLED=1", "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off", "GOTOOLCHAIN=local", "GOBIN="+tmpBin)
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = src
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("prebuild dendrite: go %s: %w\n%s", args[0], err, tail(out.String(), 4000))
		}
		return nil
	}
	if err := run(getArgs...); err != nil {
		return err
	}
	if err := run(append([]string{"install"}, pkgs...)...); err != nil {
		return err
	}
	if err := os.RemoveAll(bins.Dir); err != nil {
		return fmt.Errorf("prebuild dendrite: %w", err)
	}
	if err := os.Rename(tmpBin, bins.Dir); err != nil {
		return fmt.Errorf("prebuild dendrite: %w", err)
	}
	if err := os.WriteFile(markerPath(bins), []byte(Version+"\n"), 0o644); err != nil {
		return fmt.Errorf("prebuild dendrite: %w", err)
	}
	if !complete(bins) {
		return errors.New("prebuild dendrite: binaries missing after install")
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
