//go:build !noe2ee

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
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/sqlstatestore"
)

// e2eeAvailable reports whether this build can encrypt (every build but -tags noe2ee).
const e2eeAvailable = true

// e2ee is end-to-end encryption over mautrix's OlmMachine with its crypto
// and room-state stores in our SQLite database.
//
// It does what mautrix's crypto/cryptohelper does, without that package:
// cryptohelper imports dbutil/litestream, which pulls in the cgo SQLite
// driver (mattn/go-sqlite3) whenever cgo is on (e.g. go test -race).
type e2ee struct {
	cli     *mautrix.Client
	mach    *crypto.OlmMachine
	log     zerolog.Logger
	hooks   e2eeHooks
	pending *pendingStore // events waiting for a room key
	bg      sync.WaitGroup

	mu       sync.Mutex
	inflight map[id.EventID]bool // pending events a goroutine is working on
}

// setupE2EE loads (or creates) the device's Olm account, makes sure its keys
// are on the server and hooks decryption into the client's syncer. It sets
// cli.StateStore to a persistent SQL state store. Call before the first sync.
func setupE2EE(ctx context.Context, cli *mautrix.Client, db *sql.DB, pickleKey []byte, log zerolog.Logger, hooks e2eeHooks) (*e2ee, error) {
	hooks.setDefaults()
	wrapped, err := dbutil.NewWithDB(db, "sqlite3")
	if err != nil {
		return nil, fmt.Errorf("matrix crypto store: %w", err)
	}
	state := sqlstatestore.NewSQLStateStore(wrapped, dbutil.ZeroLogger(log.With().Str("db_section", "matrix_state").Logger()), false)
	if err := state.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("matrix state store: upgrade: %w", err)
	}
	cli.StateStore = state
	// One account per device: a new device (new access token) gets fresh keys
	// instead of colliding with the old device's shared account.
	accountID := cli.UserID.String() + "/" + cli.DeviceID.String()
	store := crypto.NewSQLCryptoStore(wrapped, dbutil.ZeroLogger(log.With().Str("db_section", "crypto").Logger()), accountID, cli.DeviceID, pickleKey)
	if err := store.DB.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("matrix crypto store: upgrade: %w", err)
	}
	mlog := log.With().Str("component", "crypto").Logger()
	pending, err := openPending(ctx, wrapped, log, mlog)
	if err != nil {
		return nil, err
	}
	mach := crypto.NewOlmMachine(cli, &mlog, store, state)
	if err := mach.Load(ctx); err != nil {
		return nil, fmt.Errorf("matrix crypto: load olm account: %w", err)
	}
	e := &e2ee{cli: cli, mach: mach, log: mlog, hooks: hooks, pending: pending, inflight: make(map[id.EventID]bool)}
	mach.SessionReceived = e.sessionReceived
	if err := e.verifyDeviceKeys(ctx); err != nil {
		return nil, err
	}
	syncer, ok := cli.Syncer.(mautrix.ExtensibleSyncer)
	if !ok {
		return nil, errors.New("matrix crypto: the client's syncer is not extensible")
	}
	// To-device events (room keys), device list changes and one-time key
	// counts are processed for every sync, the first one included.
	syncer.OnSync(mach.ProcessSyncResponse)
	syncer.OnEventType(event.StateMember, mach.HandleMemberEvent)
	syncer.OnEventType(event.StateHistoryVisibility, mach.HandleHistoryVisibility)
	syncer.OnEventType(event.EventEncrypted, e.handleEncrypted)
	return e, nil
}

// verifyDeviceKeys uploads the device keys on first use and checks on later
// starts that the server still has the keys we hold.
func (e *e2ee) verifyDeviceKeys(ctx context.Context) error {
	resp, err := e.cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{
		DeviceKeys: map[id.UserID]mautrix.DeviceIDList{e.cli.UserID: {e.cli.DeviceID}},
	})
	if err != nil {
		return fmt.Errorf("matrix crypto: query own device keys: %w", err)
	}
	shared := e.mach.GetAccount().Shared
	device, ok := resp.DeviceKeys[e.cli.UserID][e.cli.DeviceID]
	switch {
	case !ok || len(device.Keys) == 0:
		if shared {
			return fmt.Errorf("matrix crypto: device %s has no keys on the server although they were uploaded; log in with a new device", e.cli.DeviceID)
		}
		if err := e.mach.ShareKeys(ctx, -1); err != nil {
			return fmt.Errorf("matrix crypto: upload device keys: %w", err)
		}
		e.log.Info().Stringer("device_id", e.cli.DeviceID).Msg("Uploaded device keys")
	case !shared:
		return fmt.Errorf("matrix crypto: device %s already has keys on the server that are not in our store (was the crypto store reset?); log in with a new device", e.cli.DeviceID)
	case device.Keys.GetEd25519(e.cli.DeviceID) != e.mach.OwnIdentity().SigningKey:
		return fmt.Errorf("matrix crypto: device %s's signing key on the server differs from ours; log in with a new device", e.cli.DeviceID)
	}
	return nil
}

