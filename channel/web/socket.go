package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"conch"
)

// clientFrame is what the page sends on the chat socket.
type clientFrame struct {
	// Type is "send".
	Type string `json:"type"`
	// ID is the page's id for the message; a page that resends after a
	// dropped connection uses the same id, and the store keeps one.
	ID   string `json:"id"`
	Text string `json:"text"`
	// Files are pasted, dropped or recorded files, base64 in the frame.
	Files []clientFile `json:"files,omitempty"`
}

// clientFile is one file of a message as the page sends it.
type clientFile struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Data string `json:"data"` // base64
}

// maxFiles caps the files of one message.
const maxFiles = 10

// serverFrame is what the chat socket sends.
type serverFrame struct {
	// Type is "event", "events", "history", "ack" or "error".
	Type  string       `json:"type"`
	Event *conch.Event `json:"event,omitempty"`
	// HTML is the sanitised rendering of a reply or notice event.
	HTML string `json:"html,omitempty"`
	// ID answers a send (ack, error).
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
	// Frames are the frames of an "events" frame (a socket opened with
	// batch=1): events that were waiting together, in order.
	Frames []serverFrame `json:"frames,omitempty"`
	// Messages and Seq: a "history" frame replaces what the page shows
	// when the hub no longer keeps the events it asked for.
	Messages []historyMessage `json:"messages,omitempty"`
	Seq      int64            `json:"seq,omitempty"`
}

type historyMessage struct {
	Role conch.Role `json:"role"`
	Text string     `json:"text"`
	HTML string     `json:"html,omitempty"`
	// Attachments are the files sent with an answer, as in its event.
	Attachments []conch.Attachment `json:"attachments,omitempty"`
}

var clientIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

const (
	pingEvery    = 30 * time.Second
	writeTimeout = 15 * time.Second
)

// readLimit is the largest frame read: well above the message cap, so a
// too-long message gets a clear answer instead of a closed socket.
func (c *Channel) readLimit() int64 {
	// Text may be escaped to 4 bytes a byte in JSON; files are base64.
	return max(2<<20, 4*int64(c.opts.MaxMessageBytes)+int64(c.opts.MaxFileBytes)/3*4+64<<10)
}

// chatSocket is the chat WebSocket of one conversation:
// GET /api/chat?c=<id>&after=<seq>[&batch=1]. With batch=1 (the page asks
// for it) events that are already waiting when the socket is free go out
// together in one "events" frame, in order.
func (c *Channel) chatSocket(w http.ResponseWriter, r *http.Request) {
	cv, err := c.convs.Get(r.Context(), r.URL.Query().Get("c"))
	if err != nil {
		c.writeErr(w, "chat", err)
		return
	}
	after := int64(0)
	if s := r.URL.Query().Get("after"); s != "" {
		after, err = strconv.ParseInt(s, 10, 64)
		if err != nil || after < 0 {
			writeError(w, http.StatusBadRequest, "after: want a sequence number")
			return
		}
	}
	conn, err := websocket.Accept(w, r, c.acceptOptions())
	if err != nil {
		c.log.Warn("chat socket refused", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "err", err)
		return // Accept wrote the answer (403 for a foreign origin)
	}
	conn.SetReadLimit(c.readLimit())
	s := &chatSession{c: c, conn: conn, key: cv.Key(), cookie: sessionCookie(r), token: requestToken(r), batch: r.URL.Query().Get("batch") == "1"}
	s.run(r.Context(), after)
}

// acceptOptions are the WebSocket handshake's: the page's origin (or an
// allowed one), and the subprotocol the page offers beside its token.
func (c *Channel) acceptOptions() *websocket.AcceptOptions {
	return &websocket.AcceptOptions{OriginPatterns: c.opts.OriginPatterns, Subprotocols: []string{socketProtocol}}
}

func sessionCookie(r *http.Request) string {
	if ck, err := r.Cookie(cookieName); err == nil {
		return ck.Value
	}
	return ""
}

// chatSession is one open chat socket.
type chatSession struct {
	c      *Channel
	conn   *websocket.Conn
	key    conch.ConversationKey
	cookie string
	token  string
	// batch: the page takes "events" frames (see chatSocket).
	batch bool
}

func (s *chatSession) run(ctx context.Context, after int64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	// The page's first message is read only once the events are
	// followed: its streamed text is live only, and would otherwise be
	// lost when the turn starts before the subscription.
	following := make(chan struct{})
	var once sync.Once
	ready := func() { once.Do(func() { close(following) }) }
	wg.Go(func() {
		if err := s.pump(ctx, after, ready); err != nil && ctx.Err() == nil {
			s.c.log.Warn("chat events", "conversation", s.key.String(), "err", err)
			s.conn.Close(websocket.StatusInternalError, "event stream failed; reconnect")
		}
		cancel()
	})
	wg.Go(func() { s.keepalive(ctx); cancel() })
	select {
	case <-following:
	case <-ctx.Done():
	}
	status, reason := s.readLoop(ctx)
	// Close before cancelling: an event being written when the context is
	// cancelled drops the connection (the page would see 1006, not the
	// status that says why).
	if status != 0 {
		s.conn.Close(status, reason)
	} else {
		s.conn.CloseNow()
	}
	cancel()
}

