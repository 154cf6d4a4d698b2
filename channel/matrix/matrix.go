// Package matrix is conch's Matrix channel: a mautrix-go client with
// end-to-end encryption (pure-Go olm, in every build but -tags noe2ee), one conversation per room.
//
// The channel joins rooms it is invited to (by an allowed user) and greets,
// delivers allowed users' messages to the gateway as conch.Inbound, sends
// Markdown replies as HTML, shows typing, edits progress messages in place,
// and reports a room it was removed from (kick, ban, last person left) as
// closed. The sync token is stored only after every event of a sync response
// was handled, so nothing is lost or handled twice across restarts.
package matrix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"conch"
	"conch/internal/backoff"
)

// Channel is the Matrix channel adapter.
type Channel struct {
	opts      Options
	log       *slog.Logger
	render    *renderer
	syncStore cursorSyncStore

	// Set by Run before ready is closed; read-only afterwards.
	cli      *mautrix.Client
	syncer   *mautrix.DefaultSyncer
	crypto   *e2ee
	sending  *sendingStore
	handler  conch.Handler
	botName  string
	ready    chan struct{}
	readyErr error
	// synced is closed after the first sync response was processed.
	synced     chan struct{}
	syncedOnce sync.Once

	// round is the sync response being processed; touched only by the sync loop.
	round *syncRound
	// lifetime is Run's context: background work ends with it.
	lifetime context.Context
	bg       sync.WaitGroup

	mu          sync.Mutex
	started     bool
	stopping    bool               // Run is ending: no new background work
	others      map[id.RoomID]int  // joined members other than the bot
	encrypted   map[id.RoomID]bool // encryption state checked with the server
	undecrypted map[id.RoomID]*decryptProblem
	editTypes   map[id.EventID]event.MessageType
	// questions are the approval questions this run sent, by event.
	questions map[id.EventID]string
	syncErr   error
	syncErrAt time.Time
}

type decryptProblem struct {
	count int
	last  time.Time
	err   error
}

var (
	_ conch.Channel        = (*Channel)(nil)
	_ conch.TypingChannel  = (*Channel)(nil)
	_ conch.EditingChannel = (*Channel)(nil)
	_ conch.StatusChannel  = (*Channel)(nil)
)

// New checks the options and returns a channel; Run connects it.
func New(opts Options) (*Channel, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Channel{
		opts:        opts,
		log:         opts.Logger.With("channel", "matrix"),
		render:      newRenderer(),
		syncStore:   cursorSyncStore{cursors: opts.Cursors},
		ready:       make(chan struct{}),
		synced:      make(chan struct{}),
		others:      make(map[id.RoomID]int),
		encrypted:   make(map[id.RoomID]bool),
		undecrypted: make(map[id.RoomID]*decryptProblem),
		editTypes:   make(map[id.EventID]event.MessageType),
	}
	return c, nil
}

// Synced is closed once the first sync after Run started was processed:
// from then on invites are greeted and messages delivered as they come.
func (c *Channel) Synced() <-chan struct{} { return c.synced }

// Name implements conch.Channel.
func (c *Channel) Name() conch.ChannelName { return conch.ChannelMatrix }

// E2EEAvailable reports whether this binary can serve encrypted rooms
// (it was not built with -tags noe2ee).
func E2EEAvailable() bool { return e2eeAvailable }

