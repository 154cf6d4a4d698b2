package discord

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// maxReplay bounds a session's kept dispatches (Discord keeps a window).
const maxReplay = 1000

type dispatch struct {
	seq int64
	t   string
	d   json.RawMessage
}

// session is a Gateway session: what it asked for and what it was sent.
type session struct {
	id      string
	intents int
	seq     int64
	events  []dispatch
	conn    *gwConn
}

type gwConn struct {
	c      *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	out    chan []byte
	sess   *session
}

type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

func (g *gwConn) send(op int, d any, seq int64, t string) {
	raw, err := json.Marshal(d)
	if err != nil {
		return
	}
	p := payload{Op: op, D: raw}
	if op == 0 {
		p.S, p.T = &seq, &t
	}
	b, _ := json.Marshal(p)
	select {
	case g.out <- b:
	default:
		g.close()
	}
}

func (g *gwConn) close() {
	g.cancel()
	_ = g.c.CloseNow()
}

func (g *gwConn) closeWith(code int, reason string) {
	_ = g.c.Close(websocket.StatusCode(code), reason)
	g.cancel()
}

// serveGateway is the Gateway WebSocket.
func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	g := &gwConn{c: c, ctx: ctx, cancel: cancel, out: make(chan []byte, 4096)}
	defer g.close()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case b := <-g.out:
				wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
				err := c.Write(wctx, websocket.MessageText, b)
				wcancel()
				if err != nil {
					g.close()
					return
				}
			}
		}
	}()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.conns = append(s.conns, g)
	g.send(10, map[string]int{"heartbeat_interval": s.HeartbeatInterval}, 0, "")
	s.notifyLocked()
	s.mu.Unlock()
	defer s.dropConn(g)

	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		var p payload
		if json.Unmarshal(b, &p) != nil {
			g.closeWith(4002, "Error while decoding payload.")
			return
		}
		switch p.Op {
		case 1:
			g.send(11, nil, 0, "")
		case 2:
			if err := s.identify(g, p.D); err != nil {
				return
			}
		case 6:
			s.resume(g, p.D)
		case 3, 4, 8:
		default:
			g.closeWith(4001, "Unknown opcode.")
			return
		}
	}
}

func (s *Server) tokenOK(t string) bool {
	return strings.TrimPrefix(t, "Bot ") == s.Token
}

func (s *Server) identify(g *gwConn, raw json.RawMessage) error {
	var id struct {
		Token   string `json:"token"`
		Intents *int   `json:"intents"`
	}
	if err := json.Unmarshal(raw, &id); err != nil {
		g.closeWith(4002, "Error while decoding payload.")
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.identifies++
	s.notifyLocked()
	switch {
	case !s.tokenOK(id.Token):
		g.closeWith(4004, "Authentication failed.")
		return errors.New("auth")
	case id.Intents == nil:
		g.closeWith(4013, "Invalid intent(s).")
		return errors.New("intents")
	case *id.Intents&IntentMessageContent != 0 && !s.PrivilegedContent:
		g.closeWith(4014, "Disallowed intent(s).")
		return errors.New("intents")
	}
	sess := &session{id: randomHex(16), intents: *id.Intents, conn: g}
	s.sessions[sess.id] = sess
	g.sess = sess
	guilds := []map[string]any{}
	seen := map[string]bool{}
	for _, ch := range s.channels {
		if ch.GuildID != "" && !seen[ch.GuildID] {
			seen[ch.GuildID] = true
			guilds = append(guilds, map[string]any{"id": ch.GuildID, "unavailable": true})
		}
	}
	ready := map[string]any{
		"v": 9, "user": s.Bot, "guilds": guilds, "session_id": sess.id, "session_type": "normal",
		"resume_gateway_url": "ws" + strings.TrimPrefix(s.URL, "http"),
		"private_channels":   []any{}, "application": map[string]any{"id": s.AppID, "flags": 0},
	}
	s.emitLocked(sess, "READY", ready)
	return nil
}

func (s *Server) resume(g *gwConn, raw json.RawMessage) {
	var rs struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	_ = json.Unmarshal(raw, &rs)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resumes++
	s.notifyLocked()
	if !s.tokenOK(rs.Token) {
		g.closeWith(4004, "Authentication failed.")
		return
	}
	sess, ok := s.sessions[rs.SessionID]
	if !ok || (len(sess.events) > 0 && sess.events[0].seq > rs.Seq+1) {
		g.send(9, false, 0, "")
		return
	}
	if old := sess.conn; old != nil && old != g {
		old.close()
	}
	sess.conn, g.sess = g, sess
	for _, e := range sess.events {
		if e.seq > rs.Seq {
			g.send(0, e.d, e.seq, e.t)
		}
	}
	s.emitLocked(sess, "RESUMED", map[string]any{})
}

func (s *Server) dropConn(g *gwConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.conns {
		if c == g {
			s.conns = append(s.conns[:i], s.conns[i+1:]...)
			break
		}
	}
	if g.sess != nil && g.sess.conn == g {
		g.sess.conn = nil
	}
	s.notifyLocked()
}

// emitLocked sends one dispatch on a session, keeping it for a resume.
func (s *Server) emitLocked(sess *session, t string, d any) {
	raw, err := json.Marshal(d)
	if err != nil {
		return
	}
	sess.seq++
	if t != "RESUMED" && t != "READY" {
		sess.events = append(sess.events, dispatch{seq: sess.seq, t: t, d: raw})
		if len(sess.events) > maxReplay {
			sess.events = sess.events[len(sess.events)-maxReplay:]
		}
	}
	if sess.conn != nil {
		sess.conn.send(0, json.RawMessage(raw), sess.seq, t)
	}
}

// dispatchLocked sends a message event to every session whose intents
// cover it, with the content the intents allow.
func (s *Server) dispatchLocked(t string, m *Message) {
	for _, sess := range s.sessions {
		need := IntentGuildMessages
		if m.GuildID == "" {
			need = IntentDirectMessages
		}
		if sess.intents&need == 0 {
			continue
		}
		view := *m
		if sess.intents&IntentMessageContent == 0 {
			saved := s.PrivilegedContent
			s.PrivilegedContent = false
			view = s.viewLocked(view)
			s.PrivilegedContent = saved
		}
		s.emitLocked(sess, t, view)
	}
}

// Reconnect asks every connection to reconnect and resume (op 7).
func (s *Server) Reconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.conns {
		g.send(7, nil, 0, "")
	}
}

// DropGateway cuts every Gateway connection without a word; sessions stay
// resumable.
func (s *Server) DropGateway() {
	s.mu.Lock()
	conns := append([]*gwConn(nil), s.conns...)
	s.mu.Unlock()
	for _, g := range conns {
		g.close()
	}
}

// InvalidateSessions ends every session (op 9, not resumable): clients
// identify again and must backfill what they missed over REST.
func (s *Server) InvalidateSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sess := range s.sessions {
		if sess.conn != nil {
			sess.conn.send(9, false, 0, "")
		}
		delete(s.sessions, id)
	}
}

// Gateway counts: open connections, identifies and resumes so far.
func (s *Server) Gateway() (open, identifies, resumes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns), s.identifies, s.resumes
}