// readLoop handles the page's frames until the socket ends. It returns the
// close status to send, 0 when the socket is already gone.
func (s *chatSession) readLoop(ctx context.Context) (websocket.StatusCode, string) {
	for {
		typ, b, err := s.conn.Read(ctx)
		if err != nil {
			return 0, ""
		}
		if typ != websocket.MessageText {
			return websocket.StatusUnsupportedData, "binary frames are not accepted"
		}
		var f clientFrame
		if err := json.Unmarshal(b, &f); err != nil {
			return websocket.StatusInvalidFramePayloadData, "malformed frame: want JSON"
		}
		switch f.Type {
		case "send":
			s.send(ctx, f)
		case "ping":
			s.write(ctx, serverFrame{Type: "pong", ID: f.ID})
		default:
			return websocket.StatusInvalidFramePayloadData, "unknown frame type"
		}
	}
}

// send hands one message to the gateway. The message is refused whole or
// stored whole: nothing is cut or half stored.
func (s *chatSession) send(ctx context.Context, f clientFrame) {
	fail := func(msg string) { s.write(ctx, serverFrame{Type: "error", ID: f.ID, Error: msg}) }
	switch {
	case !clientIDRe.MatchString(f.ID):
		fail("a message needs an id of 1-64 letters, digits, - or _")
		return
	case len(f.Text) > s.c.opts.MaxMessageBytes:
		fail(fmt.Sprintf("This message is too long (%d bytes; the limit is %d). Nothing was sent: shorten it, or put the text in a file.", len(f.Text), s.c.opts.MaxMessageBytes))
		return
	case strings.TrimSpace(f.Text) == "" && len(f.Files) == 0:
		fail("An empty message was not sent.")
		return
	case !utf8.ValidString(f.Text):
		fail("This message is not valid UTF-8; nothing was sent.")
		return
	}
	h := s.c.waitHandler(ctx)
	if h == nil {
		if ctx.Err() == nil {
			s.c.log.Warn("web message refused: conch is still starting", "conversation", s.key.String())
			fail("conch is still starting; try again in a moment.")
		}
		return
	}
	atts, why := s.c.files(f.Files)
	if why != "" {
		s.c.log.Warn("web message refused", "conversation", s.key.String(), "why", why)
		fail(why)
		return
	}
	in := conch.Inbound{
		Key: s.key, Sender: s.c.opts.Owner, SenderName: string(s.c.opts.Owner),
		Text: f.Text, ExternalID: s.key.ID + "/" + f.ID, ReceivedAt: s.c.opts.Now(), Attachments: atts,
	}
	if err := h.HandleInbound(ctx, in); err != nil {
		s.c.log.Error("web message", "conversation", s.key.String(), "err", err)
		fail("The message could not be stored: " + conch.UserMessage(err))
		return
	}
	s.write(ctx, serverFrame{Type: "ack", ID: f.ID})
}

// files decodes a message's files; why, when not empty, says in words for
// the person why the message was refused whole.
func (c *Channel) files(fs []clientFile) ([]conch.Attachment, string) {
	if len(fs) > maxFiles {
		return nil, fmt.Sprintf("A message takes at most %d files; nothing was sent.", maxFiles)
	}
	var atts []conch.Attachment
	total := 0
	for i, f := range fs {
		data, err := base64.StdEncoding.DecodeString(f.Data)
		if err != nil {
			return nil, fmt.Sprintf("The file “%s” arrived damaged (not base64); nothing was sent.", clip(f.Name, 60))
		}
		if total += len(data); total > c.opts.MaxFileBytes {
			return nil, fmt.Sprintf("The files are larger than %d MB together; nothing was sent.", c.opts.MaxFileBytes>>20)
		}
		mt := f.Type
		if mt == "" || len(mt) > 100 {
			mt = http.DetectContentType(data)
		}
		name := conch.SafeName(f.Name, fmt.Sprintf("file-%d", i+1))
		atts = append(atts, conch.Attachment{Name: name, MediaType: mt, Size: int64(len(data)),
			Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }})
	}
	return atts, ""
}

