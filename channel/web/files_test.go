package web

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/coder/websocket"

	"conch"
)

// memFiles is a conch.ConversationFiles in memory: "<conversation id>|<ref>".
type memFiles map[string][]byte

func (m memFiles) OpenFile(_ context.Context, key conch.ConversationKey, ref string) (io.ReadCloser, error) {
	b, ok := m[key.ID+"|"+ref]
	if !ok {
		return nil, conch.Errorf(conch.KindNotFound, "no such file")
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake picture")

// TestFilesRoute: a file sent with an answer is served to the logged-in
// page of its own conversation only; pictures inline, everything else (an
// SVG with a script in it) as a sandboxed download; nothing without login,
// nothing of another conversation, no path out of the store.
func TestFilesRoute(t *testing.T) {
	files := memFiles{}
	ts := newTestServer(t, func(o *Options) { o.Files = files })
	c := ts.client()
	cv := ts.newConversation(c)
	other := ts.newConversation(c)
	files[cv.ID+"|ab/01"] = pngBytes
	files[cv.ID+"|ab/02"] = []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)

	get := func(cl *http.Client, path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := cl.Get(ts.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, body := get(c, "/api/files/"+cv.ID+"/ab/01?name=chart.png")
	h := resp.Header
	if resp.StatusCode != 200 || !bytes.Equal(body, pngBytes) || h.Get("Content-Type") != "image/png" ||
		h.Get("Content-Disposition") != `inline; filename=chart.png` || h.Get("X-Content-Type-Options") != "nosniff" ||
		h.Get("Content-Security-Policy") != "default-src 'none'; sandbox" {
		t.Fatalf("picture: %d %v", resp.StatusCode, h)
	}
	resp, _ = get(c, "/api/files/"+cv.ID+"/ab/02?name=evil.svg")
	if ct, cd := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"); resp.StatusCode != 200 || ct != "application/octet-stream" || cd != `attachment; filename=evil.svg` {
		t.Fatalf("svg: %d %q %q, want a download", resp.StatusCode, ct, cd)
	}
	for _, path := range []string{
		"/api/files/" + cv.ID + "/ab/03", "/api/files/" + other.ID + "/ab/01", "/api/files/nope/ab/01",
		"/api/files/" + cv.ID + "/..%2F..%2Fetc%2Fpasswd", "/api/files/" + cv.ID + "/ab/01/x", "/api/files/" + cv.ID + "/AB/01",
	} {
		if resp, _ := get(c, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	if resp, _ := get(http.DefaultClient, "/api/files/"+cv.ID+"/ab/01"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without login: %d, want 401", resp.StatusCode)
	}
}

// TestHistoryCarriesFiles: a page that resumes from further back than the
// hub keeps gets the stored conversation, with each answer's files.
func TestHistoryCarriesFiles(t *testing.T) {
	ts := newTestServer(t)
	ts.hub.keep = 3
	c := ts.client()
	cv := ts.newConversation(c)
	ctx := context.Background()
	conn := ts.chat(ctx, c, cv.ID, 0)
	sendText(ctx, t, conn, "a1", "chart please")
	until(ctx, t, conn, isTurnDone)
	conn.Close(websocket.StatusNormalClosure, "")
	file := conch.Attachment{Name: "chart.png", MediaType: "image/png", Size: 20, Ref: "ab/01"}
	ts.gw.mu.Lock()
	h := ts.gw.history[cv.Key()]
	ts.gw.history[cv.Key()] = []conch.Message{h[0],
		{Role: conch.RoleAssistant, Text: "Drawing it.", ToolCalls: []conch.ToolCall{{ID: "c1", Name: "send_file"}}},
		{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: "c1", Name: "send_file", Content: "queued", Attachments: []conch.Attachment{file}}},
		h[1]}
	ts.gw.mu.Unlock()
	conn2 := ts.chat(ctx, c, cv.ID, 1)
	f := readWire(ctx, t, conn2)
	if f.Type != "history" || len(f.Messages) != 3 {
		t.Fatalf("got %+v, want the stored conversation", f)
	}
	if m := f.Messages[1]; len(m.Attachments) != 0 {
		t.Fatalf("the message with the tool call carries files: %+v", m)
	}
	if m := f.Messages[2]; len(m.Attachments) != 1 || m.Attachments[0].Ref != "ab/01" || m.Attachments[0].Name != "chart.png" {
		t.Fatalf("answer %+v, want chart.png with it", m)
	}
}
