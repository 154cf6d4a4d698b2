//go:build noe2ee

package matrix

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// e2eeAvailable reports whether this build can encrypt (every build but -tags noe2ee).
const e2eeAvailable = false

// noE2EENotice is what a room is told once when its encrypted messages
// cannot be read by this build. It carries nothing of the conversation.
const noE2EENotice = "I cannot read encrypted messages: this conch was built without encryption support. " +
	"Your messages are kept and will be answered once the operator runs a build with encryption (make build)."

// e2ee in a build with -tags noe2ee: encrypted rooms are refused for
// sending (fail closed), their messages are kept as pending (a build with
// encryption decrypts and answers them later), each such room is told once,
// and Status and doctor report it.
type e2ee struct {
	cli     *mautrix.Client
	pending *pendingStore
	log     zerolog.Logger

	mu   sync.Mutex
	told map[id.RoomID]bool
}

// setupE2EE keeps the client's in-memory state store and keeps every
// encrypted event for a build that can decrypt it.
func setupE2EE(ctx context.Context, cli *mautrix.Client, db *sql.DB, _ []byte, log zerolog.Logger, hooks e2eeHooks) (*e2ee, error) {
	hooks.setDefaults()
	syncer, ok := cli.Syncer.(mautrix.ExtensibleSyncer)
	if !ok {
		return nil, errors.New("matrix: the client's syncer is not extensible")
	}
	wrapped, err := dbutil.NewWithDB(db, "sqlite3")
	if err != nil {
		return nil, fmt.Errorf("matrix store: %w", err)
	}
	mlog := log.With().Str("component", "crypto").Logger()
	pending, err := openPending(ctx, wrapped, log, mlog)
	if err != nil {
		return nil, err
	}
	e := &e2ee{cli: cli, pending: pending, log: mlog, told: make(map[id.RoomID]bool)}
	log.Error().Msg("Built with -tags noe2ee: end-to-end encrypted rooms cannot be served; their messages are kept until a build with encryption runs")
	syncer.OnEventType(event.EventEncrypted, func(ctx context.Context, evt *event.Event) {
		if !hooks.wanted(evt) {
			return
		}
		if err := e.pending.add(ctx, evt); err != nil {
			hooks.roundErr(err)
			return
		}
		hooks.failed(evt, errNoE2EE)
		// Not on the sync loop: a slow send must not hold up syncing.
		go e.tell(hooks.lifetime, evt.RoomID)
	})
	return e, nil
}

// tell sends the room noE2EENotice, once per room and process. It is sent
// in plaintext: it says nothing about the conversation, and without it the
// people in the room would wait for an answer that cannot come.
func (e *e2ee) tell(ctx context.Context, room id.RoomID) {
	e.mu.Lock()
	if e.told[room] {
		e.mu.Unlock()
		return
	}
	e.told[room] = true
	e.mu.Unlock()
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: noE2EENotice}
	if _, err := e.cli.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{DontEncrypt: true}); err != nil {
		e.log.Warn().Err(err).Stringer("room_id", room).Msg("Could not tell the room that encryption is unavailable")
	}
}

// Encrypt always fails: this build cannot encrypt.
func (e *e2ee) Encrypt(context.Context, id.RoomID, event.Type, any) (*event.EncryptedEventContent, error) {
	return nil, errNoE2EE
}

// decrypt always fails: this build cannot decrypt.
func (e *e2ee) decrypt(context.Context, *event.Event) (*event.Event, error) {
	return nil, errNoE2EE
}

// resumePending does nothing: there is nothing this build could decrypt.
func (e *e2ee) resumePending(context.Context) error { return nil }

// Close does nothing.
func (e *e2ee) Close() {}
