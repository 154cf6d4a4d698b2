package kube

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"conch/internal/flock"
)

// PrebuildKubelet builds the kubelet of the real-kubelet tier
// (k8s.io/kubernetes/cmd/kubelet at Version, from the same build module as
// the control plane) into CacheDir()/kubelet unless it is there, and
// returns its path. The control plane's binaries are not touched.
func PrebuildKubelet(ctx context.Context) (string, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kubelet", "kubelet")
	marker := filepath.Join(dir, "kubelet", ".complete-"+Version)
	done := func() bool {
		_, e1 := os.Stat(marker)
		_, e2 := os.Stat(bin)
		return e1 == nil && e2 == nil
	}
	if done() {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("prebuild kubelet: %w", err)
	}
	unlock, err := flock.Lock(ctx, filepath.Join(dir, "build.lock"))
	if err != nil {
		return "", fmt.Errorf("prebuild kubelet: %w", err)
	}
	defer unlock()
	if done() {
		return bin, nil
	}
	src, err := buildModule()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin+".tmp", "k8s.io/kubernetes/cmd/kubelet")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "GOTOOLCHAIN=local")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("prebuild kubelet: go build: %w\n%s", err, tail(out.String(), 4000))
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		return "", fmt.Errorf("prebuild kubelet: %w", err)
	}
	if err := os.WriteFile(marker, []byte(Version+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("prebuild kubelet: %w", err)
	}
	return bin, nil
}
