package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv/fakellm"
)

// runConch runs one conch command to its end and returns its stdout.
func runConch(t *testing.T, env []string, args string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(env, "CONCH_TEST_ARGS="+args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("conch %s: %v; stderr:\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// usageRow finds the row of group in `conch usage` output and returns its
// fields after the group: calls, input, cached, output, estimated, usd.
func usageRow(t *testing.T, out, group string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 7 && f[0] == group {
			return f[1:]
		}
	}
	t.Fatalf("no row %q in:\n%s", group, out)
	return nil
}

// TestChatUsageAndBudget drives `conch chat` with the SQLite store through
// each provider's SDK: the usage the provider reports (cached tokens in
// its own form) is summed exactly by `conch usage`, which needs no model
// configured; a budget then stops the next turn before its model call,
// with the message, a stopped turn and an audit record. Each provider's run
// has a budget of another scope: a conversation's (summed from its calls),
// a person's and everybody's (read from the store's days' sums).
func TestChatUsageAndBudget(t *testing.T) {
	for provider, budget := range map[fakellm.Provider]string{
		fakellm.OpenAI:    "conversation_daily_tokens",
		fakellm.Anthropic: "person_daily_tokens",
		fakellm.Gemini:    "daily_tokens",
	} {
		t.Run(string(provider), func(t *testing.T) {
			srv := fakellm.New(t)
			dir := t.TempDir()
			env := append(testEnv(srv, provider, dir), "CONCH_BUDGET_"+strings.ToUpper(budget)+"=12000")
			srv.Push(
				fakellm.ToolCall("remember", `{"key":"name","value":"Alice"}`).Usage(4000, 25).Cached(3072),
				fakellm.Text("Noted, Alice.").Usage(4100, 7).Cached(4000),
			)
			p := startConch(t, env, "chat")
			if got := p.say(t, "I am Alice."); got != "Noted, Alice." {
				t.Fatalf("reply %q", got)
			}
			// 8132 tokens used: the next request (its estimate) passes
			// 12000. Nothing is scripted: a call would fail the reply.
			got := p.say(t, "What did I say?")
			if !strings.Contains(got, "budget."+budget+")") || !strings.Contains(got, "8132 of the daily limit of 12.0k tokens") {
				t.Fatalf("reply %q: want the budget's message", got)
			}
			p.finish(t)
			if n := srv.Count(); n != 2 {
				t.Errorf("model asked %d times, want 2 (none after the budget)", n)
			}
			audit, err := os.ReadFile(filepath.Join(dir, "data", "logs", "audit.jsonl"))
			if err != nil || !strings.Contains(string(audit), `"budget_refused"`) {
				t.Errorf("audit log lacks the refusal (%v):\n%s", err, audit)
			}

			// `conch usage` reads the store alone: no model configured.
			bare := append(os.Environ(), "CONCH_TEST_AS_MAIN=1", "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
				"CONCH_DATA_DIR="+filepath.Join(dir, "data"), "CONCH_MODEL=", "CONCH_MODEL_API_KEY=", "OPENAI_API_KEY=")
			model := string(provider) + "/test-model"
			row := usageRow(t, runConch(t, bare, "usage --by model"), model)
			if want := []string{"2", "8100", "7072", "32", "0"}; strings.Join(row[:5], " ") != strings.Join(want, " ") {
				t.Errorf("usage of %s: got %v, want calls, input, cached, output, estimated = %v", model, row, want)
			}
			usageRow(t, runConch(t, bare, "usage --by person"), "cli:local")
			usageRow(t, runConch(t, bare, "usage --by conversation --days 1"), "cli:local")
			usageRow(t, runConch(t, bare, "usage --by day"), time.Now().UTC().Format("2006-01-02"))

			// The transcript has the turn's usage and the stop.
			tr := runConch(t, bare, "transcript cli:local")
			if !strings.Contains(tr, "_usage: ") || !strings.Contains(tr, "(3072 cached)") || !strings.Contains(tr, "stopped (budget)") {
				t.Errorf("transcript lacks usage or the stop:\n%s", tr)
			}
		})
	}
}

// TestChatFallbackAfter429Storm: the primary (Gemini) answers with a tool
// call in the first turn and starts another in the second; then it answers
// only 429s. After its retries the OpenAI fallback takes the turn over with
// the history intact: both turns' messages, every tool call with its result
// under one id (Gemini's thought signatures left behind), the tools. /status
// and the transcript say which model answered, usage is priced per model.
func TestChatFallbackAfter429Storm(t *testing.T) {
	srv := fakellm.New(t)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "config", "conch")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `[[model.fallbacks]]
provider = "openai"
name = "backup-model"
base_url = "` + srv.BaseURL(fakellm.OpenAI) + `"
api_key = "fallback-key"
context_window = 128000

[prices."openai/backup-model"]
input = 1.0
output = 2.0
`
	if err := os.WriteFile(filepath.Join(cfgDir, "conch.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(testEnv(srv, fakellm.Gemini, dir), "CONCH_AGENT_MAX_RETRIES=2")
	srv.Push(
		fakellm.ToolCall("remember", `{"key":"name","value":"Alice"}`).Usage(1000, 10),
		fakellm.Text("Hello Alice.").Usage(1100, 5),
	)
	p := startConch(t, env, "chat")
	if got := p.say(t, "I am Alice."); got != "Hello Alice." {
		t.Fatalf("reply %q", got)
	}
	srv.Push(
		fakellm.ToolCall("remember", `{"key":"city","value":"Lyon"}`).Usage(1200, 10),
		fakellm.Error(429, "Resource has been exhausted (e.g. check quota)."),
		fakellm.Error(429, "Resource has been exhausted (e.g. check quota)."),
		fakellm.Error(429, "Resource has been exhausted (e.g. check quota)."),
		fakellm.Text("You live in Lyon, Alice.").Usage(2000, 8),
	)
	if got := p.say(t, "I live in Lyon. Where do I live?"); got != "You live in Lyon, Alice." {
		t.Fatalf("reply %q", got)
	}
	if _, err := p.stdin.Write([]byte("/status\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.stderr.String(), "Last answer by openai/backup-model (a fallback") {
		if time.Now().After(deadline) {
			t.Fatalf("/status does not name the fallback; stderr:\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.finish(t)

	reqs := srv.Requests()
	if len(reqs) != 7 {
		t.Fatalf("%d requests, want 7", len(reqs))
	}
	for i, want := range []fakellm.Provider{fakellm.Gemini, fakellm.Gemini, fakellm.Gemini, fakellm.Gemini, fakellm.Gemini, fakellm.Gemini, fakellm.OpenAI} {
		if reqs[i].Provider != want {
			t.Errorf("request %d went to %s, want %s", i, reqs[i].Provider, want)
		}
	}
	fb := reqs[6]
	if fb.Model != "backup-model" || fb.APIKey != "fallback-key" {
		t.Errorf("fallback request: model %q key %q", fb.Model, fb.APIKey)
	}
	if _, ok := fb.Tool("remember"); !ok {
		t.Errorf("the fallback was not offered the tools")
	}
	var users []string
	calls := map[string]string{}
	results := map[string]string{}
	for _, m := range fb.Messages {
		if m.Role == "user" && m.Text != "" {
			users = append(users, m.Text)
		}
		for _, c := range m.ToolCalls {
			calls[c.ID] = string(c.Args)
			if strings.Contains(c.ID, "#ts=") || len(c.ID) > 40 {
				t.Errorf("call id %q carries Gemini's signature to OpenAI", c.ID)
			}
		}
		for _, r := range m.ToolResults {
			results[r.CallID] = r.Content
		}
	}
	if strings.Join(users, " | ") != "I am Alice. | I live in Lyon. Where do I live?" {
		t.Errorf("fallback saw user messages %q", users)
	}
	if len(calls) != 2 || len(results) != 2 {
		t.Fatalf("fallback saw calls %v and results %v, want two of each", calls, results)
	}
	for id, args := range calls {
		if _, ok := results[id]; !ok {
			t.Errorf("call %s (%s) has no result under its id; results %v", id, args, results)
		}
	}
	var city bool
	for _, args := range calls {
		var a struct{ Key, Value string }
		if json.Unmarshal([]byte(args), &a) == nil && a.Value == "Lyon" {
			city = true
		}
	}
	if !city {
		t.Errorf("the second turn's call is not in the fallback's history: %v", calls)
	}

	bare := append(os.Environ(), "CONCH_TEST_AS_MAIN=1", "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "CONCH_DATA_DIR="+filepath.Join(dir, "data"))
	out := runConch(t, bare, "usage --by model")
	if row := usageRow(t, out, "openai/backup-model"); row[0] != "1" || row[1] != "2000" || row[5] != "0.0020" {
		t.Errorf("fallback's usage: got %v, want 1 call, 2000 in, $0.0020 by its own price", row)
	}
	if row := usageRow(t, out, "gemini/test-model"); row[0] != "3" || row[1] != "3300" {
		t.Errorf("primary's usage: got %v, want 3 calls, 3300 in", row)
	}
	tr := runConch(t, bare, "transcript cli:local")
	for _, want := range []string{"gemini/test-model unavailable", "via openai/backup-model (fallback)", "gemini/test-model, openai/backup-model"} {
		if !strings.Contains(tr, want) {
			t.Errorf("transcript lacks %q:\n%s", want, tr)
		}
	}
}
