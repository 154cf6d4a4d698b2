package docker

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestExtraMounts(t *testing.T) {
	data := t.TempDir()
	src := filepath.Join(data, "skills")
	ms := []BindMount{{Source: src, Target: "/opt/conch/skills/", ReadOnly: true}}
	if err := prepareMounts(ms, data, true); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{src, filepath.Join(data, "agent", "skills")} {
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			t.Errorf("%s: %v, want a directory (source and the mount point inside the agent directory)", dir, err)
		}
	}
	if got := mountBinds(ms); !slices.Equal(got, []string{src + ":/opt/conch/skills:ro"}) {
		t.Errorf("binds %v", got)
	}
	if mountsKey(nil) != nil || len(mountsKey(ms)) != 1 {
		t.Error("without extra mounts the spec hash must not change")
	}
	for _, bad := range []BindMount{
		{Source: "relative", Target: "/x"},
		{Source: src, Target: "relative"},
		{Source: src, Target: "/"},
		{Source: src, Target: "/workspace/skills"},
		{Source: src, Target: WorkspaceDir},
		{Source: src + ":x", Target: "/x"},
	} {
		if err := prepareMounts([]BindMount{bad}, data, false); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
