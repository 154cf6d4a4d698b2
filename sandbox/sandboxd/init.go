package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// Init is process 1 of a sandbox that has no engine init (a Kubernetes pod):
// it keeps the container alive and reaps every orphan re-parented to it
// (a daemonised tmux, a tool's grandchildren), so they never pile up as
// zombies against the process limit. It returns on SIGTERM or SIGINT (the
// pod is being deleted) or when ctx ends. The tools' kill(-1) recovery
// leaves it alone: kill(-1) never signals process 1.
func Init(ctx context.Context) error {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	defer signal.Stop(sig)
	for {
		reap()
		select {
		case <-ctx.Done():
			return nil
		case s := <-sig:
			if s == syscall.SIGTERM || s == syscall.SIGINT {
				reap()
				return nil
			}
		}
	}
}

// reap collects every child that has ended, without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// InstallSelf copies the running executable to dir/name (mode 0755,
// written to a temporary name and renamed): an init container puts conch
// into the volume the sandbox container runs it from. It also makes
// dir/skills, where the pod's skills volume is mounted (the volume at dir
// is read-only there, so the mount point must exist in it).
func InstallSelf(dir, name string) (string, error) {
	if err := os.Mkdir(filepath.Join(dir, "skills"), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("install: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	src, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	defer src.Close()
	dst := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, src)
	err = errors.Join(err, tmp.Chmod(0o755), tmp.Close())
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	return dst, nil
}
