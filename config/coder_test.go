package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoderHostsDeprecated: coder.hosts still loads (unknown keys are
// fatal, so old files must keep working) and is reported as deprecated.
func TestCoderHostsDeprecated(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "conch.toml")
	if err := os.WriteFile(file, []byte("[coder]\nhosts = [\"pypi.org\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, []string{"HOME=" + dir})
	if err != nil {
		t.Fatalf("a file with coder.hosts: %v", err)
	}
	d := c.Deprecations()
	if len(d) != 1 || !strings.Contains(d[0], "coder.hosts (pypi.org) is deprecated and ignored") {
		t.Errorf("deprecations %q, want coder.hosts named", d)
	}
	empty := filepath.Join(dir, "empty.toml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load(empty, []string{"HOME=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Deprecations(); len(d) != 0 {
		t.Errorf("deprecations without coder.hosts: %q", d)
	}
}