// handleEncrypted runs inside the sync loop for each m.room.encrypted event.
// An event whose room key has not arrived is stored before the sync token
// advances, so it is retried when the key comes, even after a restart.
func (e *e2ee) handleEncrypted(ctx context.Context, evt *event.Event) {
	if !e.hooks.wanted(evt) {
		return
	}
	decrypted, err := e.decrypt(ctx, evt)
	switch {
	case err == nil:
		e.hooks.decrypted(ctx, decrypted, false)
	case errors.Is(err, crypto.ErrNoSessionFound):
		if err := e.pending.add(ctx, evt); err != nil {
			e.hooks.roundErr(err)
			return
		}
		e.retry(evt, false)
	default:
		e.log.Warn().Err(err).Stringer("event_id", evt.ID).Stringer("room_id", evt.RoomID).Msg("Failed to decrypt event")
		e.hooks.failed(evt, err)
	}
}

func (e *e2ee) decrypt(ctx context.Context, evt *event.Event) (*event.Event, error) {
	decrypted, err := e.mach.DecryptMegolmEvent(ctx, evt)
	if err != nil {
		return nil, err
	}
	decrypted.Mautrix.EventSource = evt.Mautrix.EventSource | event.SourceDecrypted
	return decrypted, nil
}

// retry waits in the background for the room key of a pending event,
// requesting it from the sender's and our own devices, and delivers the
// event when it can be decrypted. requestNow skips the first quiet wait
// (for events resumed after a restart).
func (e *e2ee) retry(evt *event.Event, requestNow bool) {
	e.mu.Lock()
	if e.inflight[evt.ID] {
		e.mu.Unlock()
		return
	}
	e.inflight[evt.ID] = true
	e.bg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.bg.Done()
		defer func() {
			e.mu.Lock()
			delete(e.inflight, evt.ID)
			e.mu.Unlock()
		}()
		e.waitAndRetry(e.hooks.lifetime, evt, requestNow)
	}()
}

func (e *e2ee) waitAndRetry(ctx context.Context, evt *event.Event, requestNow bool) {
	content := evt.Content.AsEncrypted()
	log := e.log.With().Stringer("event_id", evt.ID).Stringer("session_id", content.SessionID).Logger()
	got := false
	if !requestNow {
		got = e.mach.WaitForSession(ctx, evt.RoomID, content.SenderKey, content.SessionID, e.hooks.initialWait)
	} else if _, err := e.decrypt(ctx, evt); !errors.Is(err, crypto.ErrNoSessionFound) {
		got = true // the key arrived while we were down (or decryption fails for good)
	}
	if !got && ctx.Err() == nil {
		log.Debug().Msg("Room key not received, requesting it")
		// Ask all of the sender's devices (the event's device_id field is
		// deprecated) and our own other devices.
		if err := e.mach.SendRoomKeyRequest(ctx, evt.RoomID, content.SenderKey, content.SessionID, "", map[id.UserID][]id.DeviceID{
			evt.Sender:   {"*"},
			e.cli.UserID: {"*"},
		}); err != nil {
			log.Warn().Err(err).Msg("Failed to request room key")
		}
		got = e.mach.WaitForSession(ctx, evt.RoomID, content.SenderKey, content.SessionID, e.hooks.extendedWait)
	}
	if ctx.Err() != nil {
		return // still pending: retried at the next start
	}
	if !got {
		log.Warn().Stringer("room_id", evt.RoomID).Msg("Room key has not arrived; the event stays pending until it does")
		e.hooks.failed(evt, crypto.ErrNoSessionFound)
		return
	}
	e.finish(ctx, evt)
}

