package docker

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// BindMount is a host directory mounted into every sandbox (the skills
// conch copies for sandboxes, read-only at /opt/conch/skills).
type BindMount struct {
	// Source is an absolute host directory; it is created if missing.
	Source string
	// Target is an absolute path inside the sandbox; not /workspace or
	// below, not the root.
	Target   string
	ReadOnly bool
}

// prepareMounts checks the extra mounts and creates what they need: the
// source directories, and for a target inside the agent directory (itself a
// read-only mount) the mount point in the host's copy of that directory.
func prepareMounts(ms []BindMount, dataDir string, agentMounted bool) error {
	for _, m := range ms {
		t := path.Clean(m.Target)
		switch {
		case !filepath.IsAbs(m.Source):
			return fmt.Errorf("mount source %q is not an absolute path", m.Source)
		case !path.IsAbs(m.Target) || t == "/":
			return fmt.Errorf("mount target %q is not an absolute path below /", m.Target)
		case t == WorkspaceDir || strings.HasPrefix(t, WorkspaceDir+"/"):
			return fmt.Errorf("mount target %q is inside the workspace", m.Target)
		case strings.ContainsAny(m.Source+m.Target, ":,"):
			return fmt.Errorf("mount %s:%s: paths may not contain ':' or ','", m.Source, m.Target)
		}
		if err := os.MkdirAll(m.Source, 0o755); err != nil {
			return fmt.Errorf("mount source: %w", err)
		}
		if rel, ok := strings.CutPrefix(t, AgentDir+"/"); ok && agentMounted {
			if err := os.MkdirAll(filepath.Join(dataDir, "agent", filepath.FromSlash(rel)), 0o755); err != nil {
				return fmt.Errorf("mount point in the agent directory: %w", err)
			}
		}
	}
	return nil
}

// mountBinds renders the extra mounts as engine binds.
func mountBinds(ms []BindMount) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		b := m.Source + ":" + path.Clean(m.Target)
		if m.ReadOnly {
			b += ":ro"
		}
		out = append(out, b)
	}
	return out
}

// mountsKey is what the extra mounts add to the spec hash: a container
// created without them is replaced (its workspace kept). Without extra
// mounts it adds nothing, so the hash is what it was before they existed.
func mountsKey(ms []BindMount) []string {
	if len(ms) == 0 {
		return nil
	}
	return []string{strings.Join(mountBinds(ms), ";")}
}
