//go:build kubernetes

package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"conch"
	"conch/sandbox/kubernetes"
)

// TestKubernetesSkills: a pod gets the host's skills read-only at
// /opt/conch/skills; calls running at once while a skill changes and one
// is removed all succeed, and the next use shows exactly the new set.
func TestKubernetesSkills(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("alpha/SKILL.md", "alpha v1")
	write("beta/SKILL.md", "beta v1")
	rt := e.runtime(t, e.options(t, func(o *kubernetes.Options) { o.SkillsDir = dir }))
	key := conch.ConversationKey{Channel: "telegram", ID: "skills"}
	sb, err := rt.Sandbox(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, sb, "cat /opt/conch/skills/alpha/SKILL.md /opt/conch/skills/beta/SKILL.md; touch /opt/conch/skills/alpha/x 2>&1 | grep -c Read-only"); got != "alpha v1beta v11" {
		t.Fatalf("skills in the pod: %q", got)
	}

	write("alpha/SKILL.md", "alpha v2")
	if err := os.RemoveAll(filepath.Join(dir, "beta")); err != nil {
		t.Fatal(err)
	}
	write("gamma/SKILL.md", "gamma v1")
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			res, err := sb.Exec(context.Background(), conch.ExecRequest{Argv: []string{"true"}})
			if err != nil || res.ExitCode != 0 {
				t.Errorf("a call while the skills change: %+v %v", res, err)
			}
		})
	}
	wg.Wait()
	got := run(t, sb, "ls /opt/conch/skills; cat /opt/conch/skills/*/SKILL.md")
	if got != "alpha\ngamma\nalpha v2gamma v1" || strings.Contains(got, "beta") {
		t.Fatalf("skills after the change: %q", got)
	}
}
