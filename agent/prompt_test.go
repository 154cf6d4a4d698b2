package agent

import (
	"context"
	"strings"
	"testing"

	"conch"
	"conch/fake"
)

func TestSkillsInSystemPrompt(t *testing.T) {
	var gotEnv conch.ToolEnv
	calls := 0
	h := newHarness(t, nil, func(o *Options) {
		o.Skills = func(_ context.Context, env conch.ToolEnv) string {
			calls++
			gotEnv = env
			return "<available_skills>\n<skill><name>git-workflow</name></skill>\n</available_skills>"
		}
	})
	h.facts.Remember(context.Background(), user, "name", "Alice")
	h.model.Push(fake.Text("ok"))
	if _, err := h.run(t, "hi"); err != nil {
		t.Fatal(err)
	}
	sys := h.model.Requests()[0].System
	skills, memory := strings.Index(sys, "<available_skills>"), strings.Index(sys, "<memory>")
	if skills < 0 || memory < 0 || skills > memory || !strings.HasPrefix(sys, DefaultSystemPrompt) {
		t.Fatalf("system prompt %q: want the base, then the skills block, then memory", sys)
	}
	if calls != 1 || gotEnv.User != user {
		t.Errorf("skills hook called %d times with %+v, want once with the turn's env", calls, gotEnv)
	}

	empty := newHarness(t, nil, func(o *Options) {
		o.Skills = func(context.Context, conch.ToolEnv) string { return "" }
	})
	empty.model.Push(fake.Text("ok"))
	if _, err := empty.run(t, "hi"); err != nil {
		t.Fatal(err)
	}
	if sys := empty.model.Requests()[0].System; strings.Contains(sys, "available_skills") || strings.Contains(sys, "\n\n\n") {
		t.Errorf("no skills: %q", sys)
	}
}
