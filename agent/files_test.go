package agent

import (
	"context"
	"encoding/json"
	"testing"

	"conch"
	"conch/fake"
)

// TestAnswerCarriesSentFiles: files a tool queued (send_file) go with the
// turn's answer, in order, stored with the tool result; a failed call's
// files do not; a turn resumed with its answer stored carries them again.
func TestAnswerCarriesSentFiles(t *testing.T) {
	n := 0
	send := &fake.Tool{Name: "send_file", Fn: func(context.Context, conch.ToolEnv, json.RawMessage) (conch.ToolOutput, error) {
		n++
		out := conch.ToolOK("queued")
		out.Attachments = []conch.Attachment{{Name: "chart.png", MediaType: "image/png", Size: 10, Ref: "aa/" + string(rune('a'+n))}}
		if n == 2 {
			out.IsError = true
		}
		return out, nil
	}}
	h := newHarness(t, []conch.Tool{send}, nil)
	h.model.Push(fake.Call("c1", "send_file", `{"paths":["a"]}`), fake.Call("c2", "send_file", `{"paths":["b"]}`),
		fake.Call("c3", "send_file", `{"paths":["c"]}`), fake.Text("here"))
	res, err := h.run(t, "send")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attachments) != 2 || res.Attachments[0].Ref != "aa/b" || res.Attachments[1].Ref != "aa/d" {
		t.Fatalf("answer files %+v, want those of the two calls that worked", res.Attachments)
	}
	var stored int
	for _, m := range h.rec.Messages {
		if m.ToolResult != nil && len(m.ToolResult.Attachments) > 0 {
			stored++
		}
	}
	if stored != 2 {
		t.Fatalf("%d tool results stored with files, want 2", stored)
	}

	// The answer was stored; the turn runs again after a crash.
	again, err := h.agent.Run(context.Background(), Input{Turn: 1, Env: conch.ToolEnv{Conversation: conv}})
	if err != nil || again.Text != "here" || len(again.Attachments) != 2 || again.Attachments[1].Ref != "aa/d" {
		t.Fatalf("resumed: %+v, %v", again, err)
	}
	if calls := len(h.model.Requests()); calls != 4 {
		t.Fatalf("%d model calls, want 4 (none for the resumed turn)", calls)
	}
}
