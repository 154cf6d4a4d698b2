//go:build kubernetes

package kubernetes

import (
	"context"
	"errors"
	"time"
)

// touch records use of b and changes its count of calls in flight.
func (r *Runtime) touch(b *box, delta int) {
	r.mu.Lock()
	b.active += delta
	b.lastUse = r.opts.Now()
	r.mu.Unlock()
}

// Sweep deletes the pods of conversations idle longer than IdleStop (their
// claims stay: the next use makes a new pod on the same workspace). A
// conversation with a call in flight is never idle. The janitor calls it
// periodically; tests may call it.
func (r *Runtime) Sweep(ctx context.Context) error {
	if r.opts.IdleStop <= 0 {
		return nil
	}
	now := r.opts.Now()
	r.mu.Lock()
	boxes := make([]*box, 0, len(r.boxes))
	for _, b := range r.boxes {
		boxes = append(boxes, b)
	}
	r.mu.Unlock()
	var errs []error
	for _, b := range boxes {
		select {
		case b.lock <- struct{}{}:
		default:
			continue // being created or used: not idle
		}
		r.mu.Lock()
		idle, active := now.Sub(b.lastUse), b.active
		r.mu.Unlock()
		if !b.released && !b.idle && active == 0 && idle >= r.opts.IdleStop {
			b.closeClient()
			b.uid = ""
			if err := r.deletePodNoWait(ctx, b.name); err != nil {
				errs = append(errs, err)
			} else {
				b.idle = true
				r.opts.Logger.Info("idle sandbox pod deleted, workspace kept", "conversation", b.key.String(),
					"pod", b.name, "idle", idle.Round(time.Second))
			}
		}
		b.unlock()
	}
	return errors.Join(errs...)
}

func (r *Runtime) janitor(every time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.life.Done():
			return
		case <-t.C:
			if err := r.Sweep(r.life); err != nil && r.life.Err() == nil {
				r.opts.Logger.Warn("sandbox sweep", "err", err)
			}
		}
	}
}

func (r *Runtime) sweepEvery() time.Duration {
	if r.opts.IdleStop <= 0 {
		return 0
	}
	if r.opts.SweepEvery > 0 {
		return r.opts.SweepEvery
	}
	return min(max(r.opts.IdleStop/4, time.Second), time.Minute)
}
