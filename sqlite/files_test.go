package sqlite_test

import (
	"context"
	"testing"

	"conch"
	"conch/sqlite/sqlitetest"
)

// TestToolResultFilesKept: the files a tool queued for the answer are
// stored with its result and come back in the model's history (so a turn
// resumed after a crash still sends them).
func TestToolResultFilesKept(t *testing.T) {
	ctx := context.Background()
	db := sqlitetest.MustOpenMemory(t)
	tr, _, err := db.AddInbound(ctx, conch.Inbound{Key: roomA, Sender: "@alice:example.org", Text: "chart please"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartTurn(ctx, tr.ID); err != nil {
		t.Fatal(err)
	}
	call := conch.ToolCall{ID: "c1", Name: "send_file", Arguments: []byte(`{"paths":["chart.png"]}`)}
	files := []conch.Attachment{{Name: "chart.png", MediaType: "image/png", Size: 42, Ref: "ab/cd"}}
	for _, m := range []conch.Message{
		{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{call}},
		{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "c1", Name: "send_file", Content: "queued", Attachments: files}},
		{Role: conch.RoleAssistant, Text: "Here it is."},
	} {
		if err := db.AppendMessage(ctx, tr.ID, m); err != nil {
			t.Fatal(err)
		}
	}
	h, err := db.ModelHistory(ctx, roomA, tr.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []conch.Attachment
	for _, m := range h.Messages {
		if m.ToolResult != nil {
			got = append(got, m.ToolResult.Attachments...)
		}
	}
	if len(got) != 1 || got[0].Name != "chart.png" || got[0].MediaType != "image/png" || got[0].Size != 42 || got[0].Ref != "ab/cd" {
		t.Fatalf("files after a reload: %+v", got)
	}
}
