package matrix

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
	_ "modernc.org/sqlite"

	"conch"
	"conch/gateway"
	"conch/internal/testenv"
	"conch/internal/testenv/homeserver"
	"conch/sqlite"
)

// waitLimit bounds every wait for something the homeserver relays.
const waitLimit = 30 * time.Second

// openDB opens a SQLite file for a peer's crypto store (WAL, busy timeout,
// immediate transactions, like conch's store).
func openDB(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// recorder is a fake conch.Handler that records what the channel delivers.
type recorder struct {
	mu       sync.Mutex
	inbounds []conch.Inbound
	closed   []conch.ConversationKey
	inCh     chan conch.Inbound
	closedCh chan conch.ConversationKey
	// reply, when set, is called for every inbound (in its own goroutine).
	reply func(in conch.Inbound)
	// allow is the allowlist Admits applies, as the gateway's would.
	allow []string
}

// Admits implements conch.Handler with the gateway's own allowlist rule.
func (r *recorder) Admits(_ context.Context, _ conch.ChannelName, ids ...conch.UserID) bool {
	al := gateway.NewAllowlist(r.allow...)
	for _, id := range ids {
		if al.Allows(id) {
			return true
		}
	}
	return false
}

var _ conch.Handler = (*recorder)(nil)

func newRecorder() *recorder {
	return &recorder{inCh: make(chan conch.Inbound, 100), closedCh: make(chan conch.ConversationKey, 100)}
}

func (r *recorder) HandleInbound(_ context.Context, in conch.Inbound) error {
	r.mu.Lock()
	r.inbounds = append(r.inbounds, in)
	reply := r.reply
	r.mu.Unlock()
	r.inCh <- in
	if reply != nil {
		go reply(in)
	}
	return nil
}

func (r *recorder) ConversationClosed(_ context.Context, key conch.ConversationKey) error {
	r.mu.Lock()
	r.closed = append(r.closed, key)
	r.mu.Unlock()
	r.closedCh <- key
	return nil
}

func (r *recorder) setReply(f func(in conch.Inbound)) {
	r.mu.Lock()
	r.reply = f
	r.mu.Unlock()
}

func (r *recorder) all() []conch.Inbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]conch.Inbound(nil), r.inbounds...)
}

// next waits for the next delivered message.
func (r *recorder) next(tb testing.TB) conch.Inbound {
	tb.Helper()
	select {
	case in := <-r.inCh:
		return in
	case <-time.After(waitLimit):
		tb.Fatalf("no message delivered within %s", waitLimit)
		return conch.Inbound{}
	}
}

// nextWithText waits for a delivered message with the given text, failing
// on any other message in between.
func (r *recorder) nextWithText(tb testing.TB, text string) conch.Inbound {
	tb.Helper()
	in := r.next(tb)
	if in.Text != text {
		tb.Fatalf("delivered text: got %q, want %q", in.Text, text)
	}
	return in
}

func (r *recorder) nextClosed(tb testing.TB) conch.ConversationKey {
	tb.Helper()
	select {
	case k := <-r.closedCh:
		return k
	case <-time.After(waitLimit):
		tb.Fatalf("no conversation closed within %s", waitLimit)
		return conch.ConversationKey{}
	}
}

// env is one homeserver with a bot account.
type env struct {
	t        *testing.T
	hs       *homeserver.Server
	botID    string
	botToken string
	dir      string
	store    *sqlite.DB
	db       *sql.DB
	cursors  conch.CursorStore
	pickle   []byte
	logs     *testenv.SyncBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testenv.Short(t)
	hs := homeserver.Start(t)
	botID, token, _ := hs.Register(t, "conch")
	dir := t.TempDir()
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "conch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	pickle := make([]byte, 32)
	if _, err := rand.Read(pickle); err != nil {
		t.Fatal(err)
	}
	// The bot keeps its crypto tables and cursors in conch's own store, as in production.
	return &env{t: t, hs: hs, botID: botID, botToken: token, dir: dir, store: store, db: store.SQL(), cursors: store, pickle: pickle, logs: &testenv.SyncBuffer{}}
}

