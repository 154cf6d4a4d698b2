package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

type answer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  *struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

func call(t *testing.T, s *Server, method string, params map[string]any) (int, answer) {
	t.Helper()
	body, _ := json.Marshal(params)
	resp, err := http.Post(s.URL+"/bot"+s.Token+"/"+method, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, a
}

func updates(t *testing.T, s *Server, params map[string]any) []Update {
	t.Helper()
	code, a := call(t, s, "getUpdates", params)
	if code != 200 || !a.OK {
		t.Fatalf("getUpdates: %d %+v", code, a)
	}
	var us []Update
	if err := json.Unmarshal(a.Result, &us); err != nil {
		t.Fatal(err)
	}
	return us
}

func TestGetUpdatesOffsets(t *testing.T) {
	s := Start(t)
	u := Person(1, "someone", "Some")
	for _, txt := range []string{"a", "b", "c", "d"} {
		s.SendText(u, PrivateChat(u), txt)
	}
	all := updates(t, s, nil)
	if len(all) != 4 || all[0].Message.Text != "a" {
		t.Fatalf("all: %+v", all)
	}
	// Asking again without an offset returns the same: nothing is confirmed.
	if again := updates(t, s, map[string]any{"limit": 2}); len(again) != 2 || again[0].UpdateID != all[0].UpdateID {
		t.Fatalf("limit 2 without offset: %+v", again)
	}
	// An offset confirms everything below it.
	got := updates(t, s, map[string]any{"offset": all[2].UpdateID})
	if len(got) != 2 || got[0].Message.Text != "c" || s.Pending() != 2 {
		t.Fatalf("offset: %+v, pending %d", got, s.Pending())
	}
	// A negative offset keeps only the last updates.
	if got := updates(t, s, map[string]any{"offset": -1}); len(got) != 1 || got[0].Message.Text != "d" {
		t.Fatalf("offset -1: %+v", got)
	}
	if got := updates(t, s, map[string]any{"offset": all[3].UpdateID + 1}); len(got) != 0 || s.Pending() != 0 {
		t.Fatalf("after the last: %+v", got)
	}
}

func TestGetUpdatesLongPollAndConflict(t *testing.T) {
	s := Start(t)
	u := Person(1, "someone", "Some")
	start := time.Now()
	if got := updates(t, s, map[string]any{"timeout": 1}); len(got) != 0 || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("empty long poll returned %v after %s", got, time.Since(start))
	}
	// A long poll returns as soon as an update arrives.
	go func() { time.Sleep(100 * time.Millisecond); s.SendText(u, PrivateChat(u), "now") }()
	start = time.Now()
	if got := updates(t, s, map[string]any{"timeout": 10}); len(got) != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("long poll: %v after %s", got, time.Since(start))
	}
	// A second poller ends the first with 409.
	var wg sync.WaitGroup
	var code int
	var a answer
	wg.Go(func() { code, a = call(t, s, "getUpdates", map[string]any{"offset": 1 << 40, "timeout": 10}) })
	time.Sleep(200 * time.Millisecond)
	wg.Go(func() { call(t, s, "getUpdates", map[string]any{"offset": 1 << 40, "timeout": 1}) })
	wg.Wait()
	if code != 409 || a.ErrorCode != 409 || a.Description != "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running" {
		t.Fatalf("first poller: %d %+v", code, a)
	}
}

func TestAllowedUpdates(t *testing.T) {
	s := Start(t)
	u := Person(1, "someone", "Some")
	g := Group(-100, "G")
	s.SendText(u, g, "hi")
	s.RemoveBot(u, g)
	if got := updates(t, s, map[string]any{"allowed_updates": []string{"my_chat_member"}}); len(got) != 1 || got[0].MyChatMember == nil {
		t.Fatalf("allowed my_chat_member: %+v", got)
	}
	// The list is remembered when a later call leaves it out.
	s.SendText(u, g, "again")
	if got := updates(t, s, nil); len(got) != 1 || got[0].MyChatMember == nil {
		t.Fatalf("remembered allowed_updates: %+v", got)
	}
}

