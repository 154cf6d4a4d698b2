package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/npmpin"
	"conch/sandbox/docker"
)

// referenceInstall pins a reference server from the npm registry by its
// lockfile in testdata (npm install --package-lock-only --ignore-scripts).
func referenceInstall(t *testing.T, name, pkg, version, lockFile string) npmpin.Install {
	t.Helper()
	lock, err := os.ReadFile(lockFile)
	if err != nil {
		t.Fatal(err)
	}
	in, err := npmpin.FromLock(name, name, pkg, version, "", lock)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestReferenceServersInSandbox runs the reference MCP servers from the npm
// registry (everything and filesystem, pinned with their whole dependency
// trees) inside a real sandbox, from the derived image conch builds:
// tools, an image, resources, prompts; the filesystem server works in the
// workspace and refuses paths outside it.
func TestReferenceServersInSandbox(t *testing.T) {
	e := engine.Docker(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	installs := []npmpin.Install{
		referenceInstall(t, "mcp-everything", "@modelcontextprotocol/server-everything", "2026.8.31", "testdata/server-everything.lock.json"),
		referenceInstall(t, "mcp-fs", "@modelcontextprotocol/server-filesystem", "2026.8.31", "testdata/server-filesystem.lock.json"),
	}
	rt, err := docker.New(ctx, docker.Options{Host: e.Host, Engine: e.Name, InstanceID: "mcpref-" + hex.EncodeToString(b), Image: e.Image,
		DataDir: t.TempDir(), CacheDir: e.CacheDir, SandboxdBinary: engine.SandboxdBinary(t), Installs: installs})
	if err != nil {
		t.Fatal(err)
	}
	key := conch.ConversationKey{Channel: "cli", ID: "mcpref-" + hex.EncodeToString(b)}
	t.Cleanup(func() {
		_ = rt.Remove(context.Background(), key)
		rt.Close()
	})
	c, err := New(Options{Servers: []Server{
		{Name: "everything", Argv: []string{"mcp-everything", "stdio"}, Timeout: 60 * time.Second},
		{Name: "fs", Argv: []string{"mcp-fs", "/workspace"}, Timeout: 60 * time.Second},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := conch.ToolEnv{Conversation: key, Sandboxes: rt}
	tools := toolsByName(c.Tools(ctx, env))
	names := keys(tools)
	sort.Strings(names)
	t.Logf("tools: %s", strings.Join(names, " "))
	if st := c.States(key); len(st) != 2 || st[0].Status != "ready" || st[1].Status != "ready" {
		t.Fatalf("states %+v", st)
	}
	call := func(name, args string) conch.ToolOutput {
		t.Helper()
		tool := tools[name]
		if tool == nil {
			t.Fatalf("no tool %s; have %s", name, strings.Join(names, " "))
		}
		out, err := tool.Run(ctx, env, []byte(args))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out
	}
	if out := call("mcp__everything__echo", `{"message":"hello from the sandbox"}`); out.IsError || !strings.Contains(out.Content, "hello from the sandbox") {
		t.Errorf("echo: %+v", out)
	}
	var image string
	for _, n := range names {
		if strings.HasPrefix(n, "mcp__everything__") && strings.Contains(n, "image") {
			image = n
		}
	}
	if image == "" {
		t.Errorf("the everything server offers no image tool")
	} else if out := call(image, `{}`); len(out.Images) == 0 {
		t.Errorf("%s gave no image: %+v", image, out)
	}
	if tools[ResourceToolName] == nil || tools[PromptToolName] == nil {
		t.Fatalf("no resource or prompt tool")
	}
	cat := c.knownCatalog("everything")
	if len(cat.resources) == 0 || len(cat.prompts) == 0 {
		t.Fatalf("everything lists %d resources, %d prompts", len(cat.resources), len(cat.prompts))
	}
	if out := call(ResourceToolName, `{"server":"everything","uri":"`+cat.resources[0].URI+`"}`); out.IsError {
		t.Errorf("read %s: %+v", cat.resources[0].URI, out)
	}
	var simple string
	for _, p := range cat.prompts {
		if len(p.Arguments) == 0 {
			simple = p.Name
		}
	}
	if simple != "" {
		if out := call(PromptToolName, `{"server":"everything","name":"`+simple+`"}`); out.IsError || out.Content == "" {
			t.Errorf("prompt %s: %+v", simple, out)
		}
	}

	if out := call("mcp__fs__write_file", `{"path":"/workspace/note.txt","content":"written by the filesystem server"}`); out.IsError {
		t.Fatalf("write_file: %+v", out)
	}
	sb, err := rt.Sandbox(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, "/workspace/note.txt", 0); err != nil || string(got) != "written by the filesystem server" {
		t.Errorf("the file in the workspace: %q, %v", got, err)
	}
	if out := call("mcp__fs__list_directory", `{"path":"/workspace"}`); !strings.Contains(out.Content, "note.txt") {
		t.Errorf("list_directory: %+v", out)
	}
	if out := call("mcp__fs__list_directory", `{"path":"/etc"}`); !out.IsError {
		t.Errorf("the filesystem server listed /etc, outside its allowed directory: %+v", out)
	}
}
