package skill

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"conch"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, folder, text string
		broken             string // substring; "" = usable
		warn               string // substring of a warning; "" = none expected
		check              func(t *testing.T, s Skill)
	}{
		{name: "full", folder: "pdf-tools", text: "---\nname: pdf-tools\ndescription: Work with PDFs. Use when a PDF is mentioned.\nlicense: MIT\ncompatibility: needs poppler\nallowed-tools: bash read_file\nmetadata:\n  author: me\n  version: 2\n---\n# PDF\nbody here\n",
			check: func(t *testing.T, s Skill) {
				if s.Name != "pdf-tools" || s.License != "MIT" || s.Compatibility != "needs poppler" || s.Body != "# PDF\nbody here" ||
					len(s.AllowedTools) != 2 || s.Metadata["author"] != "me" || s.Metadata["version"] != "2" {
					t.Errorf("got %+v", s)
				}
				if len(s.Warnings) != 0 {
					t.Errorf("warnings %v, want none", s.Warnings)
				}
			}},
		{name: "crlf and bom", folder: "x", text: "\xef\xbb\xbf---\r\nname: x\r\ndescription: d\r\n---\r\nbody\r\n", check: func(t *testing.T, s Skill) {
			if s.Body != "body" {
				t.Errorf("body %q", s.Body)
			}
		}},
		{name: "no front matter", folder: "x", text: "# Just markdown\n", broken: "no YAML front matter"},
		{name: "unterminated", folder: "x", text: "---\nname: x\ndescription: d\n", broken: "no YAML front matter"},
		{name: "bad yaml", folder: "x", text: "---\nname: [x\ndescription: d\n---\n", broken: "not valid YAML"},
		{name: "unquoted colon", folder: "x", text: "---\nname: x\ndescription: Use when: the user asks\n---\n", warn: "unquoted colon",
			check: func(t *testing.T, s Skill) {
				if s.Description != "Use when: the user asks" {
					t.Errorf("description %q", s.Description)
				}
			}},
		{name: "no description", folder: "x", text: "---\nname: x\n---\nbody", broken: "no description"},
		{name: "empty front matter", folder: "x", text: "---\n---\nbody", broken: "empty"},
		{name: "name differs", folder: "folder", text: "---\nname: other\ndescription: d\n---\n", warn: "differs from its folder",
			check: func(t *testing.T, s Skill) {
				if s.Name != "other" {
					t.Errorf("name %q, want the declared one", s.Name)
				}
			}},
		{name: "no name", folder: "folder", text: "---\ndescription: d\n---\n", warn: "using the folder name"},
		{name: "uppercase name", folder: "My_Skill", text: "---\nname: My_Skill\ndescription: d\n---\n", warn: "does not follow the specification"},
		{name: "path name", folder: "ok-folder", text: "---\nname: ../../etc\ndescription: d\n---\n", warn: "unusable as a directory",
			check: func(t *testing.T, s Skill) {
				if s.Name != "ok-folder" {
					t.Errorf("name %q, want the folder's", s.Name)
				}
			}},
		{name: "unknown field", folder: "x", text: "---\nname: x\ndescription: d\nversion: 3\n---\n", warn: "unknown front matter field(s): version"},
		{name: "too big", folder: "x", text: "---\nname: x\ndescription: d\n---\n" + strings.Repeat("a", MaxSkillFile), broken: "over the"},
		{name: "long description", folder: "x", text: "---\nname: x\ndescription: " + strings.Repeat("d", 1100) + "\n---\n", warn: "over the specification's 1024"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Parse(c.folder, []byte(c.text))
			if c.broken != "" {
				if !strings.Contains(s.Broken, c.broken) {
					t.Fatalf("broken %q, want it to contain %q", s.Broken, c.broken)
				}
				return
			}
			if !s.OK() {
				t.Fatalf("broken: %s", s.Broken)
			}
			if c.warn != "" && !strings.Contains(strings.Join(s.Warnings, "|"), c.warn) {
				t.Errorf("warnings %v, want %q", s.Warnings, c.warn)
			}
			if c.check != nil {
				c.check(t, s)
			}
		})
	}
}