func TestErrors(t *testing.T) {
	s := Start(t)
	u := Person(1, "someone", "Some")
	s.SendText(u, PrivateChat(u), "hi")
	resp, err := http.Get(s.URL + "/bot123:wrong/getMe")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || strings.TrimSpace(string(b)) != `{"ok":false,"error_code":401,"description":"Unauthorized"}` {
		t.Fatalf("wrong token: %d %s", resp.StatusCode, b)
	}
	if code, a := call(t, s, "noSuchMethod", nil); code != 404 || a.Description != "Not Found" {
		t.Fatalf("unknown method: %d %+v", code, a)
	}
	for _, tc := range []struct{ text, desc string }{
		{"<b>open", "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\""},
		{"<div>x</div>", "Bad Request: can't parse entities: Unsupported start tag \"div\" at byte offset 0"},
		{"<b>x</i>", "Bad Request: can't parse entities: Unmatched end tag at byte offset 4, expected \"</b>\", found \"</i>\""},
		{"", "Bad Request: message text is empty"},
		{strings.Repeat("x", 4097), "Bad Request: message is too long"},
	} {
		code, a := call(t, s, "sendMessage", map[string]any{"chat_id": 1, "text": tc.text, "parse_mode": "HTML"})
		if code != 400 || a.Description != tc.desc {
			t.Errorf("text %.20q: %d %q, want %q", tc.text, code, a.Description, tc.desc)
		}
	}
	if code, a := call(t, s, "sendMessage", map[string]any{"chat_id": 99, "text": "x"}); code != 400 || a.Description != "Bad Request: chat not found" {
		t.Fatalf("unknown chat: %d %+v", code, a)
	}
	s.Fail("sendMessage", TooManyRequests(7))
	if code, a := call(t, s, "sendMessage", map[string]any{"chat_id": 1, "text": "x"}); code != 429 || a.Parameters == nil || a.Parameters.RetryAfter != 7 || a.Description != "Too Many Requests: retry after 7" {
		t.Fatalf("429: %d %+v", code, a)
	}
	s.Fail("*", ServerError(502))
	if code, _ := call(t, s, "getMe", nil); code != 502 {
		t.Fatalf("5xx fault: %d", code)
	}
}

func TestSendEditAndForms(t *testing.T) {
	s := Start(t)
	u := Person(1, "someone", "Some")
	s.SendText(u, PrivateChat(u), "hi")
	// urlencoded
	resp, err := http.PostForm(s.URL+"/bot"+s.Token+"/sendMessage", url.Values{"chat_id": {"1"}, "text": {"<b>bold</b> &amp; <a href=\"https://x.org\">x</a>"}, "parse_mode": {"HTML"}, "disable_notification": {"true"}})
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	var m Message
	json.Unmarshal(a.Result, &m)
	if m.Text != "bold & x" || len(m.Entities) != 2 || m.Entities[1].Type != "text_link" || m.Entities[1].Offset != 7 || !s.Messages(1)[0].Silent {
		t.Fatalf("sent %+v", m)
	}
	// Editing to the same text is refused as in the real API.
	code, a := call(t, s, "editMessageText", map[string]any{"chat_id": 1, "message_id": m.MessageID, "text": "<b>bold</b> &amp; <a href=\"https://x.org\">x</a>", "parse_mode": "HTML"})
	if code != 400 || !strings.HasPrefix(a.Description, "Bad Request: message is not modified") {
		t.Fatalf("same edit: %d %+v", code, a)
	}
	if code, _ := call(t, s, "editMessageText", map[string]any{"chat_id": 1, "message_id": m.MessageID, "text": "new"}); code != 200 {
		t.Fatalf("edit: %d", code)
	}
	if got, _ := s.Message(1, m.MessageID); got.Text != "new" {
		t.Fatalf("after edit %+v", got)
	}
	// multipart with a file
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	w.WriteField("chat_id", "1")
	fw, _ := w.CreateFormFile("document", "notes.txt")
	fw.Write([]byte("file body"))
	w.Close()
	resp, err = http.Post(s.URL+"/bot"+s.Token+"/sendDocument", w.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	msgs := s.Messages(1)
	if last := msgs[len(msgs)-1]; last.Document == nil || last.Document.Name != "notes.txt" || string(last.Document.Data) != "file body" {
		t.Fatalf("document %+v", last)
	}
}

func TestFileDownload(t *testing.T) {
	s := Start(t)
	u := Person(1, "someone", "Some")
	m := s.SendDocument(u, PrivateChat(u), "a.txt", "text/plain", []byte("content"), "")
	code, a := call(t, s, "getFile", map[string]any{"file_id": m.Document.FileID})
	var f File
	json.Unmarshal(a.Result, &f)
	if code != 200 || f.FileSize != 7 || f.FilePath == "" {
		t.Fatalf("getFile: %d %+v", code, f)
	}
	resp, err := http.Get(s.URL + "/file/bot" + s.Token + "/" + f.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "content" {
		t.Fatalf("download %q", b)
	}
	if code, a := call(t, s, "getFile", map[string]any{"file_id": "nope"}); code != 400 || a.Description != "Bad Request: invalid file_id" {
		t.Fatalf("unknown file: %d %+v", code, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.Wait(ctx, func() bool { return len(s.Calls("getFile")) == 2 }); err != nil {
		t.Fatal(err)
	}
}
