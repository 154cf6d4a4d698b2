package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"conch"
	"conch/skill"
)

type memCursors map[string]string

func (m memCursors) Cursor(_ context.Context, n string) (string, error) { return m[n], nil }
func (m memCursors) SetCursor(_ context.Context, n, v string) error     { m[n] = v; return nil }

func TestSkillTool(t *testing.T) {
	user := t.TempDir()
	os.MkdirAll(filepath.Join(user, "notes"), 0o755)
	os.WriteFile(filepath.Join(user, "notes", "SKILL.md"), []byte("---\nname: notes\ndescription: Keep notes.\n---\nWrite notes to /workspace/notes.md.\n"), 0o644)
	state := memCursors{}
	m := skill.NewManager(skill.Options{Bundled: skill.Bundled(), UserDir: user, State: state, SandboxDir: t.TempDir()})
	tl := NewSkill(m)
	run := func(args string) conch.ToolOutput {
		out, err := tl.Run(context.Background(), conch.ToolEnv{}, json.RawMessage(args))
		if err != nil {
			t.Fatalf("skill %s: %v", args, err)
		}
		return out
	}
	out := run(`{"name":"notes"}`)
	if out.IsError || !strings.Contains(out.Content, "Write notes to /workspace/notes.md.") || !strings.Contains(out.Content, "/opt/conch/skills/notes") {
		t.Errorf("notes: %+v", out)
	}
	out = run(`{"name":"git-workflow"}`)
	if out.IsError || !strings.Contains(out.Content, "scripts/git-snapshot.sh") || !strings.Contains(out.Content, "# Git workflow") {
		t.Errorf("bundled git-workflow: %+v", out)
	}
	if out := run(`{"name":"nope"}`); !out.IsError || !strings.Contains(out.Content, "available: git-workflow, notes, report-long-task") {
		t.Errorf("unknown: %+v", out)
	}
	state["skill:notes"] = "disabled"
	if out := run(`{"name":"notes"}`); !out.IsError || !strings.Contains(out.Content, "conch skills enable notes") {
		t.Errorf("disabled: %+v", out)
	}
	if out := run(`{}`); !out.IsError {
		t.Errorf("no name: %+v", out)
	}
}