// finish decrypts a pending event whose key is there, delivers it and
// forgets it. A failed delivery keeps it for the next start.
func (e *e2ee) finish(ctx context.Context, evt *event.Event) {
	decrypted, err := e.decrypt(ctx, evt)
	if err != nil {
		e.log.Warn().Err(err).Stringer("event_id", evt.ID).Msg("Failed to decrypt event after receiving its key")
		e.hooks.failed(evt, err)
		e.pending.remove(ctx, evt.ID)
		return
	}
	if err := e.hooks.decrypted(ctx, decrypted, true); err != nil {
		e.log.Warn().Err(err).Stringer("event_id", evt.ID).Msg("Delivering a late-decrypted event failed; retrying at the next start")
		return
	}
	e.pending.remove(ctx, evt.ID)
}

// sessionReceived runs when a room key is stored: pending events of that
// session that no goroutine is waiting for are decrypted now.
func (e *e2ee) sessionReceived(ctx context.Context, _ id.RoomID, sessionID id.SessionID, _ uint32) {
	evts, err := e.pending.load(ctx, sqlPendingBySession, sessionID)
	if err != nil {
		e.log.Warn().Err(err).Msg("Failed to load pending events")
		return
	}
	for _, evt := range evts {
		e.mu.Lock()
		busy := e.inflight[evt.ID]
		if !busy {
			e.inflight[evt.ID] = true
			e.bg.Add(1)
		}
		e.mu.Unlock()
		if busy {
			continue // its waiter was woken by the same key
		}
		go func() {
			defer e.bg.Done()
			defer func() {
				e.mu.Lock()
				delete(e.inflight, evt.ID)
				e.mu.Unlock()
			}()
			e.finish(e.hooks.lifetime, evt)
		}()
	}
}

// resumePending retries the events that were waiting for a room key when
// conch stopped; those older than maxPendingAge are given up.
func (e *e2ee) resumePending(ctx context.Context) error {
	if e == nil {
		return nil
	}
	evts, err := e.pending.load(ctx, sqlAllPending)
	if err != nil {
		return err
	}
	for _, evt := range evts {
		e.retry(evt, true)
	}
	if len(evts) > 0 {
		e.log.Info().Int("count", len(evts)).Msg("Retrying events still waiting for their room key")
	}
	return nil
}

// Encrypt encrypts content for roomID, sharing a group session with the
// room's members first when needed. It never returns plaintext.
func (e *e2ee) Encrypt(ctx context.Context, roomID id.RoomID, evtType event.Type, content any) (*event.EncryptedEventContent, error) {
	if e == nil {
		return nil, errNoE2EE
	}
	encrypted, err := e.mach.EncryptMegolmEvent(ctx, roomID, evtType, content)
	if err == nil {
		return encrypted, nil
	}
	if !errors.Is(err, crypto.ErrSessionExpired) && !errors.Is(err, crypto.ErrNoGroupSession) && !errors.Is(err, crypto.ErrSessionNotShared) {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	if err := e.ensureMembers(ctx, roomID); err != nil {
		return nil, err
	}
	users, err := e.cli.StateStore.GetRoomJoinedOrInvitedMembers(ctx, roomID)
	if err != nil {
		return nil, fmt.Errorf("encrypt: room members: %w", err)
	}
	if err := e.mach.ShareGroupSession(ctx, roomID, users); err != nil {
		return nil, fmt.Errorf("encrypt: share group session: %w", err)
	}
	encrypted, err = e.mach.EncryptMegolmEvent(ctx, roomID, evtType, content)
	if err != nil {
		return nil, fmt.Errorf("encrypt after sharing group session: %w", err)
	}
	return encrypted, nil
}

// ensureMembers loads the full member list once per room, so a group session
// is shared with everyone even before the first sync after joining.
func (e *e2ee) ensureMembers(ctx context.Context, roomID id.RoomID) error {
	fetched, err := e.cli.StateStore.HasFetchedMembers(ctx, roomID)
	if err != nil || fetched {
		return nil
	}
	if _, err := e.cli.Members(ctx, roomID); err != nil {
		return fmt.Errorf("encrypt: fetch room members: %w", err)
	}
	if err := e.cli.StateStore.MarkMembersFetched(ctx, roomID); err != nil {
		return fmt.Errorf("encrypt: %w", err)
	}
	return nil
}

// Close waits for pending decryption retries (they end with the lifetime
// context) and stops the machine's background work.
func (e *e2ee) Close() {
	if e == nil {
		return
	}
	e.bg.Wait()
	e.mach.Destroy()
}
