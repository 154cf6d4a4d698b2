package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

// wsConn is one Socket Mode connection.
type wsConn struct {
	c      *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	out    chan []byte
}

// send queues a frame; frames go out in the order queued (the writer
// goroutine of serveSocket). A connection that cannot keep up is closed.
func (w *wsConn) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	select {
	case w.out <- b:
		return nil
	default:
		w.close()
		return errors.New("slack fake: socket backlog full")
	}
}

func (w *wsConn) close() {
	w.cancel()
	_ = w.c.CloseNow()
}

type debugInfo struct {
	Host                      string `json:"host"`
	BuildNumber               int    `json:"build_number,omitempty"`
	ApproximateConnectionTime int    `json:"approximate_connection_time,omitempty"`
}

type helloMsg struct {
	Type           string    `json:"type"`
	NumConnections int       `json:"num_connections"`
	DebugInfo      debugInfo `json:"debug_info"`
	ConnectionInfo struct {
		AppID string `json:"app_id"`
	} `json:"connection_info"`
}

type disconnectMsg struct {
	Type      string    `json:"type"`
	Reason    string    `json:"reason"`
	DebugInfo debugInfo `json:"debug_info"`
}

type envelopeMsg struct {
	EnvelopeID             string          `json:"envelope_id"`
	Payload                json.RawMessage `json:"payload"`
	Type                   string          `json:"type"`
	AcceptsResponsePayload bool            `json:"accepts_response_payload"`
	RetryAttempt           int             `json:"retry_attempt"`
	RetryReason            string          `json:"retry_reason"`
}

// serveSocket is the WebSocket URL apps.connections.open handed out.
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	ok := s.tickets[ticket]
	delete(s.tickets, ticket)
	s.mu.Unlock()
	if !ok {
		http.Error(w, "invalid ticket", http.StatusUnauthorized)
		return
	}
	// Slack does not check the Origin a client sends.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	conn := &wsConn{c: c, ctx: ctx, cancel: cancel, out: make(chan []byte, 4096)}
	defer conn.close()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case b := <-conn.out:
				wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
				err := c.Write(wctx, websocket.MessageText, b)
				wcancel()
				if err != nil {
					conn.close()
					return
				}
			}
		}
	}()

	s.mu.Lock()
	s.conns = append(s.conns, conn)
	s.opened++
	hello := helloMsg{Type: "hello", NumConnections: len(s.conns),
		DebugInfo: debugInfo{Host: "applink-fake", BuildNumber: 1, ApproximateConnectionTime: 18060}}
	hello.ConnectionInfo.AppID = s.AppID
	_ = conn.send(hello)
	// Envelopes never acknowledged are delivered again on a new connection.
	if s.eventsURL == "" {
		for _, e := range s.envelopes {
			s.deliverLocked(e, conn, "timeout")
		}
	}
	s.notifyLocked()
	s.mu.Unlock()
	defer s.dropConn(conn)

	go func() {
		t := time.NewTicker(s.PingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
				err := c.Ping(pctx)
				pcancel()
				if err != nil {
					conn.close()
					return
				}
			}
		}
	}()
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(b, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		s.mu.Lock()
		if !s.ignoreAcks {
			for _, e := range s.envelopes {
				if e.ID == ack.EnvelopeID {
					e.acked = true
				}
			}
			s.acks = append(s.acks, ack.EnvelopeID)
		}
		s.notifyLocked()
		s.mu.Unlock()
	}
}

func (s *Server) dropConn(conn *wsConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.conns {
		if c == conn {
			s.conns = append(s.conns[:i], s.conns[i+1:]...)
			break
		}
	}
	s.notifyLocked()
}

// enqueueLocked queues an events_api payload and sends it on the newest
// connection, if any (else it waits for one).
func (s *Server) enqueueLocked(payload []byte) {
	s.enqueueTypeLocked(payload, "events_api")
}

// enqueueTypeLocked is enqueueLocked for an envelope of type typ
// (events_api, interactive).
func (s *Server) enqueueTypeLocked(payload []byte, typ string) {
	e := &envelope{Type: typ, ID: randomHex(8) + "-" + randomHex(4) + "-" + randomHex(4), Payload: payload}
	s.envelopes = append(s.envelopes, e)
	if s.eventsURL != "" {
		e.sentAt = time.Now()
		s.eventsQueue <- e
		return
	}
	var conn *wsConn
	if n := len(s.conns); n > 0 {
		conn = s.conns[n-1]
	}
	if conn != nil {
		e.sentAt = time.Now()
		_ = conn.send(envelopeMsg{EnvelopeID: e.ID, Payload: e.Payload, Type: e.Type, AcceptsResponsePayload: e.Type == "interactive"})
	}
}

// deliverLocked sends an envelope not yet acknowledged again.
func (s *Server) deliverLocked(e *envelope, conn *wsConn, reason string) {
	if e.acked || e.Retries >= maxRetries {
		return
	}
	e.Retries++
	e.sentAt = time.Now()
	_ = conn.send(envelopeMsg{EnvelopeID: e.ID, Payload: e.Payload, Type: e.Type, RetryAttempt: e.Retries, RetryReason: reason})
}

// redeliverLoop sends envelopes not acknowledged within AckTimeout again.
func (s *Server) redeliverLoop() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		s.mu.Lock()
		var conn *wsConn
		if n := len(s.conns); n > 0 {
			conn = s.conns[n-1]
		}
		if s.closed {
			s.mu.Unlock()
			return
		}
		if s.eventsURL != "" {
			s.mu.Unlock()
			continue
		}
		for _, e := range s.envelopes {
			if !e.acked && conn != nil && !e.sentAt.IsZero() && time.Since(e.sentAt) > s.ackTimeout {
				s.deliverLocked(e, conn, "timeout")
			}
		}
		s.mu.Unlock()
	}
}

// Disconnect asks every connection to reconnect, as Slack does before it
// recycles a socket (reason "refresh_requested" or "warning").
func (s *Server) Disconnect(reason string) {
	s.mu.Lock()
	conns := append([]*wsConn(nil), s.conns...)
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.send(disconnectMsg{Type: "disconnect", Reason: reason, DebugInfo: debugInfo{Host: "applink-fake"}})
	}
}

// DropConnections cuts every socket without a word (a network failure).
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := append([]*wsConn(nil), s.conns...)
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// IgnoreAcks makes the server forget acks (as if they were lost on the
// way): every envelope is delivered again.
func (s *Server) IgnoreAcks(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignoreAcks = on
}
