package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/moby/moby/client"

	"conch/internal/testenv"
	"conch/internal/testenv/browser"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
)

// TestFirstRun drives a new user's path on a fresh data dir and config, as
// README's first screen tells it, and logs each step's time (the figures in
// docs/performance.md, "First run"): conch init without questions (the key
// proved by the model list, the engine found, the sandbox image built under
// a new name) → conch up → the link init printed, opened in headless
// Chromium → a message whose answer needs a command run in the sandbox.
//
// The image build here imports the test engines' cached root file system;
// CONCH_FIRSTRUN_COLD=1 gives it an empty cache dir, so the build starts
// with debootstrap from the apt mirror, as on a new machine.
func TestFirstRun(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	b := browser.Start(t)
	const key = "sk-first-run"
	srv := fakellm.New(t)
	srv.RequireKey(key)
	dir := t.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "firstrun" + hex.EncodeToString(buf)
	image := "conch-sandbox:" + instance
	cache, initWait := e.CacheDir, 3*time.Minute
	if os.Getenv("CONCH_FIRSTRUN_COLD") == "1" {
		cache, initWait = t.TempDir(), 15*time.Minute
	}
	api := e.Client(t)
	t.Cleanup(func() { _, _ = api.ImageRemove(context.Background(), image, client.ImageRemoveOptions{Force: true}) })
	containers := instanceContainers(t, api, instance)
	addr := freeAddr(t)
	var env []string
	for _, kv := range engineEnv(t, e, instance) {
		if !strings.HasPrefix(kv, "CONCH_SANDBOX_IMAGE=") && !strings.HasPrefix(kv, "CONCH_SANDBOX_CACHE_DIR=") {
			env = append(env, kv)
		}
	}
	env = append(append(initEnv(dir), env...), "CONCH_SANDBOX_IMAGE="+image, "CONCH_SANDBOX_CACHE_DIR="+cache, "CONCH_GATEWAY_LISTEN="+addr)

	type step struct {
		name string
		took time.Duration
	}
	var steps []step
	begin := time.Now()
	mark := func(name string, since time.Time) { steps = append(steps, step{name, time.Since(since)}) }

	t0 := time.Now()
	out, errOut, code := conchRunStdinWithin(t, env, "init --non-interactive --provider openai --base-url "+srv.BaseURL(fakellm.OpenAI)+
		" --model test-model --engine "+e.Name+" --api-key-stdin", key+"\n", initWait)
	if code != 0 {
		t.Fatalf("conch init: exit %d\n%s\n%s", code, out, errOut)
	}
	link := strings.TrimSpace(out)
	if !strings.Contains(errOut, "Sandbox image ready") || !strings.Contains(link, "/login?token=") {
		t.Fatalf("conch init did not build the image or print the link:\n%s\n%s", out, errOut)
	}
	mark("conch init (key checked, engine found, sandbox image built)", t0)

	t0 = time.Now()
	p := startConch(t, env, "up")
	p.waitStderr(t, "conch is up")
	mark("conch up until \"conch is up\"", t0)

	t0 = time.Now()
	ctx := b.Context()
	browser.Run(t, ctx, "open the link conch init printed",
		chromedp.Navigate(link),
		chromedp.WaitVisible(`#conn.connected`, chromedp.ByQuery),
	)
	mark("the link opened in Chromium, chat connected", t0)

	t0 = time.Now()
	srv.Push(fakellm.ToolCall("bash", `{"command":"id -un"}`), fakellm.Text("You are conch in there."))
	browser.Run(t, ctx, "first message",
		chromedp.SendKeys("#input", "who am I on my computer?", chromedp.ByID),
		enter(),
		chromedp.WaitVisible(`//div[contains(@class,"assistant")][contains(., "You are conch in there.")]`, chromedp.BySearch),
	)
	mark("first answer computed in the sandbox (container created)", t0)
	if res := lastToolResult(t, srv); !strings.HasSuffix(strings.TrimSpace(res), "\n\nconch") {
		t.Fatalf("the command's result: %q", res)
	}
	if n := len(containers()); n != 1 {
		t.Fatalf("%d sandboxes, want 1", n)
	}
	p.stop(t)
	mark("total", begin)

	var table strings.Builder
	fmt.Fprintf(&table, "| step | time |\n|---|---|\n")
	for _, s := range steps {
		fmt.Fprintf(&table, "| %s | %.1f s |\n", s.name, s.took.Seconds())
	}
	t.Logf("first run (engine %s, cache %s):\n%s", e.Name, map[bool]string{true: "cold", false: "warm"}[cache != e.CacheDir], table.String())
}
