package sqlite_test

import (
	"context"
	"strings"
	"testing"

	"conch"
	"conch/sqlite/sqlitetest"
	"conch/sqlite/storetest"
)

// Pictures are kept by reference: a turn's prepared files come back in the
// model's view as Images with their Ref, a tool result's pictures too, and
// no picture's bytes are stored.
func TestPicturesByReference(t *testing.T) {
	ctx := context.Background()
	db := sqlitetest.MustOpenMemory(t)
	in := storetest.Inbound(roomA, "$p", "what is this?")
	in.Attachments = []conch.Attachment{{Name: "photo.jpg", MediaType: "image/jpeg", Size: 5, Ref: "aa/01", Path: "/workspace/inbox/01-photo.jpg"},
		{Name: "voice.ogg", MediaType: "audio/ogg", Size: 9, Ref: "aa/02", Path: "/workspace/inbox/02-voice.ogg"}}
	tr := addTurn(t, db, in)
	must(db.StartTurn(ctx, tr.ID)).ok(t)
	prepared := append([]conch.Attachment(nil), in.Attachments...)
	prepared[0].Image = &conch.Image{MediaType: "image/jpeg", Name: "/workspace/inbox/01-photo.jpg", Ref: "aa/03", Data: []byte("never stored")}
	prepared[0].Prepared = true
	prepared[1].Transcript, prepared[1].Prepared = "turn on the lights", true
	check(t, db.SetAttachments(ctx, tr.ID, prepared))
	check(t, db.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "c1", Name: "view_image"}}}))
	check(t, db.AppendMessage(ctx, tr.ID, conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "c1", Name: "view_image", Content: "plot",
		Images: []conch.Image{{MediaType: "image/png", Name: "/workspace/plot.png", Ref: "aa/04", Data: []byte("never stored")}, {MediaType: "image/png", Data: []byte("no ref: dropped")}}}}))

	h := must(db.ModelHistory(ctx, roomA, tr.ID)).ok(t)
	user, tool := h.Messages[0], h.Messages[2]
	if len(user.Images) != 1 || user.Images[0].Ref != "aa/03" || user.Images[0].Data != nil {
		t.Errorf("user message pictures %+v, want aa/03 by reference", user.Images)
	}
	if !strings.Contains(user.Text, `transcribed: "turn on the lights"`) || !strings.Contains(user.Text, "the picture is attached below") {
		t.Errorf("user text %q", user.Text)
	}
	if r := tool.ToolResult; len(r.Images) != 1 || r.Images[0].Ref != "aa/04" || r.Images[0].Data != nil {
		t.Errorf("tool result pictures %+v, want aa/04 by reference", r.Images)
	}
	turns := must(db.UnfinishedTurns(ctx)).ok(t)
	if a := turns[0].Inbound.Attachments; len(a) != 2 || !a[0].Prepared || a[0].Image == nil || a[1].Transcript == "" {
		t.Errorf("a resumed turn's files: %+v, want them prepared", a)
	}
	if err := db.SetAttachments(ctx, 999, prepared); conch.KindOf(err) != conch.KindNotFound {
		t.Errorf("unknown turn: %v", err)
	}
}
