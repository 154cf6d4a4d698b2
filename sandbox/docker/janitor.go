package docker

import (
	"context"
	"errors"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Sweep stops sandboxes idle longer than IdleStop and removes the
// containers of those unused longer than Retention (their workspaces stay).
// The janitor calls it periodically; tests call it with an injected clock.
func (r *Runtime) Sweep(ctx context.Context) error {
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
			continue // busy: in use, so not idle
		}
		if b.released {
			b.unlock()
			continue
		}
		r.mu.Lock()
		idle, active := now.Sub(b.lastUse), b.active
		r.mu.Unlock()
		if active == 0 {
			errs = append(errs, r.sweepLocked(ctx, b, idle))
		}
		b.unlock()
	}
	return errors.Join(errs...)
}

func (r *Runtime) sweepLocked(ctx context.Context, b *box, idle time.Duration) error {
	if b.id == "" {
		return nil
	}
	if b.running && r.opts.IdleStop > 0 && idle >= r.opts.IdleStop {
		b.closeOpsLocked()
		timeout := 2
		if _, err := r.api.ContainerStop(ctx, b.id, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
			return r.engineErr("stop idle sandbox "+b.name, err)
		}
		b.running = false
		r.log.Info("idle sandbox stopped", "conversation", b.key.String(), "container", b.name, "idle", idle.Round(time.Second))
	}
	if !b.running && r.opts.Retention > 0 && idle >= r.opts.Retention {
		if err := r.removeContainer(ctx, b.id, b.key, b.name, "retention"); err != nil {
			return err
		}
		b.id = ""
		r.removeSocketDir(b.sock)
		b.sock = ""
		r.log.Info("unused sandbox removed, workspace kept", "conversation", b.key.String(), "container", b.name)
	}
	return nil
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
				r.log.Warn("sandbox sweep", "err", err)
			}
		}
	}
}

func (r *Runtime) sweepEvery() time.Duration {
	if r.opts.SweepEvery > 0 {
		return r.opts.SweepEvery
	}
	var d time.Duration
	for _, x := range []time.Duration{r.opts.IdleStop, r.opts.Retention} {
		if x > 0 && (d == 0 || x < d) {
			d = x
		}
	}
	if d == 0 {
		return 0
	}
	return min(max(d/4, time.Second), time.Minute)
}