// pump follows the conversation's events and writes them to the socket,
// starting after the Seq the page saw last. It calls ready once the first
// subscription stands (or when it gives up).
func (s *chatSession) pump(ctx context.Context, after int64, ready func()) error {
	defer ready()
	last := after
	for ctx.Err() == nil {
		ch, err := s.c.opts.Events.Subscribe(ctx, s.key, last)
		if err == nil {
			ready()
		}
		if conch.KindOf(err) == conch.KindNotFound {
			// The hub no longer keeps what the page asks for: send the
			// stored conversation, then follow from now.
			if last, err = s.history(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		for ev := range ch {
			// Ephemeral events (streamed text, tool output) are live only
			// and carry the Seq of the last kept event: pass them on
			// without moving the resume point.
			frames, next, open := s.take(ev, ch, last)
			if len(frames) == 0 {
				if !open {
					break
				}
				continue // never twice
			}
			f := frames[0]
			if len(frames) > 1 {
				f = serverFrame{Type: "events", Frames: frames}
			}
			if !s.write(ctx, f) {
				return nil
			}
			last = next
			if !open {
				break
			}
		}
		// Closed: ctx is done, or we fell behind; subscribe again from
		// the last Seq written.
	}
	return nil
}

// maxBatch caps the events of one "events" frame.
const maxBatch = 64

// take renders ev and, on a batching socket, the events already waiting
// on ch (up to maxBatch), leaving out kept events at or before last (never
// twice). It returns the frames, the resume point after them, and false
// when ch closed meanwhile.
func (s *chatSession) take(ev conch.Event, ch <-chan conch.Event, last int64) ([]serverFrame, int64, bool) {
	var frames []serverFrame
	add := func(ev conch.Event) {
		eph := conch.Ephemeral(ev.Data)
		if !eph && ev.Seq <= last || !forPage(ev.Data) {
			return
		}
		frames = append(frames, s.c.eventFrame(ev))
		if !eph {
			last = ev.Seq
		}
	}
	add(ev)
	for s.batch && len(frames) < maxBatch {
		select {
		case ev, ok := <-ch:
			if !ok {
				return frames, last, false
			}
			add(ev)
		default:
			return frames, last, true
		}
	}
	return frames, last, true
}

// forPage reports whether the page shows an event: a model call's usage
// and the context's size are for metrics and /usage (both ephemeral), and
// the chat socket leaves them out (they were a third of a turn's frames).
func forPage(d conch.EventData) bool {
	switch d.(type) {
	case conch.ModelUsage, conch.ContextUse, *conch.ModelUsage, *conch.ContextUse:
		return false
	}
	return true
}

// eventFrame renders an event for the page.
func (c *Channel) eventFrame(ev conch.Event) serverFrame {
	f := serverFrame{Type: "event", Event: &ev}
	switch d := ev.Data.(type) {
	case conch.MessageEvent:
		if d.Role == conch.RoleAssistant {
			f.HTML = c.md.HTML(d.Text)
		}
	case *conch.MessageEvent:
		if d.Role == conch.RoleAssistant {
			f.HTML = c.md.HTML(d.Text)
		}
	case conch.NoticeEvent:
		f.HTML = c.md.HTML(d.Text)
	case *conch.NoticeEvent:
		f.HTML = c.md.HTML(d.Text)
	}
	return f
}

// history sends the stored conversation and returns the Seq to follow from.
func (s *chatSession) history(ctx context.Context) (int64, error) {
	seq, err := s.c.opts.Events.LastSeq(ctx, s.key)
	if err != nil {
		return 0, fmt.Errorf("last seq: %w", err)
	}
	f := serverFrame{Type: "history", Seq: seq, Messages: []historyMessage{}}
	if s.c.opts.History != nil {
		msgs, err := s.c.opts.History.History(ctx, s.key)
		if err != nil {
			return 0, fmt.Errorf("history: %w", err)
		}
		// The files a turn's tools sent go with its answer (the assistant
		// message without tool calls that follows them).
		var files []conch.Attachment
		for _, m := range msgs {
			if r := m.ToolResult; r != nil && !r.IsError {
				files = append(files, r.Attachments...)
			}
			if m.Role == conch.RoleUser && !m.Note {
				files = nil
			}
			if (m.Role != conch.RoleUser && m.Role != conch.RoleAssistant) || m.Note || strings.TrimSpace(m.Text) == "" {
				continue
			}
			hm := historyMessage{Role: m.Role, Text: m.Text}
			if m.Role == conch.RoleAssistant {
				hm.HTML = s.c.md.HTML(m.Text)
				if len(m.ToolCalls) == 0 {
					hm.Attachments, files = files, nil
				}
			}
			f.Messages = append(f.Messages, hm)
		}
	}
	if !s.write(ctx, f) {
		return seq, ctx.Err()
	}
	return seq, nil
}

// keepalive pings the page and ends the socket when the session was revoked
// (`conch web logout-all`) or expired.
func (s *chatSession) keepalive(ctx context.Context) {
	keepalive(ctx, s.c, s.conn, s.cookie, s.token)
}

func keepalive(ctx context.Context, c *Channel, conn *websocket.Conn, cookie, token string) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ok, err := c.auth.Check(ctx, cookie, token); err == nil && !ok {
			conn.Close(websocket.StatusPolicyViolation, "logged out")
			return
		}
		pctx, cancel := context.WithTimeout(ctx, writeTimeout)
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			return
		}
	}
}

