package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"conch"
	"conch/fake"
	"conch/media/mediatest"
)

// memFiles is an in-memory conch.AttachmentStore.
type memFiles struct {
	mu    sync.Mutex
	files map[string][]byte
}

func (m *memFiles) Put(ctx context.Context, _ conch.ConversationKey, a conch.Attachment, _ int64) (string, int64, error) {
	r, err := a.Open(ctx)
	if err != nil {
		return "", 0, err
	}
	b, _ := io.ReadAll(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	ref := fmt.Sprintf("ref%d", len(m.files)+1)
	m.files[ref] = b
	return ref, int64(len(b)), nil
}

func (m *memFiles) Open(_ context.Context, ref string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[ref]
	if !ok {
		return nil, conch.Errorf(conch.KindNotFound, "no %s", ref)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *memFiles) Delete(context.Context, conch.ConversationKey) error { return nil }

func mediatestPNG(t *testing.T) []byte {
	t.Helper()
	return mediatest.PNG(8, 8)
}

func photoTurn(turn conch.TurnID, ref string) conch.Message {
	return conch.Message{Role: conch.RoleUser, Text: fmt.Sprintf("photo %d", turn),
		Images: []conch.Image{{MediaType: "image/png", Name: fmt.Sprintf("/workspace/inbox/p%d.png", turn), Ref: ref}}}
}

func TestPicturesByVision(t *testing.T) {
	files := &memFiles{files: map[string][]byte{"r1": []byte("PNG one")}}
	for _, vision := range []bool{true, false} {
		h := newHarness(t, nil, func(o *Options) { o.Vision, o.Media = vision, files })
		h.model.Push(fake.Text("seen"))
		h.rec.AddTurn(1, photoTurn(1, "r1"))
		if _, err := h.agent.Run(context.Background(), Input{Turn: 1, Env: conch.ToolEnv{Conversation: conv, User: user}}); err != nil {
			t.Fatal(err)
		}
		m := h.model.Requests()[0].Messages[0]
		switch {
		case vision && (len(m.Images) != 1 || string(m.Images[0].Data) != "PNG one"):
			t.Errorf("vision: the request carries %+v, want the stored picture's bytes", m.Images)
		case !vision && (len(m.Images) != 0 || !strings.Contains(m.Text, "[picture /workspace/inbox/p1.png not shown: the model in use (fake) cannot see pictures]")):
			t.Errorf("no vision: request message %+v, want a note and no picture", m)
		}
	}
}

func TestOldPicturesLeave(t *testing.T) {
	files := &memFiles{files: map[string][]byte{}}
	h := newHarness(t, nil, func(o *Options) { o.Vision, o.Media = true, files })
	for turn := conch.TurnID(1); turn <= 4; turn++ {
		ref := fmt.Sprintf("r%d", turn)
		files.files[ref] = []byte("png " + ref)
		h.rec.AddTurn(turn, photoTurn(turn, ref), conch.Message{Role: conch.RoleAssistant, Text: "ok"})
	}
	h.rec.AddTurn(5, conch.Message{Role: conch.RoleUser, Text: "and now?"})
	delete(files.files, "r4") // the newest is gone from the spool
	h.model.Push(fake.Text("fine"))
	if _, err := h.agent.Run(context.Background(), Input{Turn: 5, Env: conch.ToolEnv{Conversation: conv, User: user}}); err != nil {
		t.Fatal(err)
	}
	msgs := h.model.Requests()[0].Messages
	var sent []string
	for _, m := range msgs {
		for _, im := range m.Images {
			sent = append(sent, string(im.Data))
		}
	}
	if strings.Join(sent, ",") != "png r3" {
		t.Errorf("pictures sent: %v, want only turn 3's (turns 1, 2 are old, 4's is no longer kept)", sent)
	}
	for i, want := range map[int]string{0: "no longer in view; call view_image", 2: "no longer in view", 6: "it is no longer kept"} {
		if !strings.Contains(msgs[i].Text, want) {
			t.Errorf("message %d: %q, want %q", i, msgs[i].Text, want)
		}
	}
	one := estimateMessage(conch.Message{Role: conch.RoleUser, Text: "x"})
	if two := estimateMessage(photoTurn(1, "r")); two-one < imageTokens {
		t.Errorf("a picture adds %d tokens to the estimate, want at least %d", two-one, imageTokens)
	}
}

func TestToolPicturesKeptByReference(t *testing.T) {
	files := &memFiles{files: map[string][]byte{}}
	look := &fake.Tool{Name: "view_image", Fn: func(context.Context, conch.ToolEnv, json.RawMessage) (conch.ToolOutput, error) {
		return conch.ToolOutput{Content: "plot.png", Images: []conch.Image{{MediaType: "image/png", Data: []byte("plot bytes"), Name: "/workspace/plot.png"}}}, nil
	}}
	h := newHarness(t, []conch.Tool{look}, func(o *Options) { o.Vision, o.Media = true, files })
	h.model.Push(fake.Call("c1", "view_image", `{"path":"plot.png"}`), fake.Text("a plot"))
	if _, err := h.run(t, "look"); err != nil {
		t.Fatal(err)
	}
	var stored *conch.ToolResult
	for _, m := range h.rec.Messages {
		if m.ToolResult != nil {
			stored = m.ToolResult
		}
	}
	if stored == nil || len(stored.Images) != 1 || stored.Images[0].Ref == "" || string(files.files[stored.Images[0].Ref]) != "plot bytes" {
		t.Fatalf("stored result %+v: want the picture kept in Media by reference", stored)
	}
	last := h.model.Requests()[1].Messages
	r := last[len(last)-1].ToolResult
	if r == nil || len(r.Images) != 1 || string(r.Images[0].Data) != "plot bytes" {
		t.Fatalf("the next request's tool result: %+v", r)
	}
}

// A tool's picture of a type providers do not take is converted; one that
// is no picture is named instead of failing the request.
func TestToolPicturesMadeFit(t *testing.T) {
	files := &memFiles{files: map[string][]byte{}}
	look := &fake.Tool{Name: "mcp_shot", Fn: func(context.Context, conch.ToolEnv, json.RawMessage) (conch.ToolOutput, error) {
		return conch.ToolOutput{Content: "shots", Images: []conch.Image{
			{MediaType: "image/svg+xml", Data: []byte("<svg/>"), Name: "diagram.svg"},
			{MediaType: "image/png", Data: mediatestPNG(t), Name: "ok.png"},
		}}, nil
	}}
	h := newHarness(t, []conch.Tool{look}, func(o *Options) { o.Vision, o.Media = true, files })
	h.model.Push(fake.Call("c1", "mcp_shot", `{}`), fake.Text("seen"))
	if _, err := h.run(t, "shoot"); err != nil {
		t.Fatal(err)
	}
	last := h.model.Requests()[1].Messages
	r := last[len(last)-1].ToolResult
	if len(r.Images) != 1 || r.Images[0].Name != "ok.png" || !strings.Contains(r.Content, "[picture diagram.svg not shown: not a picture") {
		t.Fatalf("tool result sent: %d pictures, content %q", len(r.Images), r.Content)
	}
}
