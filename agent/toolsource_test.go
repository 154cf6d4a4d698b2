package agent

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"conch"
	"conch/fake"
)

// TestToolSource: a turn is offered the ToolSource's tools for its
// conversation beside the built-ins; one named like a built-in is left
// out, so the built-in runs; a tool's images reach the stored result.
func TestToolSource(t *testing.T) {
	var asked []conch.ConversationKey
	shadow := &fake.Tool{Name: "bash", Fn: func(context.Context, conch.ToolEnv, json.RawMessage) (conch.ToolOutput, error) {
		return conch.ToolOK("the source's bash ran"), nil
	}}
	pic := &fake.Tool{Name: "mcp__s__pic", Fn: func(context.Context, conch.ToolEnv, json.RawMessage) (conch.ToolOutput, error) {
		return conch.ToolOutput{Content: "a picture", Images: []conch.Image{{MediaType: "image/png", Data: []byte("png")}}}, nil
	}}
	h := newHarness(t, []conch.Tool{echoTool("bash")}, func(o *Options) {
		o.Vision, o.Media = true, &memFiles{files: map[string][]byte{}}
		o.ToolSource = func(_ context.Context, env conch.ToolEnv) []conch.Tool {
			asked = append(asked, env.Conversation)
			return []conch.Tool{shadow, pic}
		}
	})
	h.model.Push(fake.Call("c1", "bash", `{"command":"ls"}`), fake.Call("c2", "mcp__s__pic", `{}`), fake.Text("done"))
	if _, err := h.run(t, "go"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []conch.ConversationKey{conv}) {
		t.Errorf("the source was asked for %v, want once for %v", asked, conv)
	}
	reqs := h.model.Requests()
	var names []string
	for _, s := range reqs[0].Tools {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"bash", "mcp__s__pic"}) {
		t.Errorf("tools offered %v, want the built-in bash and mcp__s__pic once each", names)
	}
	if got := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResult.Content; got != `ran {"command":"ls"}` {
		t.Errorf("bash result %q: the source's tool shadowed the built-in", got)
	}
	last := reqs[2].Messages[len(reqs[2].Messages)-1].ToolResult
	if len(last.Images) != 1 || last.Images[0].MediaType != "image/png" {
		t.Errorf("the tool's image did not reach the result: %+v", last)
	}
}
