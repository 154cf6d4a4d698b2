package llmtest

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"testing"

	"conch"
	"conch/internal/testenv/fakellm"
)

// picture encodes a w×h test picture as PNG or JPEG.
func picture(t *testing.T, format string, w, h int) conch.Image {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{R: uint8(x), G: uint8(y), B: 90, A: 255})
		}
	}
	var b bytes.Buffer
	var err error
	mt := "image/png"
	if format == "jpeg" {
		mt, err = "image/jpeg", jpeg.Encode(&b, img, nil)
	} else {
		err = png.Encode(&b, img)
	}
	if err != nil {
		t.Fatal(err)
	}
	return conch.Image{MediaType: mt, Data: b.Bytes(), Name: "inbox/test." + format}
}

// runImages checks pictures in a user message and in a tool result, as
// the official SDKs put them on the wire and the fake reads them back,
// and the API's refusal of a picture that is not what it claims.
func runImages(t *testing.T, p fakellm.Provider, model func(testing.TB, *fakellm.Server) conch.Model, gen Generator) {
	t.Run("UserImages", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Text("a gradient"))
		a, b := picture(t, "png", 40, 30), picture(t, "jpeg", 64, 48)
		req := conch.ModelRequest{Messages: []conch.Message{{Role: conch.RoleUser, Text: "what is this?", Images: []conch.Image{a, b}}}}
		if _, err := gen(t, model(t, s), context.Background(), req); err != nil {
			t.Fatalf("Generate: %v", err)
		}
		got := last(t, s)
		if len(got.Messages) != 1 || got.Messages[0].Text != "what is this?" {
			t.Fatalf("messages: %+v", got.Messages)
		}
		ims := got.Messages[0].Images
		if len(ims) != 2 || ims[0].MediaType != "image/png" || ims[0].Width != 40 || ims[1].MediaType != "image/jpeg" || ims[1].Height != 48 ||
			!bytes.Equal(ims[0].Data, a.Data) || !bytes.Equal(ims[1].Data, b.Data) {
			t.Fatalf("images received: %d, want the PNG 40×30 and the JPEG 64×48 as sent", len(ims))
		}
	})

	t.Run("ToolResultImage", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		s.Push(fakellm.Text("a plot"))
		pic := picture(t, "png", 20, 20)
		req := conch.ModelRequest{Tools: tools(), Messages: []conch.Message{
			{Role: conch.RoleUser, Text: "look at plot.png"},
			{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "call_1", Name: "read", Arguments: []byte(`{"path":"plot.png"}`)}, {ID: "call_2", Name: "bash", Arguments: []byte(`{"cmd":"ls"}`)}}},
			{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "call_1", Name: "read", Content: "plot.png, 20×20", Images: []conch.Image{pic}}},
			{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "call_2", Name: "bash", Content: "plot.png"}},
		}}
		if _, err := gen(t, model(t, s), context.Background(), req); err != nil {
			t.Fatalf("Generate: %v", err)
		}
		got := last(t, s)
		ims := got.Images()
		if len(ims) != 1 || !bytes.Equal(ims[0].Data, pic.Data) {
			t.Fatalf("images received: %d, want the tool's one", len(ims))
		}
		if rs := got.ToolResults(); len(rs) != 2 {
			t.Fatalf("tool results: %d, want 2", len(rs))
		}
		if p == fakellm.Anthropic {
			if rs := got.ToolResults(); len(rs[0].Images) != 1 {
				t.Errorf("Anthropic carries the picture inside its tool_result")
			}
			return
		}
		// The others follow the run of results with a user part.
		lastMsg := got.Messages[len(got.Messages)-1]
		if lastMsg.Role != "user" || len(lastMsg.Images) != 1 {
			t.Errorf("the picture should follow the tool results in a user message: %+v", lastMsg.Role)
		}
	})

	t.Run("BadImageRefused", func(t *testing.T) {
		t.Parallel()
		s := fakellm.New(t)
		bad := conch.Image{MediaType: "image/png", Data: []byte("this is not a picture at all"), Name: "inbox/fake.png"}
		req := conch.ModelRequest{Messages: []conch.Message{{Role: conch.RoleUser, Text: "?", Images: []conch.Image{bad}}}}
		_, err := gen(t, model(t, s), context.Background(), req)
		var me *conch.ModelError
		if !errors.As(err, &me) || me.Status != 400 {
			t.Fatalf("err = %v, want the API's 400", err)
		}
		if p == fakellm.Anthropic {
			// Anthropic checks the declared type against the content.
			lying := picture(t, "jpeg", 8, 8)
			lying.MediaType = "image/png"
			req.Messages[0].Images = []conch.Image{lying}
			if _, err := gen(t, model(t, s), context.Background(), req); !errors.As(err, &me) || me.Status != 400 {
				t.Fatalf("JPEG declared as PNG: err = %v, want the API's 400", err)
			}
		}
		broken := picture(t, "png", 8, 8)
		broken.Data = broken.Data[:len(broken.Data)/2]
		req.Messages[0].Images = []conch.Image{broken}
		if _, err := gen(t, model(t, s), context.Background(), req); !errors.As(err, &me) || me.Status != 400 {
			t.Fatalf("truncated PNG: err = %v, want the API's 400", err)
		}
	})
}