// Run logs in, sets up encryption and syncs until ctx is done (then it
// returns nil) or the homeserver stays unreachable for MaxReconnectAttempts
// syncs in a row or refuses the credentials (then it returns the error).
func (c *Channel) Run(ctx context.Context, h conch.Handler) error {
	if h == nil {
		return errors.New("matrix run: nil handler")
	}
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("matrix run: already running")
	}
	c.started = true
	c.mu.Unlock()
	c.handler = h

	if len(c.opts.AllowFrom) == 0 {
		c.log.Warn("matrix.allow_from is empty: every message and invite will be dropped")
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.lifetime = runCtx
	if err := c.start(runCtx); err != nil {
		c.readyErr = err
		close(c.ready)
		cancel()
		c.crypto.Close() // nil unless encryption was set up
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	close(c.ready)
	err := c.syncLoop(runCtx)
	cancel()
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	c.bg.Wait()
	c.crypto.Close()
	return err
}

// start logs in and prepares the client; every callback is registered here,
// before the first sync.
func (c *Channel) start(ctx context.Context) error {
	cli, err := mautrix.NewClient(c.opts.Homeserver, id.UserID(c.opts.UserID), "")
	if err != nil {
		return fmt.Errorf("matrix: homeserver %q: %w", c.opts.Homeserver, err)
	}
	cli.Client = c.opts.HTTPClient
	cli.Log = zerologFor(c.log)
	cli.Store = c.syncStore
	cli.StateStore = mautrix.NewMemoryStateStore() // builds with encryption replace it with the SQL store
	cli.DefaultHTTPRetries = 2
	syncer := mautrix.NewDefaultSyncer()
	syncer.ParseErrorHandler = c.onParseError
	cli.Syncer = syncer
	c.cli, c.syncer = cli, syncer

	// Run's backoff paces the login; mautrix's own HTTP retries would multiply it.
	if err := c.retry(mautrix.WithMaxRetries(ctx, 0), "log in", c.login); err != nil {
		return err
	}
	if resp, err := cli.GetOwnDisplayName(ctx); err == nil {
		c.botName = resp.DisplayName
	}
	if c.sending, err = openSending(ctx, c.opts.DB, cli.Log); err != nil {
		return fmt.Errorf("matrix: %w", err)
	}
	crypto, err := setupE2EE(ctx, cli, c.opts.DB, c.opts.PickleKey, cli.Log, e2eeHooks{
		wanted:    c.wantEncrypted,
		decrypted: c.onDecrypted,
		failed:    c.onUndecryptable,
		roundErr:  c.failRound,
		lifetime:  ctx,

		initialWait:  c.opts.keyWaitInitial,
		extendedWait: c.opts.keyWaitExtended,
	})
	if err != nil {
		return fmt.Errorf("matrix: set up encryption: %w", err)
	}
	c.crypto = crypto
	syncer.OnEvent(cli.StateStoreSyncHandler)
	syncer.OnEventType(event.StateEncryption, c.onEncryption)
	syncer.OnEventType(event.StateMember, c.onMember)
	syncer.OnEventType(event.EventMessage, c.onMessage)
	syncer.OnEventType(event.EventReaction, c.onReaction)
	if err := crypto.resumePending(ctx); err != nil {
		return fmt.Errorf("matrix: %w", err)
	}
	c.log.Info("matrix connected", "user", cli.UserID, "device", cli.DeviceID, "e2ee", e2eeAvailable)
	return nil
}

// login authenticates with the access token or the password and records
// the device id, so a password login after a restart reuses the device.
func (c *Channel) login(ctx context.Context) error {
	cli := c.cli
	userID := id.UserID(c.opts.UserID)
	if c.opts.AccessToken != "" {
		cli.AccessToken = c.opts.AccessToken
		who, err := cli.Whoami(ctx)
		if err != nil {
			return fmt.Errorf("check access token: %w", err)
		}
		if who.UserID != userID {
			return permanent(fmt.Errorf("the access token belongs to %s, not %s", who.UserID, userID))
		}
		if who.DeviceID == "" {
			return permanent(errors.New("the access token has no device; encryption needs one: log in with a password or a device-bound token"))
		}
		if c.opts.DeviceID != "" && who.DeviceID != id.DeviceID(c.opts.DeviceID) {
			return permanent(fmt.Errorf("the access token belongs to device %s, not the configured %s", who.DeviceID, c.opts.DeviceID))
		}
		cli.DeviceID = who.DeviceID
	} else {
		deviceID, err := c.syncStore.deviceID(ctx, userID)
		if err != nil {
			return permanent(err)
		}
		if deviceID == "" {
			deviceID = id.DeviceID(c.opts.DeviceID)
		}
		_, err = cli.Login(ctx, &mautrix.ReqLogin{
			Type:                     mautrix.AuthTypePassword,
			Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: string(userID)},
			Password:                 c.opts.Password,
			DeviceID:                 deviceID,
			InitialDeviceDisplayName: c.opts.DeviceName,
			StoreCredentials:         true,
		})
		if err != nil {
			return fmt.Errorf("password login: %w", err)
		}
		if cli.UserID != userID {
			return permanent(fmt.Errorf("logged in as %s, not %s", cli.UserID, userID))
		}
	}
	if err := c.syncStore.saveDeviceID(ctx, userID, cli.DeviceID); err != nil {
		if errors.Is(err, conch.ErrStoreFull) {
			return err // room may be freed: log in again after a pause
		}
		return permanent(err)
	}
	return nil
}

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// isPermanent reports whether retrying err is pointless: our own verdict,
// or the homeserver refusing the request (4xx other than 429).
func isPermanent(err error) bool {
	var p permanentError
	if errors.As(err, &p) {
		return true
	}
	var httpErr mautrix.HTTPError
	if errors.As(err, &httpErr) && httpErr.Response != nil {
		code := httpErr.Response.StatusCode
		return code >= 400 && code < 500 && code != 429 && code != 408
	}
	return false
}

