package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"conch/internal/flock"
)

// Version is the Kubernetes release the control plane is built from; the
// etcd server is the one its go.mod names (build/control/go.mod).
const Version = "v1.37.2"

// commands are the binaries built into the cache.
var commands = []string{"kube-apiserver", "etcd"}

// Binaries locates the control plane's executables.
type Binaries struct{ Dir string }

// Path returns the path of one command.
func (b Binaries) Path(cmd string) string { return filepath.Join(b.Dir, cmd) }

// CacheDir is where the binaries are built once and kept:
// $CONCH_KUBE_DIR if set, else <user cache dir>/conch-test/kube-<Version>.
func CacheDir() (string, error) {
	if d := os.Getenv("CONCH_KUBE_DIR"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kube cache dir: %w", err)
	}
	return filepath.Join(base, "conch-test", "kube-"+Version), nil
}

// buildModule is the directory of the separate Go module pinning the
// control plane (its k8s.io/* staging modules replaced to the matching
// v0.x versions).
func buildModule() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("kube: cannot locate the build module")
	}
	dir := filepath.Join(filepath.Dir(file), "build", "control")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("kube: build module: %w", err)
	}
	return dir, nil
}

// Prebuild builds kube-apiserver and etcd into CacheDir unless they are
// there. Concurrent callers serialise on a file lock. A cold build takes
// several minutes (docs/kubernetes.md has the figure); it needs the Go
// module proxy.
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
		return Binaries{}, fmt.Errorf("prebuild kube: %w", err)
	}
	unlock, err := flock.Lock(ctx, filepath.Join(dir, "build.lock"))
	if err != nil {
		return Binaries{}, fmt.Errorf("prebuild kube: %w", err)
	}
	defer unlock()
	if complete(bins) {
		return bins, nil
	}
	src, err := buildModule()
	if err != nil {
		return Binaries{}, err
	}
	tmp := bins.Dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("prebuild kube: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp+"/", "k8s.io/kubernetes/cmd/kube-apiserver", "./etcd")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "GOTOOLCHAIN=local")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return Binaries{}, fmt.Errorf("prebuild kube: go build: %w\n%s", err, tail(out.String(), 4000))
	}
	if err := os.RemoveAll(bins.Dir); err != nil {
		return Binaries{}, fmt.Errorf("prebuild kube: %w", err)
	}
	if err := os.Rename(tmp, bins.Dir); err != nil {
		return Binaries{}, fmt.Errorf("prebuild kube: %w", err)
	}
	if err := os.WriteFile(markerPath(bins), []byte(Version+"\n"), 0o644); err != nil {
		return Binaries{}, fmt.Errorf("prebuild kube: %w", err)
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

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
