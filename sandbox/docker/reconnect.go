package docker

import (
	"context"
	"sync"
	"time"

	"conch"

	"github.com/moby/moby/client"
)

// reconnectTimeout bounds one background reconnection to a reattached
// sandbox's agent.
const reconnectTimeout = time.Minute

// reconnectParallel is how many agents reconnectAsync starts at a time:
// enough to keep the engine busy, not a herd of hundreds of execs.
const reconnectParallel = 8

// reconnectAsync connects, in the background, to the agent of every sandbox
// Reconcile reattached running, reconnectParallel at a time. Over the
// socket transport the agent outlived conch and this is a dial and a
// handshake; over the exec transport (or when the agent died) it is an
// engine exec, the largest part of a conversation's first operation after a
// restart. With many live conversations the messages that come at once
// after the start would otherwise each wait for their own. An
// operation that comes first dials itself (the client dials once); a
// failure here only leaves the dial to the next operation.
func (r *Runtime) reconnectAsync(boxes []*box) {
	if r.agentName == "" || len(boxes) == 0 {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		n := 0
		sem := make(chan struct{}, reconnectParallel)
		for _, b := range boxes {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				if r.reconnect(r.life, b) {
					mu.Lock()
					n++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if r.life.Err() == nil {
			r.log.Info("sandbox agents reconnected", "agents", n, "of", len(boxes), "took", time.Since(start).Round(time.Millisecond))
		}
	}()
}

// reconnect makes b's agent connection (see reconnectAsync); it reports
// whether the agent answered.
func (r *Runtime) reconnect(ctx context.Context, b *box) bool {
	ctx, cancel := context.WithTimeout(ctx, reconnectTimeout)
	defer cancel()
	b, err := r.relock(ctx, b)
	if err != nil {
		return false
	}
	if !b.running || b.id == "" {
		b.unlock()
		return false
	}
	if b.ops == nil {
		b.ops = r.newOps(b.id, b.name, b.sock)
	}
	ops, ok := b.ops.(*sandboxdOps)
	b.unlock()
	if !ok {
		return false
	}
	if _, err := ops.Ping(ctx); err != nil {
		if ctx.Err() == nil {
			r.log.Debug("sandbox agent not reconnected; the next operation dials", "container", b.name, "err", err)
		}
		return false
	}
	return true
}

// HasSandbox reports whether the conversation has a sandbox (running or
// stopped), without creating one: the hook runner's test, before every
// stage of every turn. A container the runtime already holds answers from
// memory; otherwise one inspect of the container by its name (SandboxInfo
// would add the store's conversations and the image: three calls where
// one tells). A container removed behind the runtime's back still counts
// until an operation finds it gone.
func (r *Runtime) HasSandbox(ctx context.Context, key conch.ConversationKey) bool {
	if key.Channel == "" || key.ID == "" || r.checkOpen() != nil {
		return false
	}
	r.mu.Lock()
	b := r.boxes[key.String()]
	r.mu.Unlock()
	if b != nil {
		select {
		case b.lock <- struct{}{}:
			known := b.id != "" && !b.released
			b.unlock()
			if known {
				return true
			}
		default: // being created, started or removed: ask the engine
		}
	}
	_, err := r.api.ContainerInspect(ctx, ContainerName(r.opts.InstanceID, key), client.ContainerInspectOptions{})
	return err == nil
}
