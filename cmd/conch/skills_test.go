package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
)

// skillEnv is a conch environment with a private HOME and config dir, and a
// user skill dropped into $XDG_CONFIG_HOME/conch/skills.
func skillEnv(t *testing.T, srv *fakellm.Server, dir string) []string {
	t.Helper()
	env := append(testEnv(srv, fakellm.OpenAI, dir), "HOME="+filepath.Join(dir, "home"))
	user := filepath.Join(dir, "config", "conch", "skills")
	write := func(rel, text string, mode os.FileMode) {
		p := filepath.Join(user, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("weather-report/SKILL.md", "---\nname: weather-report\ndescription: Format a weather report. Use when asked about the weather.\n---\n# Weather\nRun scripts/hello.sh and report its line.\n", 0o644)
	write("weather-report/scripts/hello.sh", "#!/bin/sh\necho \"hello from $(basename \"$(dirname \"$(dirname \"$0\")\")\") as $(id -u)\"\n", 0o755)
	write("broken-one/SKILL.md", "no front matter at all\n", 0o644)
	write("dup/SKILL.md", "---\nname: weather-report\ndescription: A second weather skill.\n---\n", 0o644)
	shared := filepath.Join(dir, "home", ".agents", "skills", "git-workflow")
	os.MkdirAll(shared, 0o755)
	os.WriteFile(filepath.Join(shared, "SKILL.md"), []byte("---\nname: git-workflow\ndescription: Shared git workflow override.\n---\nShared body.\n"), 0o644)
	return env
}

func TestSkillsCommands(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := skillEnv(t, srv, dir)

	out, errOut, code := conchRun(t, env, "skills list")
	if code != 0 {
		t.Fatalf("skills list: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"report-long-task", "bundled", "weather-report", "user", "enabled", "Format a weather report.",
		"git-workflow      shared (overrides bundled)", "BROKEN", "broken-one", "no YAML front matter",
		"dup", `duplicate name "weather-report"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("skills list lacks %q:\n%s", want, out)
		}
	}
	if out, errOut, code = conchRun(t, env, "skills disable weather-report"); code != 0 || !strings.Contains(out, "disabled weather-report") {
		t.Fatalf("disable: %d %s %s", code, out, errOut)
	}
	out, _, _ = conchRun(t, env, "skills list")
	if !strings.Contains(out, "weather-report    user                         disabled") && !strings.Contains(out, "disabled  Format a weather") {
		t.Errorf("after disable:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "skills", "weather-report")); !os.IsNotExist(err) {
		t.Errorf("a disabled skill's files stay where sandboxes see them: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "skills", "report-long-task", "scripts", "progress.sh")); err != nil {
		t.Errorf("enabled bundled skill not copied for sandboxes: %v", err)
	}
	conchRun(t, env, "skills enable weather-report")
	if _, err := os.Stat(filepath.Join(dir, "data", "skills", "weather-report", "scripts", "hello.sh")); err != nil {
		t.Errorf("re-enabled skill not copied: %v", err)
	}
	out, _, code = conchRun(t, env, "skills info weather-report")
	for _, want := range []string{"state:         enabled", "source:        user", "in sandboxes:  /opt/conch/skills/weather-report (read-only)", "scripts/hello.sh", "Run scripts/hello.sh"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	if out, _, _ := conchRun(t, env, "skills info broken-one"); !strings.Contains(out, "BROKEN:    SKILL.md has no YAML front matter") {
		t.Errorf("info of a broken skill:\n%s", out)
	}
	if _, errOut, code := conchRun(t, env, "skills enable nope"); code == 0 || !strings.Contains(errOut, `no skill "nope"`) {
		t.Errorf("enable nope: %d %s", code, errOut)
	}
	out, errOut, code = conchRun(t, env, "skills create release-notes")
	if code != 0 || !strings.Contains(out, filepath.Join(dir, "config", "conch", "skills", "release-notes")) {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	if out, _, _ := conchRun(t, env, "skills list"); !strings.Contains(out, "release-notes") {
		t.Errorf("created skill not listed:\n%s", out)
	}
	if _, errOut, code := conchRun(t, env, "skills create Bad_Name"); code == 0 || !strings.Contains(errOut, "lowercase") {
		t.Errorf("create Bad_Name: %d %s", code, errOut)
	}
}

// TestChatHostToolsWithoutEngine: with no container engine the host tools
// are still offered; the system prompt lists the enabled skills; the skill
// tool loads one; web_search says what to configure; web_fetch refuses the
// host's own network.
func TestChatHostToolsWithoutEngine(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	env := skillEnv(t, srv, dir)
	conchRun(t, env, "skills disable report-long-task")
	srv.Push(
		fakellm.ToolCall("skill", `{"name":"weather-report"}`),
		fakellm.ToolCall("web_search", `{"query":"weather in Lisbon"}`),
		fakellm.ToolCall("web_fetch", `{"url":"http://169.254.169.254/latest/meta-data/"}`),
		fakellm.Text("Done."),
	)
	p := startConch(t, env, "chat")
	if got := p.say(t, "what's the weather?"); got != "Done." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	first := reqs[0]
	for _, name := range []string{"web_fetch", "web_search", "skill", "remember"} {
		if _, ok := first.Tool(name); !ok {
			t.Errorf("tool %s not offered without an engine", name)
		}
	}
	for _, want := range []string{"<available_skills>", "<name>weather-report</name>", "Format a weather report.", "<name>git-workflow</name>", "Shared git workflow override."} {
		if !strings.Contains(first.System, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, first.System)
		}
	}
	for _, bad := range []string{"report-long-task", "Run scripts/hello.sh", "broken-one"} {
		if strings.Contains(first.System, bad) {
			t.Errorf("system prompt has %q (disabled, body or broken):\n%s", bad, first.System)
		}
	}
	results := func(i int) string {
		rs := reqs[i].ToolResults()
		if len(rs) == 0 {
			t.Fatalf("request %d has no tool result", i)
		}
		return rs[len(rs)-1].Content
	}
	if r := results(1); !strings.Contains(r, "Run scripts/hello.sh and report its line.") || !strings.Contains(r, "no sandbox runtime") {
		t.Errorf("skill result: %s", r)
	}
	if r := results(2); !strings.Contains(r, "CONCH_SEARCH_BACKEND") {
		t.Errorf("web_search result: %s", r)
	}
	if r := results(3); !strings.Contains(r, "refused") || !strings.Contains(r, "link-local") {
		t.Errorf("web_fetch result: %s", r)
	}
}

// TestSkillScriptRunsInSandbox: on a real engine a dropped-in user skill
// and a bundled one run from /opt/conch/skills inside the sandbox, as the
// sandbox user, read-only.
func TestSkillScriptRunsInSandbox(t *testing.T) {
	testenv.Short(t)
	engine.Each(t, func(t *testing.T, e *engine.Engine) {
		srv := fakellm.New(t)
		dir := t.TempDir()
		buf := make([]byte, 4)
		rand.Read(buf)
		instance := "skills" + hex.EncodeToString(buf)
		env := append(skillEnv(t, srv, dir), engineEnv(t, e, instance)...)
		instanceContainers(t, e.Client(t), instance) // removes them at cleanup
		srv.Push(
			fakellm.ToolCall("skill", `{"name":"weather-report"}`),
			fakellm.ToolCall("bash", `{"command":"sh /opt/conch/skills/weather-report/scripts/hello.sh"}`),
			fakellm.ToolCall("bash", `{"command":"bash /opt/conch/skills/report-long-task/scripts/progress.sh run job step1 -- echo step-output"}`),
			fakellm.ToolCall("bash", `{"command":"touch /opt/conch/skills/weather-report/x"}`),
			fakellm.Text("Ran it."),
		)
		p := startConch(t, env, "chat")
		if got := p.say(t, "weather please"); got != "Ran it." {
			t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
		}
		p.finish(t)
		reqs := srv.Requests()
		result := func(i int) string {
			rs := reqs[i].ToolResults()
			if len(rs) == 0 {
				t.Fatalf("request %d has no tool result", i)
			}
			return rs[len(rs)-1].Content
		}
		if r := result(1); !strings.Contains(r, "Files: /opt/conch/skills/weather-report") {
			t.Errorf("skill tool: %s", r)
		}
		if r := result(2); !strings.Contains(r, "hello from weather-report as 1000") {
			t.Errorf("user skill script in the sandbox: %s", r)
		}
		if r := result(3); !strings.Contains(r, "step-output") || strings.Contains(r, "exit status") && !strings.Contains(r, "exit status 0") {
			t.Errorf("bundled report-long-task script in the sandbox: %s", r)
		}
		if r := result(4); !strings.Contains(strings.ToLower(r), "read-only") {
			t.Errorf("writing into /opt/conch/skills: %s, want a read-only failure", r)
		}
	})
}