func writeSkill(t *testing.T, dir, folder, text string, files map[string]string) {
	t.Helper()
	p := filepath.Join(dir, folder)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if text != "" {
		if err := os.WriteFile(filepath.Join(p, "SKILL.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range files {
		f := filepath.Join(p, name)
		os.MkdirAll(filepath.Dir(f), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(f, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func md(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\nInstructions of " + name + ".\n"
}

// cursors is an in-memory conch.CursorStore.
type cursors struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *cursors) Cursor(_ context.Context, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name], nil
}

func (c *cursors) SetCursor(_ context.Context, name, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[name] = value
	return nil
}

var _ conch.CursorStore = (*cursors)(nil)

func TestDiscoveryPrecedenceAndBroken(t *testing.T) {
	shared, user := t.TempDir(), t.TempDir()
	bundled := fstest.MapFS{
		"alpha/SKILL.md": {Data: []byte(md("alpha", "bundled alpha"))},
		"beta/SKILL.md":  {Data: []byte(md("beta", "bundled beta"))},
	}
	writeSkill(t, shared, "beta", md("beta", "shared beta"), nil)
	writeSkill(t, shared, "gamma", md("gamma", "shared gamma"), nil)
	writeSkill(t, user, "gamma", md("gamma", "user gamma"), map[string]string{"scripts/run.sh": "#!/bin/sh\necho gamma\n"})
	writeSkill(t, user, "alpha", "no front matter here", nil)       // broken: must not hide the bundled alpha
	writeSkill(t, user, "delta", md("delta", "first delta"), nil)   // usable
	writeSkill(t, user, "0delta", md("delta", "second delta"), nil) // duplicate name in one source
	writeSkill(t, user, "empty", "", nil)                           // no SKILL.md
	writeSkill(t, user, "huge", md("huge", "too big"), map[string]string{"assets/blob": strings.Repeat("x", MaxSkillBytes+1)})
	writeSkill(t, user, ".hidden", md("hidden", "ignored"), nil)
	os.Symlink("/etc/passwd", filepath.Join(user, "gamma", "passwd-link"))

	m := NewManager(Options{Bundled: bundled, SharedDir: shared, UserDir: user, State: &cursors{}})
	c, err := m.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range c.Skills {
		got[s.Name] = s.Description + "@" + string(s.Source)
		if !s.Enabled {
			t.Errorf("%s disabled by default", s.Name)
		}
	}
	want := map[string]string{"alpha": "bundled alpha@bundled", "beta": "shared beta@shared", "gamma": "user gamma@user", "delta": "first delta@user"}
	if len(got) != len(want) {
		t.Errorf("skills %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	g, _ := c.Find("gamma")
	if len(g.Shadows) != 1 || g.Shadows[0] != SourceShared {
		t.Errorf("gamma shadows %v, want [shared]", g.Shadows)
	}
	if !strings.Contains(strings.Join(g.Warnings, "|"), "passwd-link is a symbolic link") {
		t.Errorf("gamma warnings %v, want the symlink named", g.Warnings)
	}
	broken := map[string]string{}
	for _, s := range c.Broken {
		broken[s.Folder] = s.Broken
	}
	for folder, why := range map[string]string{"alpha": "no YAML front matter", "0delta": "duplicate name \"delta\"", "empty": "no SKILL.md", "huge": "over the"} {
		if !strings.Contains(broken[folder], why) {
			t.Errorf("broken %s: %q, want %q", folder, broken[folder], why)
		}
	}
	if _, ok := broken[".hidden"]; ok {
		t.Error("a hidden folder was read")
	}
	// Unreadable or missing directories never stop conch.
	m2 := NewManager(Options{SharedDir: filepath.Join(shared, "missing"), UserDir: "/proc/1/root/nope"})
	if _, err := m2.Catalog(context.Background()); err != nil {
		t.Errorf("missing directories: %v", err)
	}
}

func TestEnableDisableSyncAndPrompt(t *testing.T) {
	user, sbdir := t.TempDir(), filepath.Join(t.TempDir(), "skills")
	writeSkill(t, user, "one", md("one", "First <skill> & more."), map[string]string{"scripts/a.sh": "#!/bin/sh\necho a\n", "references/r.md": "ref"})
	writeSkill(t, user, "two", md("two", "Second skill."), nil)
	state := &cursors{}
	m := NewManager(Options{UserDir: user, State: state, SandboxDir: sbdir})
	ctx := context.Background()
	block := m.PromptBlock(ctx, conch.ToolEnv{})
	for _, want := range []string{"<available_skills>", "<name>one</name>", "First &lt;skill&gt; &amp; more.", "<location>/opt/conch/skills/one</location>", "<name>two</name>"} {
		if !strings.Contains(block, want) {
			t.Errorf("prompt block lacks %q:\n%s", want, block)
		}
	}
	if strings.Contains(block, "Instructions of") {
		t.Error("the prompt carries a skill body; only name and description belong there")
	}
	info, err := os.Stat(filepath.Join(sbdir, "one", "scripts", "a.sh"))
	if err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("script in the sandbox dir: %v %v, want mode 0755", info, err)
	}
	if info, err := os.Stat(filepath.Join(sbdir, "one", "references", "r.md")); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("reference: %v %v, want 0644", info, err)
	}

	twoBefore, err := os.Stat(filepath.Join(sbdir, "two"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetEnabled(ctx, "one", false); err != nil {
		t.Fatal(err)
	}
	if twoAfter, err := os.Stat(filepath.Join(sbdir, "two")); err != nil || !os.SameFile(twoBefore, twoAfter) {
		t.Errorf("an unchanged skill was copied again (%v)", err)
	}
	if v, _ := state.Cursor(ctx, "skill:one"); v != "disabled" {
		t.Errorf("stored state %q, want disabled", v)
	}
	if _, err := os.Stat(filepath.Join(sbdir, "one")); !os.IsNotExist(err) {
		t.Errorf("a disabled skill's files stay in the sandbox dir: %v", err)
	}
	block = m.PromptBlock(ctx, conch.ToolEnv{})
	if strings.Contains(block, "<name>one</name>") || !strings.Contains(block, "<name>two</name>") {
		t.Errorf("after disabling one:\n%s", block)
	}
	if _, _, err := m.Load(ctx, conch.ToolEnv{}, "one"); err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("loading a disabled skill: %v", err)
	}
	if err := m.SetEnabled(ctx, "one", true); err != nil {
		t.Fatal(err)
	}
	s, _, err := m.Load(ctx, conch.ToolEnv{}, "one")
	if err != nil {
		t.Fatal(err)
	}
	body := m.Body(s)
	for _, want := range []string{"Files: /opt/conch/skills/one", "scripts/a.sh", "Instructions of one."} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	// An edited skill is copied again; a new one appears without a restart.
	writeSkill(t, user, "one", md("one", "First, edited."), nil)
	writeSkill(t, user, "three", md("three", "Dropped in later."), nil)
	block = m.PromptBlock(ctx, conch.ToolEnv{})
	if !strings.Contains(block, "First, edited.") || !strings.Contains(block, "<name>three</name>") {
		t.Errorf("after edits:\n%s", block)
	}
	if b, _ := os.ReadFile(filepath.Join(sbdir, "one", "SKILL.md")); !strings.Contains(string(b), "First, edited.") {
		t.Errorf("sandbox copy not refreshed: %s", b)
	}
	if _, _, err := m.Load(ctx, conch.ToolEnv{}, "nope"); err == nil {
		t.Error("loading an unknown skill succeeded")
	}
}

// dirSandbox is a conch.Sandbox whose /workspace is a host directory (file
// operations only).
type dirSandbox struct{ root string }

func (d dirSandbox) host(p string) string {
	return filepath.Join(d.root, strings.TrimPrefix(p, "/workspace"))
}
func (d dirSandbox) ID() string { return "dir" }
func (d dirSandbox) Exec(context.Context, conch.ExecRequest) (conch.ExecResult, error) {
	return conch.ExecResult{}, conch.Errorf(conch.KindUnavailable, "no exec")
}
func (d dirSandbox) ReadFile(_ context.Context, p string, _ int64) ([]byte, error) {
	return os.ReadFile(d.host(p))
}
func (d dirSandbox) WriteFile(context.Context, string, []byte, fs.FileMode) error { return nil }
func (d dirSandbox) ListFiles(_ context.Context, p string) ([]conch.FileInfo, error) {
	es, err := os.ReadDir(d.host(p))
	if err != nil {
		return nil, err
	}
	var out []conch.FileInfo
	for _, e := range es {
		i, _ := e.Info()
		out = append(out, conch.FileInfo{Name: e.Name(), Size: i.Size(), Mode: i.Mode().Perm(), ModTime: i.ModTime(), IsDir: e.IsDir()})
	}
	return out, nil
}

type oneSandbox struct{ sb conch.Sandbox }

func (o oneSandbox) Sandbox(context.Context, conch.ConversationKey) (conch.Sandbox, error) {
	return o.sb, nil
}

func TestWorkspaceSkillsOnlyWhenTrusted(t *testing.T) {
	ws := t.TempDir()
	writeSkill(t, filepath.Join(ws, ".agents", "skills"), "local", md("local", "From the workspace."), nil)
	writeSkill(t, filepath.Join(ws, ".agents", "skills"), "git-workflow", md("git-workflow", "Workspace override."), nil)
	env := conch.ToolEnv{Sandboxes: oneSandbox{dirSandbox{ws}}}
	ctx := context.Background()

	off := NewManager(Options{Bundled: Bundled(), SandboxDir: t.TempDir()})
	if b := off.PromptBlock(ctx, env); strings.Contains(b, "From the workspace") || strings.Contains(b, "Workspace override") {
		t.Errorf("workspace skills read with skills.workspace off:\n%s", b)
	}
	on := NewManager(Options{Bundled: Bundled(), Workspace: true, SandboxDir: t.TempDir()})
	b := on.PromptBlock(ctx, env)
	for _, want := range []string{"From the workspace.", "<location>/workspace/.agents/skills/local</location>", "Workspace override.", "<name>report-long-task</name>"} {
		if !strings.Contains(b, want) {
			t.Errorf("workspace on: missing %q in\n%s", want, b)
		}
	}
	s, _, err := on.Load(ctx, env, "local")
	if err != nil || s.Body != "Instructions of local." || s.Source != SourceWorkspace {
		t.Errorf("load workspace skill: %+v %v", s, err)
	}
	// A workspace without the folder is simply no skills.
	empty := conch.ToolEnv{Sandboxes: oneSandbox{dirSandbox{t.TempDir()}}}
	if b := on.PromptBlock(ctx, empty); !strings.Contains(b, "git-workflow") {
		t.Errorf("empty workspace:\n%s", b)
	}
}

func TestBundledSkillsAreValid(t *testing.T) {
	list, err := Scan(context.Background(), Dir{Source: SourceBundled, FS: Bundled()})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]Skill{}
	for _, s := range list {
		if !s.OK() {
			t.Errorf("bundled %s broken: %s", s.Folder, s.Broken)
		}
		if len(s.Warnings) > 0 {
			t.Errorf("bundled %s warnings: %v", s.Name, s.Warnings)
		}
		if !ValidName(s.Name) || s.Name != s.Folder {
			t.Errorf("bundled %s: name must follow the specification and equal the folder", s.Name)
		}
		names[s.Name] = s
	}
	for _, n := range []string{"report-long-task", "git-workflow"} {
		s, ok := names[n]
		if !ok {
			t.Errorf("bundled skill %s missing", n)
			continue
		}
		// Every script the instructions name exists.
		for _, f := range s.Files {
			if strings.HasPrefix(f, "scripts/") && !strings.Contains(s.Body, f) {
				t.Errorf("%s: %s is not mentioned in the instructions", n, f)
			}
		}
	}
}

// The bundled scripts are run here with the host's bash and git to check
// their logic; TestSkillScriptsRunInSandbox runs them where they belong.
func TestBundledScriptsLogic(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	m := NewManager(Options{Bundled: Bundled(), SandboxDir: filepath.Join(dir, "skills")})
	if _, err := m.Catalog(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, _ := m.Catalog(context.Background())
	if err := m.Sync(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command("bash", args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Env = append(cmd.Env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	prog := filepath.Join(dir, "skills", "report-long-task", "scripts", "progress.sh")
	penv := []string{"PROGRESS_DIR=" + filepath.Join(dir, "progress")}
	if out, err := run(penv, prog, "run", "build", "compile", "--", "echo", "compiled ok"); err != nil || !strings.Contains(out, "compiled ok") {
		t.Fatalf("progress run: %v %s", err, out)
	}
	if _, err := run(penv, prog, "run", "build", "test", "--", "false"); err == nil {
		t.Error("a failing step exited 0")
	}
	out, err := run(penv, prog, "status", "build")
	if err != nil || !strings.Contains(out, "compile: done exit=0") || !strings.Contains(out, "test: done exit=1") {
		t.Errorf("progress status: %v\n%s", err, out)
	}
	if _, err := run(penv, prog, "run", "../x", "s", "--", "true"); err == nil {
		t.Error("a task name with a slash was accepted")
	}

	git := filepath.Join(dir, "skills", "git-workflow", "scripts", "git-snapshot.sh")
	repo := filepath.Join(dir, "repo")
	os.MkdirAll(repo, 0o755)
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644)
	if out, err := run(nil, git, "init", repo); err != nil || !strings.Contains(out, "initialised") {
		t.Fatalf("init: %v %s", err, out)
	}
	if out, err := run(nil, git, "commit", repo, "Nothing"); err == nil {
		t.Errorf("empty commit accepted: %s", out)
	}
	exec.Command("git", "-C", repo, "switch", "-q", "-c", "task").Run()
	os.WriteFile(filepath.Join(repo, "b.txt"), []byte("b\n"), 0o644)
	if out, err := run(nil, git, "commit", repo, "Add b"); err != nil || !strings.Contains(out, "Add b") || !strings.Contains(out, "b.txt") {
		t.Fatalf("commit: %v %s", err, out)
	}
	if out, err := run(nil, git, "summary", repo); err != nil || !strings.Contains(out, "branch task against main") || !strings.Contains(out, "Add b") {
		t.Errorf("summary: %v %s", err, out)
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p, err := Create(dir, "release-notes", `Write release notes: "what changed" and why.`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(p, "SKILL.md"))
	s := Parse("release-notes", b)
	if !s.OK() || len(s.Warnings) > 0 || s.Description != `Write release notes: "what changed" and why.` {
		t.Errorf("scaffold parses as %+v", s)
	}
	if _, err := Create(dir, "release-notes", ""); err == nil {
		t.Error("created over an existing skill")
	}
	for _, bad := range []string{"Bad_Name", "-x", "a--b", "../up", strings.Repeat("a", 65)} {
		if _, err := Create(dir, bad, ""); err == nil {
			t.Errorf("created %q", bad)
		}
	}
}