func isAuthError(err error) bool {
	return errors.Is(err, mautrix.MUnknownToken) || errors.Is(err, mautrix.MForbidden) || errors.Is(err, mautrix.MMissingToken)
}

// retry runs op with exponential backoff until it succeeds, fails
// permanently, fails MaxReconnectAttempts times in a row, or ctx ends.
func (c *Channel) retry(ctx context.Context, what string, op func(context.Context) error) error {
	policy := c.backoffPolicy()
	err := policy.Retry(ctx, func(ctx context.Context, _ int) error {
		err := op(ctx)
		if err != nil && (isPermanent(err) || isAuthError(err)) {
			return backoff.Permanent(err)
		}
		return err
	}, func(attempt int, err error, wait time.Duration) {
		c.log.Warn("matrix request failed, retrying", "op", what, "attempt", attempt, "max", c.opts.MaxReconnectAttempts, "wait", wait, "err", err)
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case isPermanent(err) || isAuthError(err):
		kind := conch.KindInvalid
		if isAuthError(err) {
			kind = conch.KindAuth
		}
		return &conch.Error{Kind: kind, User: "Matrix: cannot " + what + " as " + c.opts.UserID, Err: fmt.Errorf("matrix %s: %w", what, err)}
	}
	return &conch.Error{Kind: conch.KindUnavailable, User: "Matrix homeserver " + c.opts.Homeserver + " is unreachable",
		Err: fmt.Errorf("matrix %s: failed %d times in a row, giving up: %w", what, c.opts.MaxReconnectAttempts, err)}
}

// backoffPolicy paces reconnects: BackoffBase·2^(n-1) capped at BackoffMax,
// MaxReconnectAttempts attempts in all.
func (c *Channel) backoffPolicy() backoff.Policy {
	return backoff.Policy{Base: c.opts.BackoffBase, Cap: c.opts.BackoffMax, Max: max(c.opts.MaxReconnectAttempts-1, 1), NoJitter: true}
}

// client waits until Run has logged in.
func (c *Channel) client(ctx context.Context) (*mautrix.Client, error) {
	select {
	case <-c.ready:
		if c.readyErr != nil {
			return nil, fmt.Errorf("matrix: not connected: %w", c.readyErr)
		}
		return c.cli, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("matrix: waiting for login: %w", ctx.Err())
	}
}

func roomOf(key conch.ConversationKey) (id.RoomID, error) {
	if key.Channel != conch.ChannelMatrix {
		return "", fmt.Errorf("matrix: conversation %s belongs to another channel", key)
	}
	if !strings.HasPrefix(key.ID, "!") {
		return "", fmt.Errorf("matrix: conversation id %q is not a room id", key.ID)
	}
	return id.RoomID(key.ID), nil
}

func keyOf(room id.RoomID) conch.ConversationKey {
	return conch.ConversationKey{Channel: conch.ChannelMatrix, ID: string(room)}
}
