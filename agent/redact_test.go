package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"conch"
	"conch/fake"
)

// TestRedactsSecretsFromTools: a configured secret a tool prints reaches
// neither the model, the store, the events nor the error that ends a turn.
func TestRedactsSecretsFromTools(t *testing.T) {
	const key, longer, short = "sk-live-0123456789", "sk-live-0123456789-and-more", "short7!"
	errBroken := errors.New("sandbox broken")
	leak := &fake.Tool{Name: "bash", Fn: func(_ context.Context, env conch.ToolEnv, _ json.RawMessage) (conch.ToolOutput, error) {
		env.Report("progress: token " + key)
		return conch.ToolOK("KEY=" + key + " LONG=" + longer + " SHORT=" + short), nil
	}}
	broken := &fake.Tool{Name: "broken", Fn: func(context.Context, conch.ToolEnv, json.RawMessage) (conch.ToolOutput, error) {
		return conch.ToolOutput{}, errors.Join(errBroken, errors.New("password="+key))
	}}
	h := newHarness(t, []conch.Tool{leak, broken}, func(o *Options) { o.Secrets = []string{key, "", longer, short} })
	h.model.Push(fake.Call("c1", "bash", `{"command":"env"}`), fake.Call("c2", "broken", `{}`))
	var events []conch.EventData
	h.rec.AddTurn(1, conch.Message{Role: conch.RoleUser, Text: "show env"})
	_, err := h.agent.Run(context.Background(), Input{
		Turn:   1,
		Env:    conch.ToolEnv{Conversation: conv, User: user, Facts: h.facts},
		Events: func(e conch.EventData) { events = append(events, e) },
	})
	if err == nil || !errors.Is(err, errBroken) {
		t.Fatalf("Run: got %v, want the broken tool's error (still errors.Is)", err)
	}
	if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "password="+Redacted) {
		t.Errorf("the turn's error: got %q, want the secret redacted", err)
	}
	want := "KEY=" + Redacted + " LONG=" + Redacted + " SHORT=" + short
	reqs := h.model.Requests()
	if got := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResult.Content; got != want {
		t.Errorf("the model read %q, want %q", got, want)
	}
	var stored strings.Builder
	for _, m := range h.rec.Messages {
		b, _ := json.Marshal(m)
		stored.Write(b)
	}
	for _, s := range h.rec.Steps {
		stored.Write(s.Detail)
	}
	var progress bool
	for _, e := range events {
		b, _ := json.Marshal(e)
		stored.Write(b)
		if p, ok := e.(conch.ToolProgress); ok {
			progress = p.Text == "progress: token "+Redacted
		}
	}
	if !progress {
		t.Errorf("no redacted progress event in %+v", events)
	}
	if strings.Contains(stored.String(), key) {
		t.Errorf("the secret was stored or emitted: %s", stored.String())
	}
}

// TestRedactsProgressGivenByTheCaller: the gateway's own Progress func gets
// redacted lines too.
func TestRedactsProgressGivenByTheCaller(t *testing.T) {
	const key = "xoxb-secret-token"
	tool := &fake.Tool{Name: "bash", Fn: func(_ context.Context, env conch.ToolEnv, _ json.RawMessage) (conch.ToolOutput, error) {
		env.Report(key)
		return conch.ToolOK("ok"), nil
	}}
	h := newHarness(t, []conch.Tool{tool}, func(o *Options) { o.Secrets = []string{key} })
	h.model.Push(fake.Call("c1", "bash", `{}`), fake.Text("done"))
	var lines []string
	h.rec.AddTurn(1, conch.Message{Role: conch.RoleUser, Text: "go"})
	_, err := h.agent.Run(context.Background(), Input{
		Turn: 1,
		Env:  conch.ToolEnv{Conversation: conv, User: user, Facts: h.facts, Progress: func(s string) { lines = append(lines, s) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0] != Redacted {
		t.Fatalf("progress lines: got %q, want [%q]", lines, Redacted)
	}
}

// RedactFunc applies the agent's rules outside a turn: the longest secret
// first, short ones ignored, and no secrets at all leaves text as it is.
func TestRedactFunc(t *testing.T) {
	r := RedactFunc([]string{"sk-live-0123456789", "sk-live-0123456789-and-more", "short7!"})
	if got := r("a sk-live-0123456789-and-more b sk-live-0123456789 c short7!"); got != "a "+Redacted+" b "+Redacted+" c short7!" {
		t.Errorf("got %q", got)
	}
	if got := RedactFunc(nil)("text"); got != "text" {
		t.Errorf("no secrets: got %q", got)
	}
}
