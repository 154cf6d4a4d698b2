package matrix

import (
	"context"
	"errors"
	"time"

	"maunium.net/go/mautrix/event"
)

// errNoE2EE is returned for encrypted rooms by a build with -tags noe2ee.
var errNoE2EE = errors.New("end-to-end encryption is unavailable: conch was built with -tags noe2ee")

// e2eeHooks connect the encryption machinery to the channel.
type e2eeHooks struct {
	// wanted filters encrypted events before decryption (nil: all).
	wanted func(evt *event.Event) bool
	// decrypted receives a decrypted event; late is true when it was
	// decrypted after waiting for its room key, outside the sync loop. A
	// late event whose delivery failed stays pending for the next start.
	decrypted func(ctx context.Context, evt *event.Event, late bool) error
	// failed is told about an event that cannot be decrypted (yet).
	failed func(evt *event.Event, err error)
	// roundErr fails the sync round in progress: an event could not be
	// stored as pending, so the sync token must not advance.
	roundErr func(err error)
	// lifetime ends background retries (Run's context).
	lifetime context.Context
	// initialWait and extendedWait bound the wait for a missing room key
	// before and after requesting it.
	initialWait, extendedWait time.Duration
}

func (h *e2eeHooks) setDefaults() {
	if h.wanted == nil {
		h.wanted = func(*event.Event) bool { return true }
	}
	if h.decrypted == nil {
		h.decrypted = func(context.Context, *event.Event, bool) error { return nil }
	}
	if h.roundErr == nil {
		h.roundErr = func(error) {}
	}
	if h.failed == nil {
		h.failed = func(*event.Event, error) {}
	}
	if h.lifetime == nil {
		h.lifetime = context.Background()
	}
	if h.initialWait == 0 {
		h.initialWait = 3 * time.Second
	}
	if h.extendedWait == 0 {
		h.extendedWait = 22 * time.Second
	}
}
