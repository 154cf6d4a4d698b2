package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
)

// webClient is a logged-in HTTP client of `conch up`'s web chat, as a page
// would be: the session cookie and the request token from a login link of
// `conch web url`.
type webClient struct {
	base   string
	client *http.Client
}

func webLogin(t testing.TB, env []string, base string) *webClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &webClient{base: base, client: &http.Client{Jar: jar}}
	resp, err := c.client.Get(webURL(t, env))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Conch-Token") == "" {
		t.Fatalf("login: %s, no request token", resp.Status)
	}
	// The page sends the login's request token with every request.
	c.client.Transport = tokenTransport{resp.Header.Get("X-Conch-Token")}
	return c
}

// newConversation makes a web conversation and returns its id.
func (c *webClient) newConversation(t testing.TB) string {
	t.Helper()
	req, _ := http.NewRequest("POST", c.base+"/api/conversations", strings.NewReader(`{}`))
	req.Header.Set("Origin", c.base)
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var conv struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&conv); err != nil || conv.ID == "" {
		t.Fatalf("new conversation: %s, %v", resp.Status, err)
	}
	return conv.ID
}

// socket opens the conversation's chat socket, following its events from
// the first.
func (c *webClient) socket(t *testing.T, ctx context.Context, id string) *websocket.Conn {
	t.Helper()
	u := "ws" + strings.TrimPrefix(c.base, "http") + "/api/chat?c=" + id + "&after=0"
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.client, HTTPHeader: http.Header{"Origin": {c.base}}})
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(1 << 22)
	t.Cleanup(func() { conn.CloseNow() })
	return conn
}

// wireEvent is a chat socket's event frame as the page reads it.
type wireEvent struct {
	Type  string `json:"type"`
	Event *struct {
		Turn int64  `json:"turn"`
		Seq  int64  `json:"seq"`
		Type string `json:"type"`
		Data struct {
			Role   string `json:"role"`
			Text   string `json:"text"`
			Status string `json:"status"`
		} `json:"data"`
	} `json:"event"`
}

// readAnswers reads a chat socket's message events until n answers came:
// each turn's message, each turn's answers, and the turns in the order they
// were answered.
func readAnswers(t *testing.T, ctx context.Context, conn *websocket.Conn, n int) (userOf map[int64]string, answerOf map[int64][]string, order []int64) {
	t.Helper()
	userOf, answerOf = map[int64]string{}, map[int64][]string{}
	for len(order) < n {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(order), err)
		}
		var f wireEvent
		if err := json.Unmarshal(data, &f); err != nil || f.Type != "event" || f.Event == nil {
			continue
		}
		if f.Event.Type == "usage" || f.Event.Type == "context" {
			t.Errorf("the page was sent a %s event, which it does not show", f.Event.Type)
		}
		if f.Event.Type != "message" {
			continue
		}
		switch e := f.Event; e.Data.Role {
		case "user":
			userOf[e.Turn] = e.Data.Text
		case "assistant":
			answerOf[e.Turn] = append(answerOf[e.Turn], e.Data.Text)
			order = append(order, e.Turn)
		}
	}
	return userOf, answerOf, order
}

