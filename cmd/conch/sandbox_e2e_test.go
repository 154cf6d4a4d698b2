package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
)

// TestChatSandboxSurvivesKill runs `conch chat` against a real engine: a
// file written in the conversation's sandbox is there after kill -9 and a
// restart, in the same container.
func TestChatSandboxSurvivesKill(t *testing.T) {
	testenv.Short(t)
	engine.Each(t, func(t *testing.T, e *engine.Engine) {
		srv := fakellm.New(t)
		dir := t.TempDir()
		buf := make([]byte, 4)
		rand.Read(buf)
		instance := "e2e" + hex.EncodeToString(buf)
		env := append(testEnv(srv, fakellm.OpenAI, dir), engineEnv(t, e, instance)...)
		api := e.Client(t)
		containers := instanceContainers(t, api, instance)

		srv.Push(fakellm.ToolCall("write_file", `{"path":"note.txt","content":"written before the kill"}`), fakellm.Text("Saved."))
		p := startConch(t, env, "chat")
		if got := p.say(t, "save a note"); got != "Saved." {
			t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
		}
		if res := lastToolResult(t, srv); strings.Contains(res, "error") {
			t.Fatalf("write_file failed: %s", res)
		}
		before := containers()
		if len(before) != 1 {
			t.Fatalf("containers after the first turn: %v, want one", before)
		}
		waitNoUnfinished(t, filepath.Join(dir, "data", "conch.db"))
		p.kill9(t)

		srv.Push(fakellm.ToolCall("bash", `{"command":"cat /workspace/note.txt"}`), fakellm.Text("Read it."))
		p = startConch(t, env, "chat")
		if got := p.say(t, "read the note"); got != "Read it." {
			t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
		}
		p.finish(t)
		if res := lastToolResult(t, srv); !strings.Contains(res, "written before the kill") {
			t.Fatalf("bash result after restart: %q", res)
		}
		if after := containers(); len(after) != 1 || after[0] != before[0] {
			t.Fatalf("containers after restart %v, want the same %v", after, before)
		}
		// Both turns reached the agent over its socket: one exec ever (the
		// agent's start), the restarted conch dialled the same socket.
		if socks, _ := filepath.Glob(filepath.Join(dir, "data", "sockets", "*.sock")); len(socks) != 1 {
			t.Errorf("agent sockets %q, want one", socks)
		}
		ins, err := api.ContainerInspect(t.Context(), before[0], client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(ins.Container.ExecIDs); n != 1 {
			t.Errorf("container has %d execs, want 1 (the agent's start; the restart reattached over the socket)", n)
		}
	})
}

func lastToolResult(t *testing.T, srv *fakellm.Server) string {
	t.Helper()
	last, ok := srv.Last()
	if !ok {
		t.Fatal("no request")
	}
	rs := last.ToolResults()
	if len(rs) == 0 {
		t.Fatalf("last request carries no tool result: %+v", last.Messages)
	}
	return rs[len(rs)-1].Content
}

// engineEnv points conch at the test engine e, as the conch instance
// instance (whose containers instanceContainers removes).
func engineEnv(t testing.TB, e *engine.Engine, instance string) []string {
	return []string{
		"CONCH_SANDBOX_ENGINE=" + e.Name,
		"CONCH_SANDBOX_HOST=" + e.Host,
		"CONCH_SANDBOX_IMAGE=" + e.Image,
		"CONCH_SANDBOX_CACHE_DIR=" + e.CacheDir,
		"CONCH_SANDBOX_SANDBOXD_BINARY=" + engine.SandboxdBinary(t),
		"CONCH_INSTANCE_ID=" + instance,
	}
}

// instanceContainers lists the ids of the containers of a conch instance and
// removes them (with their volumes) when the test ends.
func instanceContainers(t testing.TB, api *client.Client, instance string) func() []string {
	t.Helper()
	list := func() []string {
		t.Helper()
		res, err := api.ContainerList(context.Background(), client.ContainerListOptions{
			All: true, Filters: make(client.Filters).Add("label", "conch.instance="+instance),
		})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range res.Items {
			ids = append(ids, c.ID)
		}
		return ids
	}
	t.Cleanup(func() {
		for _, id := range list() {
			api.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	})
	return list
}
