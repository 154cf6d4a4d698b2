//go:build !goolm

package matrix

import (
	"context"
	"database/sql"
	"errors"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// e2eeAvailable reports whether this build can encrypt (built with -tags goolm).
const e2eeAvailable = false

// e2ee is absent in builds without -tags goolm: encrypted rooms are refused
// (fail closed) and reported by Status.
type e2ee struct{}

// setupE2EE keeps the client's in-memory state store and reports every
// encrypted event as undecryptable.
func setupE2EE(_ context.Context, cli *mautrix.Client, _ *sql.DB, _ []byte, log zerolog.Logger, hooks e2eeHooks) (*e2ee, error) {
	hooks.setDefaults()
	syncer, ok := cli.Syncer.(mautrix.ExtensibleSyncer)
	if !ok {
		return nil, errors.New("matrix: the client's syncer is not extensible")
	}
	log.Warn().Msg("Built without -tags goolm: end-to-end encrypted rooms cannot be served")
	syncer.OnEventType(event.EventEncrypted, func(_ context.Context, evt *event.Event) {
		if hooks.wanted(evt) {
			hooks.failed(evt, errNoE2EE)
		}
	})
	return nil, nil
}

// Encrypt always fails: this build cannot encrypt.
func (e *e2ee) Encrypt(context.Context, id.RoomID, event.Type, any) (*event.EncryptedEventContent, error) {
	return nil, errNoE2EE
}

// resumePending does nothing: there is nothing this build could decrypt.
func (e *e2ee) resumePending(context.Context) error { return nil }

// Close does nothing.
func (e *e2ee) Close() {}