// options returns bot options with the access token; tests adjust them.
func (e *env) options(allow ...string) Options {
	return Options{
		Homeserver:  e.hs.URL,
		UserID:      e.botID,
		AccessToken: e.botToken,
		AllowFrom:   allow,
		DB:          e.db,
		Cursors:     e.cursors,
		PickleKey:   e.pickle,
		Logger:      slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		BackoffBase: 20 * time.Millisecond,
		BackoffMax:  200 * time.Millisecond,
	}
}

// bot is a running Channel.
type bot struct {
	*Channel
	rec      *recorder
	cancel   context.CancelFunc
	finished chan struct{}
	runErr   error
	errOK    bool
}

// wait returns Run's result once it returned by itself.
func (b *bot) wait(tb testing.TB) error {
	tb.Helper()
	select {
	case <-b.finished:
		return b.runErr
	case <-time.After(waitLimit):
		tb.Fatalf("Run did not return within %s", waitLimit)
		return nil
	}
}

// stop cancels Run and returns its result.
func (b *bot) stop() error {
	b.cancel()
	select {
	case <-b.finished:
		return b.runErr
	case <-time.After(waitLimit):
		return fmt.Errorf("Run did not return within %s after cancel", waitLimit)
	}
}

// startBot runs a channel until the test ends (or stop is called) and waits
// for its first sync.
func (e *env) startBot(opts Options) *bot {
	e.t.Helper()
	c, err := New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &bot{Channel: c, rec: newRecorder(), cancel: cancel, finished: make(chan struct{})}
	b.rec.allow = opts.AllowFrom
	go func() {
		defer close(b.finished)
		b.runErr = c.Run(ctx, b.rec)
	}()
	e.t.Cleanup(func() {
		if err := b.stop(); err != nil && !b.errOK {
			e.t.Errorf("Run: %v", err)
		}
		if e.t.Failed() {
			e.t.Logf("bot log:\n%s", tailString(e.logs.String(), 8000))
		}
	})
	select {
	case <-c.Synced():
	case <-b.finished:
		e.t.Fatalf("Run returned before the first sync: %v", b.runErr)
	case <-time.After(waitLimit):
		e.t.Fatalf("no first sync within %s", waitLimit)
	}
	return b
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// peer is a second Matrix client playing a person.
type peer struct {
	t      *testing.T
	cli    *mautrix.Client
	crypto *e2ee
	mu     sync.Mutex
	seen   []*event.Event
	events chan *event.Event
	enc    map[id.RoomID]bool
}

// newPeer registers a user and syncs it until the test ends. With withCrypto
// (builds with encryption, the default) it decrypts and can send encrypted messages.
func (e *env) newPeer(localpart string, withCrypto bool) *peer {
	t := e.t
	t.Helper()
	userID, token, deviceID := e.hs.Register(t, localpart)
	cli, err := mautrix.NewClient(e.hs.URL, id.UserID(userID), token)
	if err != nil {
		t.Fatal(err)
	}
	cli.DeviceID = id.DeviceID(deviceID)
	cli.StateStore = mautrix.NewMemoryStateStore()
	syncer := mautrix.NewDefaultSyncer()
	cli.Syncer = syncer
	p := &peer{t: t, cli: cli, events: make(chan *event.Event, 1000), enc: make(map[id.RoomID]bool)}
	ctx, cancel := context.WithCancel(context.Background())
	if withCrypto {
		pdb := openDB(t, filepath.Join(t.TempDir(), localpart+".db"))
		p.crypto, err = setupE2EE(ctx, cli, pdb, []byte("peer-pickle-key-"+localpart), cli.Log, e2eeHooks{
			decrypted: func(_ context.Context, evt *event.Event, _ bool) error { p.record(evt); return nil },
			lifetime:  ctx,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	syncer.OnEvent(cli.StateStoreSyncHandler)
	syncer.OnEvent(func(_ context.Context, evt *event.Event) {
		if evt.Mautrix.EventSource&(event.SourceTimeline|event.SourceEphemeral) != 0 {
			p.record(evt)
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cli.SyncWithContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		p.crypto.Close()
	})
	return p
}

func (p *peer) record(evt *event.Event) {
	p.mu.Lock()
	p.seen = append(p.seen, evt)
	p.mu.Unlock()
	p.events <- evt
}

func (p *peer) id() id.UserID { return p.cli.UserID }

// waitFor returns the first event (in arrival order, from now on) matching ok.
func (p *peer) waitFor(what string, ok func(*event.Event) bool) *event.Event {
	p.t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case evt := <-p.events:
			if ok(evt) {
				return evt
			}
		case <-deadline:
			p.t.Fatalf("%s: nothing within %s", what, waitLimit)
			return nil
		}
	}
}

// waitMessage waits for a message from sender in room (decrypted if needed).
func (p *peer) waitMessage(room id.RoomID, sender string) *event.Event {
	p.t.Helper()
	return p.waitFor("message from "+sender+" in "+string(room), func(evt *event.Event) bool {
		return evt.RoomID == room && evt.Type == event.EventMessage && string(evt.Sender) == sender
	})
}

// waitJoined waits until user joined room.
func (p *peer) waitJoined(room id.RoomID, user string) {
	p.t.Helper()
	p.waitFor(user+" joins "+string(room), func(evt *event.Event) bool {
		return evt.RoomID == room && evt.Type == event.StateMember && evt.GetStateKey() == user &&
			evt.Content.AsMember().Membership == event.MembershipJoin
	})
}

// createRoom creates a room, encrypted or not, inviting users.
func (p *peer) createRoom(encrypted bool, invite ...string) id.RoomID {
	p.t.Helper()
	req := &mautrix.ReqCreateRoom{Preset: "private_chat"}
	for _, u := range invite {
		req.Invite = append(req.Invite, id.UserID(u))
	}
	if encrypted {
		req.InitialState = []*event.Event{{
			Type:    event.StateEncryption,
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}},
		}}
	}
	resp, err := p.cli.CreateRoom(context.Background(), req)
	if err != nil {
		p.t.Fatalf("create room: %v", err)
	}
	p.mu.Lock()
	p.enc[resp.RoomID] = encrypted
	p.mu.Unlock()
	return resp.RoomID
}

// send sends a text message, encrypting it when the room is encrypted.
func (p *peer) send(room id.RoomID, text string) id.EventID {
	p.t.Helper()
	return p.sendContent(room, &event.MessageEventContent{MsgType: event.MsgText, Body: text})
}

func (p *peer) sendContent(room id.RoomID, content any) id.EventID {
	p.t.Helper()
	ctx := context.Background()
	evtType := event.EventMessage
	p.mu.Lock()
	enc := p.enc[room]
	p.mu.Unlock()
	if enc {
		if p.crypto == nil {
			p.t.Fatal("peer without crypto cannot send to an encrypted room")
		}
		var err error
		content, err = p.crypto.Encrypt(ctx, room, event.EventMessage, content)
		if err != nil {
			p.t.Fatalf("peer encrypt: %v", err)
		}
		evtType = event.EventEncrypted
	}
	resp, err := p.cli.SendMessageEvent(ctx, room, evtType, content, mautrix.ReqSendEvent{DontEncrypt: true})
	if err != nil {
		p.t.Fatalf("send: %v", err)
	}
	return resp.EventID
}

// botMessages lists the bot's m.room.message/m.room.encrypted events in a
// room as the homeserver stores them (oldest first).
func (p *peer) botEvents(room id.RoomID, botID string) []*event.Event {
	p.t.Helper()
	resp, err := p.cli.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, nil, 100)
	if err != nil {
		p.t.Fatalf("messages: %v", err)
	}
	var out []*event.Event
	for i := len(resp.Chunk) - 1; i >= 0; i-- {
		evt := resp.Chunk[i]
		if string(evt.Sender) == botID && (evt.Type == event.EventMessage || evt.Type == event.EventEncrypted) {
			out = append(out, evt)
		}
	}
	return out
}
