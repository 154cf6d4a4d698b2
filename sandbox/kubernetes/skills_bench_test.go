//go:build kubernetes

package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/kube"
)

// BenchmarkSkillsCopy is what the skills cost a pod: "unchanged" is the
// check every use makes (the host hash, cached, against what the pod
// holds), "exec-unchanged" one copy exec the pod answers from its kept
// hash (after a conch restart), "copy" a real copy of a changed set (10
// skills of 3 files); "exec-true" runs `true` over the open agent stream,
// the baseline, in the same run.
//
//	go test -tags kubernetes -run '^$' -bench SkillsCopy ./sandbox/kubernetes/
func BenchmarkSkillsCopy(b *testing.B) {
	e := kube.Sandboxes(b)
	ctx := context.Background()
	dir := b.TempDir()
	for i := range 10 {
		for _, f := range []string{"SKILL.md", "scripts/run.sh", "reference.md"} {
			p := filepath.Join(dir, "skill-"+strconv.Itoa(i), f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, make([]byte, 2048), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	rb := make([]byte, 4)
	_, _ = rand.Read(rb)
	rt, err := New(ctx, Options{InstanceID: "bench-" + hex.EncodeToString(rb), REST: e.User, Namespace: e.Namespace,
		AgentImage: e.AgentImage, Disk: 64 << 20, StartTimeout: 2 * time.Minute, SkillsDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	key := conch.ConversationKey{Channel: "bench", ID: "skills"}
	sb, err := rt.Sandbox(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	name := rt.nameOf(key)
	hash, err := rt.hostSkillsHash()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("exec-true", func(b *testing.B) {
		for b.Loop() {
			if res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
				b.Fatalf("%+v %v", res, err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		box, err := rt.lockBox(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		defer box.unlock()
		for b.Loop() {
			rt.syncSkillsLocked(ctx, box)
		}
	})
	b.Run("exec-unchanged", func(b *testing.B) {
		for b.Loop() {
			if err := rt.copySkills(ctx, name, hash); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if err := rt.copySkills(ctx, name, hash+"-"+strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
