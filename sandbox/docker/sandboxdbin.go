package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// installSandboxd copies the sandboxd binary into dir under a content-addressed
// name (conch-<sha256 prefix>) and removes older copies. The directory, not
// the file, is bind-mounted into sandboxes: a container created before an
// upgrade sees the new binary (a file bind mount would keep the old inode)
// and runs it on its next agent connection. Older copies still running in a
// sandbox keep working: an open file outlives its name.
func installSandboxd(src, dir string) (name string, err error) {
	if err := CheckStatic(src); err != nil {
		return "", err
	}
	f, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("install agent: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("install agent: %w", err)
	}
	name = "conch-" + hex.EncodeToString(h.Sum(nil))[:16]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install agent: %w", err)
	}
	dst := filepath.Join(dir, name)
	if _, err := os.Stat(dst); err != nil {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", fmt.Errorf("install agent: %w", err)
		}
		tmp, err := os.CreateTemp(dir, ".conch-*")
		if err != nil {
			return "", fmt.Errorf("install agent: %w", err)
		}
		defer os.Remove(tmp.Name())
		if _, err := io.Copy(tmp, f); err != nil {
			tmp.Close()
			return "", fmt.Errorf("install agent: %w", err)
		}
		if err := tmp.Chmod(0o755); err != nil {
			tmp.Close()
			return "", fmt.Errorf("install agent: %w", err)
		}
		if err := tmp.Close(); err != nil {
			return "", fmt.Errorf("install agent: %w", err)
		}
		if err := os.Rename(tmp.Name(), dst); err != nil {
			return "", fmt.Errorf("install agent: %w", err)
		}
	}
	old, _ := filepath.Glob(filepath.Join(dir, "conch-*"))
	for _, o := range old {
		if filepath.Base(o) != name && strings.HasPrefix(filepath.Base(o), "conch-") {
			_ = os.Remove(o)
		}
	}
	return name, nil
}