// write sends one frame; false when the socket is gone.
func (s *chatSession) write(ctx context.Context, f serverFrame) bool {
	b, err := json.Marshal(f)
	if err != nil {
		s.c.log.Error("encode frame", "err", err)
		return true
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return s.conn.Write(wctx, websocket.MessageText, b) == nil
}

// terminalSocket streams one terminal's output to the dashboard:
// GET /api/terminal?key=<channel:id>&tty=<n>. The first frame is text,
// {"type":"size","cols":…,"rows":…}; output follows as binary frames. The
// view is read-only: frames from the page are ignored.
func (c *Channel) terminalSocket(w http.ResponseWriter, r *http.Request) {
	if c.opts.Terminals == nil {
		writeError(w, http.StatusNotFound, "no terminals: conch runs without sandboxes")
		return
	}
	key, err := conch.ParseConversationKey(r.URL.Query().Get("key"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "key: want channel:id")
		return
	}
	n, err := strconv.Atoi(r.URL.Query().Get("tty"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "tty: want a terminal number")
		return
	}
	conn, err := websocket.Accept(w, r, c.acceptOptions())
	if err != nil {
		c.log.Warn("terminal socket refused", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "err", err)
		return
	}
	defer conn.CloseNow()
	gone := conn.CloseRead(r.Context()) // read-only: done when the page goes
	ctx, cancel := context.WithCancel(gone)
	defer cancel()
	go keepalive(ctx, c, conn, sessionCookie(r), requestToken(r))

	out := newOutputQueue(1 << 20)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer cancel()
		for {
			b, ok := out.next(ctx)
			if !ok {
				return
			}
			wctx, wcancel := context.WithTimeout(ctx, writeTimeout)
			err := conn.Write(wctx, websocket.MessageBinary, b)
			wcancel()
			if err != nil {
				return
			}
		}
	})
	size := func(cols, rows int) {
		b, _ := json.Marshal(map[string]any{"type": "size", "cols": cols, "rows": rows})
		wctx, wcancel := context.WithTimeout(ctx, writeTimeout)
		_ = conn.Write(wctx, websocket.MessageText, b)
		wcancel()
	}
	err = c.opts.Terminals.FollowTerminal(ctx, key, n, size, out.push)
	out.close()
	wg.Wait()
	switch {
	case gone.Err() != nil:
	case out.overflowed():
		conn.Close(websocket.StatusTryAgainLater, "viewer fell behind; reconnect")
	case err != nil && conch.KindOf(err) == conch.KindNotFound:
		conn.Close(websocket.StatusNormalClosure, "no such terminal")
	case err != nil:
		c.log.Warn("follow terminal", "conversation", key.String(), "tty", n, "err", err)
		conn.Close(websocket.StatusInternalError, clip("terminal: "+err.Error(), 100))
	default:
		conn.Close(websocket.StatusNormalClosure, "terminal ended")
	}
}

// outputQueue hands terminal output from tmux's reader to the socket writer
// without blocking the reader: chunks are joined while the socket is busy.
// A viewer that falls more than limit bytes behind is cut off (the page
// reconnects and gets a fresh screen).
type outputQueue struct {
	mu     sync.Mutex
	buf    []byte
	limit  int
	closed bool
	over   bool
	wake   chan struct{}
}

func newOutputQueue(limit int) *outputQueue {
	return &outputQueue{limit: limit, wake: make(chan struct{}, 1)}
}

func (q *outputQueue) push(b []byte) {
	q.mu.Lock()
	if len(q.buf)+len(b) > q.limit {
		q.over = true
	} else if !q.over {
		q.buf = append(q.buf, b...)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *outputQueue) overflowed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.over
}

func (q *outputQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next returns the output gathered so far; false when the queue is closed
// and drained, overflowed, or ctx is done.
func (q *outputQueue) next(ctx context.Context) ([]byte, bool) {
	for {
		q.mu.Lock()
		b, closed, over := q.buf, q.closed, q.over
		q.buf = nil
		q.mu.Unlock()
		if over {
			return nil, false
		}
		if len(b) > 0 {
			return b, true
		}
		if closed {
			return nil, false
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			return nil, false
		}
	}
}
