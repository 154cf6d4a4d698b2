package tool

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"conch"
	"conch/spool"
)

// pngHeader starts every PNG file.
var pngHeader = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

// TestSendFile: files of the workspace are spooled and returned for the
// answer with their type; every refusal (symbolic link, "..", a FIFO, a
// directory, over the channel's limit, outside /workspace) is a failure
// the model reads, with nothing queued.
func TestSendFile(t *testing.T) {
	env, h := hostEnv(t)
	sp, err := spool.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	audit := &auditLog{}
	sf, err := NewSendFile(SendFileOptions{Store: sp, Auditor: audit, Limit: func(ch conch.ChannelName) int64 {
		if ch == conch.ChannelCLI {
			return 1 << 10
		}
		return 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(h.Dir, "workspace")
	chart := append(append([]byte{}, pngHeader...), bytes.Repeat([]byte{7}, 100)...)
	for name, data := range map[string][]byte{
		"out/chart.png": chart, "report.csv": []byte("a,b\n1,2\n"), "fake.png": []byte("not a picture"),
		"big.bin": bytes.Repeat([]byte{1}, 2<<10),
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "passwd.png")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}

	out := runTool(t, sf, env, map[string]any{"paths": []string{"out/chart.png", "/workspace/report.csv", "fake.png"}})
	if out.IsError || len(out.Attachments) != 3 {
		t.Fatalf("send three files: %+v", out)
	}
	want := []struct{ name, mt string }{{"chart.png", "image/png"}, {"report.csv", "text/csv; charset=utf-8"}, {"fake.png", "text/plain; charset=utf-8"}}
	for i, a := range out.Attachments {
		if a.Name != want[i].name || a.MediaType != want[i].mt || a.Ref == "" || a.Open != nil {
			t.Errorf("file %d: %+v, want %s of type %s with a spool ref", i, a, want[i].name, want[i].mt)
		}
	}
	r, err := sp.OpenFile(context.Background(), env.Conversation, out.Attachments[0].Ref)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, chart) || out.Attachments[0].Size != int64(len(chart)) {
		t.Fatalf("spooled copy differs: %d bytes, size %d", len(got), out.Attachments[0].Size)
	}
	if _, err := sp.OpenFile(context.Background(), conch.ConversationKey{Channel: conch.ChannelCLI, ID: "other"}, out.Attachments[0].Ref); conch.KindOf(err) != conch.KindNotFound {
		t.Fatalf("another conversation opened the file: %v", err)
	}
	if ev, d := audit.last(t); ev.Kind != conch.AuditFileSend || d["path"] != "fake.png" {
		t.Fatalf("audit %+v %v", ev, d)
	}

	for _, c := range []struct {
		paths []string
		want  string
	}{
		{[]string{"passwd.png"}, "symbolic link"},
		{[]string{"out/chart.png", "passwd.png"}, "chart.png not queued either"},
		{[]string{"../etc/passwd"}, `".."`},
		{[]string{"/etc/passwd"}, "outside /workspace"},
		{[]string{"/tmp/x"}, "outside /workspace"},
		{[]string{"pipe"}, "not a regular file (a FIFO)"},
		{[]string{"out"}, "directory"},
		{[]string{"missing.png"}, "does not exist"},
		{[]string{"big.bin"}, "2.0 KB, over the 1.0 KB limit for files sent on cli"},
		{nil, "at least one path"},
		{[]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, "at most 10 files"},
	} {
		out := runTool(t, sf, env, map[string]any{"paths": c.paths})
		if !out.IsError || !strings.Contains(out.Content, c.want) || len(out.Attachments) != 0 {
			t.Errorf("send %q: %+v; want a failure saying %q", c.paths, out, c.want)
		}
	}
	if _, d := audit.last(t); d["refused"] == nil {
		t.Errorf("a refusal is not audited as one: %v", d)
	}

	// Without a sandbox runtime there is nothing to send from.
	out = runTool(t, sf, conch.ToolEnv{Conversation: testKey}, map[string]any{"paths": []string{"a.png"}})
	if !out.IsError {
		t.Fatalf("no runtime: %+v", out)
	}
}