// TestWebConcurrentSendersEachAnsweredByOwnTurn: many browser tabs send one
// message each to one conversation at the same moment, through the real
// binary and its SQLite store. Every message is answered by the model in its
// own turn, with its own reply, once, and the turns run in arrival (turn
// id) order. (Before the turn seam was fixed, turns could be queued out of
// order and a turn whose view ended with a later turn's answer returned that
// answer without asking the model.)
func TestWebConcurrentSendersEachAnsweredByOwnTurn(t *testing.T) {
	testenv.Short(t)
	const senders = 24
	srv := fakellm.New(t)
	srv.Handle(func(r fakellm.Request) fakellm.Reply { return fakellm.Text("re: " + r.LastUserText()) })
	dir := t.TempDir()
	addr := freeAddr(t)
	env := append(testEnv(srv, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN="+addr)
	base := "http://" + addr
	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open http://"+addr+"/login?token=")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wc := webLogin(t, env, base)
	id := wc.newConversation(t)
	watch := wc.socket(t, ctx, id)
	tabs := make([]*websocket.Conn, senders)
	for i := range tabs {
		tabs[i] = wc.socket(t, ctx, id)
	}
	// Every tab sends at the same moment.
	var start, sent sync.WaitGroup
	start.Add(1)
	for i, conn := range tabs {
		sent.Add(1)
		go func() {
			defer sent.Done()
			start.Wait()
			f, _ := json.Marshal(map[string]string{"type": "send", "id": fmt.Sprint("tab", i), "text": fmt.Sprint("message ", i)})
			if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
				t.Errorf("tab %d: %v", i, err)
			}
		}()
	}
	start.Done()
	sent.Wait()

	userOf, answerOf, answerOrder := readAnswers(t, ctx, watch, senders)
	if len(userOf) != senders {
		t.Errorf("%d messages stored as turns, want %d", len(userOf), senders)
	}
	for turn, text := range userOf {
		if got := answerOf[turn]; len(got) != 1 || got[0] != "re: "+text {
			t.Errorf("turn %d (%q) answered %q, want once with %q", turn, text, got, "re: "+text)
		}
	}
	if !slices.IsSorted(answerOrder) {
		t.Errorf("turns answered in the order %v, want arrival (turn id) order", answerOrder)
	}
	if n := srv.Count(); n != senders {
		t.Errorf("the model was asked %d times for %d messages", n, senders)
	}

	// The page's list of conversations: this one with its last answer, and
	// idle once every turn has ended; a new one without messages.
	empty := wc.newConversation(t)
	last := ""
	for turn, text := range userOf {
		if turn == answerOrder[len(answerOrder)-1] {
			last = "re: " + text
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		list := wc.conversations(t)
		got, fresh := list[id], list[empty]
		if got.LastMessage == last && got.State == "idle" && got.Pending == 0 && fresh.ID == empty && fresh.LastMessage == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("conversations listed: %s %+v and %s %+v; want the last answer %q, idle, and the new one empty", id, got, empty, fresh, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listedConversation is an entry of the page's list of conversations.
type listedConversation struct {
	ID          string `json:"id"`
	LastMessage string `json:"last_message"`
	State       string `json:"state"`
	Pending     int    `json:"pending"`
}

// conversations is the page's list of conversations, by id.
func (c *webClient) conversations(t testing.TB) map[string]listedConversation {
	t.Helper()
	resp, err := c.client.Get(c.base + "/api/conversations")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []listedConversation
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list conversations: %s, %v", resp.Status, err)
	}
	byID := map[string]listedConversation{}
	for _, cv := range list {
		byID[cv.ID] = cv
	}
	return byID
}

// TestChatHooksThroughTheStore drives the turn hooks through the real
// binary, a real sandbox and the SQLite store: a pre-stop hook that reports
// an open issue has it handed back to the model (stored as a note), the
// model addresses it, the turn is answered, and the conversation goes on
// (before, the store refused the note and every later turn failed); the
// pre-turn and post-turn hooks see their turn and its status.
func TestChatHooksThroughTheStore(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	instance := "hk" + randomHex(t)
	env := append(testEnv(srv, fakellm.OpenAI, dir), engineEnv(t, e, instance)...)
	instanceContainers(t, e.Client(t), instance)

	const setup = `set -e; h=/workspace/.conch/hooks; mkdir -p $h/pre-turn $h/pre-stop $h/post-turn
printf '#!/bin/sh\necho "pre $CONCH_TURN" >> /workspace/hooks.log\n' > $h/pre-turn/10-log
printf '#!/bin/sh\n[ -e /workspace/fixed ] || echo "tests fail: TestParse"\n' > $h/pre-stop/10-tests
printf '#!/bin/sh\necho "post $CONCH_TURN $CONCH_TURN_STATUS" >> /workspace/hooks.log\n' > $h/post-turn/10-log
chmod +x $h/*/10-*`
	args, _ := json.Marshal(map[string]string{"path": "setup.sh", "content": setup})
	srv.Push(
		fakellm.ToolCall("write_file", string(args)),
		fakellm.ToolCall("bash", `{"command":"bash /workspace/setup.sh"}`),
		fakellm.Text("Hooks installed, all done."),
		// The pre-stop hook's issue comes back: fix it, answer again.
		fakellm.ToolCall("bash", `{"command":"touch /workspace/fixed"}`),
		fakellm.Text("Fixed TestParse."),
		// The next turn works, and sees what the hooks wrote.
		fakellm.ToolCall("bash", `{"command":"cat /workspace/hooks.log"}`),
		fakellm.Text("Read the log."),
	)
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "install the hooks", 3*time.Minute); got != "Fixed TestParse." {
		if reqs := srv.Requests(); len(reqs) > 2 {
			t.Logf("the setup said: %+v", reqs[2].ToolResults())
		}
		t.Fatalf("reply %q, want the answer given after the pre-stop issue; stderr:\n%s", got, p.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d model requests, want 5", len(reqs))
	}
	note := reqs[3].Messages[len(reqs[3].Messages)-1]
	if note.Role != "user" || !strings.Contains(note.Text, "[conch pre-stop check]") || !strings.Contains(note.Text, "tests fail: TestParse") {
		t.Fatalf("fourth request ends with %+v, want the pre-stop issue as a user note", note)
	}
	if got := p.sayWithin(t, "show the hooks log", 2*time.Minute); got != "Read the log." {
		t.Fatalf("second turn: reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)
	// Turn 1's pre-turn hook ran before the hooks existed; its post-turn
	// hook and the second turn's pre-turn hook did run.
	log := lastToolResult(t, srv)
	if !strings.Contains(log, "post 1 normal") || !strings.Contains(log, "pre 2") {
		t.Fatalf("hooks log %q, want turn 1's post-turn (normal) and turn 2's pre-turn entries", log)
	}
	out, errOut, code := conchRun(t, env, "transcript cli:local")
	if code != 0 || !strings.Contains(out, "conch note") || !strings.Contains(out, "tests fail: TestParse") {
		t.Fatalf("transcript (exit %d, stderr %q) lacks the pre-stop note:\n%s", code, errOut, out)
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestUpWakesAndSendersAtOnce: scheduled wakes (which enter through the
// gateway's Submit) and people writing in the web chat reach one
// conversation at the same moment, through `conch up` and its store. Every
// message is answered by its own turn, once, in arrival order.
func TestUpWakesAndSendersAtOnce(t *testing.T) {
	testenv.Short(t)
	const wakes, senders = 6, 6
	srv := fakellm.New(t)
	at := time.Now().Add(6 * time.Second).UTC().Truncate(time.Second)
	srv.Handle(func(r fakellm.Request) fakellm.Reply {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case len(last.ToolResults) > 0:
			return fakellm.Text("scheduled")
		case r.LastUserText() == "set the wakes":
			calls := make([]fakellm.Call, wakes)
			for i := range calls {
				args, _ := json.Marshal(map[string]string{"action": "at", "time": at.Format(time.RFC3339), "message": fmt.Sprint("wake ", i)})
				calls[i] = fakellm.Call{Name: "schedule", Args: args}
			}
			return fakellm.ToolCalls(calls...)
		}
		return fakellm.Text("re: " + r.LastUserText())
	})
	dir := t.TempDir()
	addr := freeAddr(t)
	env := append(testEnv(srv, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN="+addr, "CONCH_SCHEDULE_ENABLED=true")
	base := "http://" + addr
	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open http://"+addr+"/login?token=")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wc := webLogin(t, env, base)
	id := wc.newConversation(t)
	watch := wc.socket(t, ctx, id)
	tabs := make([]*websocket.Conn, senders+1)
	for i := range tabs {
		tabs[i] = wc.socket(t, ctx, id)
	}
	send := func(conn *websocket.Conn, id, text string) {
		f, _ := json.Marshal(map[string]string{"type": "send", "id": id, "text": text})
		if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
			t.Errorf("send %q: %v", text, err)
		}
	}
	send(tabs[senders], "setup", "set the wakes")
	// The people write at the moment the wakes fire.
	time.Sleep(time.Until(at))
	var sent sync.WaitGroup
	for i, conn := range tabs[:senders] {
		sent.Add(1)
		go func() {
			defer sent.Done()
			send(conn, fmt.Sprint("tab", i), fmt.Sprint("message ", i))
		}()
	}
	sent.Wait()

	const total = 1 + wakes + senders
	userOf, answerOf, answerOrder := readAnswers(t, ctx, watch, total)
	woke := 0
	for turn, text := range userOf {
		want := "re: " + text
		if text == "set the wakes" {
			want = "scheduled"
		}
		if strings.HasPrefix(text, "[Scheduled wake ") {
			woke++
		}
		if got := answerOf[turn]; len(got) != 1 || got[0] != want {
			t.Errorf("turn %d (%q) answered %q, want once with %q", turn, text, got, want)
		}
	}
	if len(userOf) != total || woke != wakes {
		t.Errorf("%d turns (%d wakes), want %d (%d wakes)", len(userOf), woke, total, wakes)
	}
	if !slices.IsSorted(answerOrder) {
		t.Errorf("turns answered in the order %v, want arrival (turn id) order", answerOrder)
	}
}

// TestChatCompactsThroughTheStore: a conversation that outgrows a small
// context window through `conch chat` and its SQLite store is compacted
// into a stored summary, later requests carry the summary instead of the
// old turns, and every message is still answered by its own turn.
func TestChatCompactsThroughTheStore(t *testing.T) {
	testenv.Short(t)
	srv := fakellm.New(t)
	summaries := 0
	var mu sync.Mutex
	srv.Handle(func(r fakellm.Request) fakellm.Reply {
		if strings.Contains(r.System, "running summary") {
			mu.Lock()
			summaries++
			mu.Unlock()
			return fakellm.Text("SUMMARY: the person sent numbered long messages.")
		}
		text := r.LastUserText()
		return fakellm.Text("re: " + text[:min(len(text), 12)])
	})
	dir := t.TempDir()
	env := append(testEnv(srv, fakellm.OpenAI, dir), "CONCH_MODEL_CONTEXT_WINDOW=8000")
	p := startConch(t, env, "chat")
	filler := strings.Repeat("lorem ipsum ", 250) // ~3,000 bytes, ~750 tokens
	const turns = 12
	for i := range turns {
		msg := fmt.Sprintf("message %02d %s", i, filler)
		if got, want := p.say(t, msg), "re: "+msg[:12]; got != want {
			t.Fatalf("turn %d: reply %q, want %q", i, got, want)
		}
	}
	p.finish(t)
	if summaries == 0 {
		t.Fatal("no summary was asked for, though the conversation outgrew the window")
	}
	last, _ := srv.Last()
	if !strings.Contains(last.System, "<conversation-summary>") || !strings.Contains(last.System, "SUMMARY: the person") {
		t.Errorf("the last request's system prompt lacks the stored summary")
	}
	if n := len(last.Messages); n >= 2*turns {
		t.Errorf("the last request carries %d messages; want the old turns folded into the summary", n)
	}
	out, _, code := conchRun(t, env, "transcript cli:local")
	if code != 0 || !strings.Contains(out, "context compacted") {
		t.Errorf("transcript (exit %d) shows no compaction step", code)
	}
}

// TestUpWatchWakesTheConversation: through `conch up`, a real sandbox and
// the store, the model starts a command in a terminal and watches it; when
// the command exits the watch wakes the conversation, whose answer reaches
// the web chat as its own turn.
func TestUpWatchWakesTheConversation(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	instance := "wt" + randomHex(t)
	addr := freeAddr(t)
	env := append(testEnv(srv, fakellm.OpenAI, dir), engineEnv(t, e, instance)...)
	env = append(env, "CONCH_GATEWAY_LISTEN="+addr, "CONCH_SCHEDULE_ENABLED=true")
	instanceContainers(t, e.Client(t), instance)
	srv.Push(
		fakellm.ToolCall("terminal_open", `{}`),
		fakellm.ToolCall("terminal_type", `{"tty":0,"expect":"bash","text":"sleep 3"}`),
		fakellm.ToolCall("watch", `{"on":"exit","terminal":0,"message":"report the sleep"}`),
		fakellm.Text("Watching the sleep."),
		fakellm.Text("The sleep is over."),
	)
	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open http://"+addr+"/login?token=")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	wc := webLogin(t, env, "http://"+addr)
	id := wc.newConversation(t)
	conn := wc.socket(t, ctx, id)
	f, _ := json.Marshal(map[string]string{"type": "send", "id": "w1", "text": "run a sleep and tell me when it ends"})
	if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
		t.Fatal(err)
	}
	var answers []string
	var wake string
	for len(answers) < 2 {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("answers so far %q: %v", answers, err)
		}
		var f wireEvent
		if json.Unmarshal(data, &f) != nil || f.Event == nil || f.Event.Type != "message" {
			continue
		}
		switch f.Event.Data.Role {
		case "assistant":
			answers = append(answers, f.Event.Data.Text)
		case "user":
			if strings.HasPrefix(f.Event.Data.Text, "[Watch ") {
				wake = f.Event.Data.Text
			}
		}
	}
	if answers[0] != "Watching the sleep." || answers[1] != "The sleep is over." {
		t.Fatalf("answers %q", answers)
	}
	if !strings.Contains(wake, "report the sleep") {
		t.Fatalf("the wake's message is %q, want the watch's", wake)
	}
	if got := srv.Requests()[4].LastUserText(); !strings.HasPrefix(got, "[Watch ") {
		t.Fatalf("the fifth request answers %q, want the watch's wake", got)
	}
}

// TestUpStopAndResetThroughTheStore: /stop ends a running turn (the model
// hangs) and the conversation goes on; /reset forgets it, and the next
// request holds nothing from before. Through `conch up`, the web chat and
// the SQLite store.
func TestUpStopAndResetThroughTheStore(t *testing.T) {
	testenv.Short(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	env := append(testEnv(srv, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN="+addr)
	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open http://"+addr+"/login?token=")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wc := webLogin(t, env, "http://"+addr)
	conn := wc.socket(t, ctx, wc.newConversation(t))
	n := 0
	send := func(text string) {
		n++
		f, _ := json.Marshal(map[string]string{"type": "send", "id": fmt.Sprint("m", n), "text": text})
		if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
			t.Fatal(err)
		}
	}
	// next returns the next event whose data has a non-empty text or status.
	type got struct{ typ, text, status, reason string }
	next := func(want func(got) bool) got {
		t.Helper()
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("read: %v; stderr:\n%s", err, p.stderr)
			}
			var f struct {
				Type  string `json:"type"`
				Event *struct {
					Type string `json:"type"`
					Data struct {
						Role, Text, Status, Reason string
					} `json:"data"`
				} `json:"event"`
			}
			if json.Unmarshal(data, &f) != nil || f.Event == nil {
				continue
			}
			g := got{f.Event.Type, f.Event.Data.Text, f.Event.Data.Status, f.Event.Data.Reason}
			if want(g) {
				return g
			}
		}
	}
	srv.Push(fakellm.Hang(), fakellm.Text("fresh answer"), fakellm.Text("after the reset"))
	send("think forever")
	next(func(g got) bool { return g.typ == "turn" && g.status == "running" })
	if err := srv.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	send("/stop")
	// The notice and the turn's end come in either order.
	var notice, stopped got
	next(func(g got) bool {
		switch {
		case g.typ == "notice":
			notice = g
		case g.typ == "turn" && g.status == "stopped":
			stopped = g
		}
		return notice.typ != "" && stopped.typ != ""
	})
	if notice.text != "Stopped." || stopped.reason != "stopped_by_user" {
		t.Fatalf("/stop answered %q, the turn stopped with %q", notice.text, stopped.reason)
	}
	send("hello again")
	if g := next(func(g got) bool { return g.typ == "message" && g.text != "hello again" }); g.text != "fresh answer" {
		t.Fatalf("after /stop: %q", g.text)
	}
	send("/reset")
	if g := next(func(g got) bool { return g.typ == "notice" }); !strings.HasPrefix(g.text, "Conversation reset") {
		t.Fatalf("/reset answered %q", g.text)
	}
	send("new topic")
	if g := next(func(g got) bool { return g.typ == "message" && g.text != "new topic" }); g.text != "after the reset" {
		t.Fatalf("after /reset: %q", g.text)
	}
	last, _ := srv.Last()
	for _, m := range last.Messages {
		if strings.Contains(m.Text, "hello again") || strings.Contains(m.Text, "think forever") {
			t.Fatalf("the request after /reset still holds %q", m.Text)
		}
	}
}
