package gateway

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"conch"
	"conch/fake"
	"conch/spool"
	"conch/sqlite/sqlitetest"
)

// fileChannel is a channel that sends files: it reads each one as sent.
type fileChannel struct {
	*fake.Channel
	mu    sync.Mutex
	files map[string][]byte
}

func (c *fileChannel) SendAttachments(ctx context.Context, out conch.Outbound) error {
	for _, a := range out.Attachments {
		r, err := a.Open(ctx)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(r)
		r.Close()
		c.mu.Lock()
		c.files[a.Name] = b
		c.mu.Unlock()
	}
	return c.Send(ctx, out)
}

// TestResumedAnswerSendsItsFiles: conch crashed after a turn's answer was
// stored, with a file send_file had spooled; the resumed turn delivers the
// answer with the file read from the spool, without the model. A channel
// that cannot send files gets their names and places instead.
func TestResumedAnswerSendsItsFiles(t *testing.T) {
	for _, withFiles := range []bool{true, false} {
		db := sqlitetest.MustOpenFile(t)
		ctx := context.Background()
		sp, err := spool.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		key := conch.ConversationKey{Channel: cli, ID: "room"}
		chart := []byte("\\x89PNG chart bytes")
		ref, size, err := sp.Put(ctx, key, conch.Attachment{Name: "chart.png", Open: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(chart)), nil
		}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		t1, _, _ := db.AddInbound(ctx, conch.Inbound{Key: key, Sender: "alice", Text: "chart please"})
		if _, err := db.StartTurn(ctx, t1.ID); err != nil {
			t.Fatal(err)
		}
		file := conch.Attachment{Name: "chart.png", MediaType: "image/png", Size: size, Ref: ref, Path: "/workspace/out/chart.png"}
		for _, m := range []conch.Message{
			{Role: conch.RoleAssistant, ToolCalls: []conch.ToolCall{{ID: "c1", Name: "send_file", Arguments: []byte(`{}`)}}},
			{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "c1", Name: "send_file", Content: "queued", Attachments: []conch.Attachment{file}}},
			{Role: conch.RoleAssistant, Text: "Here is the chart."},
		} {
			if err := db.AppendMessage(ctx, t1.ID, m); err != nil {
				t.Fatal(err)
			}
		}
		fc := &fileChannel{Channel: fake.NewChannel(cli), files: map[string][]byte{}}
		e := newEnvWith(t, db, func(o *Options) {
			o.Attachments = sp
			if withFiles {
				o.Channels = []conch.Channel{fc}
			}
		})
		if withFiles {
			e.ch = fc.Channel
		}
		e.start()
		out := e.waitFor("reply", countKind(conch.OutboundReply, 1))
		text := texts(out, conch.OutboundReply)[0]
		if withFiles {
			if text != "Here is the chart." || !bytes.Equal(fc.files["chart.png"], chart) {
				t.Fatalf("with files: text %q, files %q", text, fc.files)
			}
		} else if !strings.Contains(text, "Here is the chart.") || !strings.Contains(text, "/workspace/out/chart.png (image/png") {
			t.Fatalf("without files: %q", text)
		}
		if n := len(e.model.Requests()); n != 0 {
			t.Fatalf("model called %d times", n)
		}
		e.shutdown()
	}
}
