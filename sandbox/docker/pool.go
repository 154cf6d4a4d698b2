package docker

import (
	"context"
	"fmt"
	"time"

	"conch"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

type poolEntry struct {
	name, id string
	// sock is the container's socket directory ("" for exec).
	sock string
	// vol and img are its workspace volume and image hash ("": unknown).
	vol, img string
	// ops is the pool container's agent, started ahead so that the first
	// command of a conversation does not wait for it.
	ops sandboxOps
}

// poolRefillDelay is how long after an assignment the pool is refilled.
const poolRefillDelay = 200 * time.Millisecond

// fillPoolAsync tops the warm pool up to WarmPool in the background.
func (r *Runtime) fillPoolAsync() {
	r.mu.Lock()
	if r.closed || r.poolFilling || len(r.pool) >= r.opts.WarmPool {
		r.mu.Unlock()
		return
	}
	r.poolFilling = true
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		err := r.FillPool(r.life)
		r.mu.Lock()
		r.poolFilling = false
		r.mu.Unlock()
		if err != nil && r.life.Err() == nil {
			r.log.Warn("warm pool", "err", err)
		}
	}()
}

// FillPool creates pool containers until WarmPool are ready. It runs in
// the background after Reconcile and after each assignment; tests and
// `conch sandbox` call it directly.
func (r *Runtime) FillPool(ctx context.Context) error {
	// One fill at a time: a caller's fill and the background refill each
	// counting the pool short would each add to it, past WarmPool.
	r.fillMu.Lock()
	defer r.fillMu.Unlock()
	for {
		r.mu.Lock()
		need := len(r.pool) < r.opts.WarmPool && !r.closed
		r.mu.Unlock()
		if !need {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.addPoolContainer(ctx); err != nil {
			return err
		}
	}
}

// addPoolContainer creates and starts one pool container with its agent.
// Once begun it is not cancelled: an engine interrupted halfway through a
// create can leave a half-made container behind (Podman 4 then fails every
// listing), so Close waits for it instead.
func (r *Runtime) addPoolContainer(parent context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Minute)
	defer cancel()
	img, err := r.currentImage(ctx)
	if err != nil {
		return err
	}
	name := poolPrefix(r.opts.InstanceID) + randomHex(4)
	labels := map[string]string{LabelInstance: r.opts.InstanceID, LabelPool: "1"}
	if err := r.createVolume(ctx, name, labels); err != nil {
		return err
	}
	id, sock, err := r.createContainer(ctx, name, name, img, labels)
	if err != nil {
		_ = r.removeVolume(ctx, name)
		return err
	}
	ops := r.newOps(id, name, sock)
	if a, ok := ops.(*sandboxdOps); ok {
		if _, err := a.Ping(ctx); err != nil {
			_ = a.Close()
			_ = r.removeOrphan(ctx, id, name, name, conch.ConversationKey{}, "agent did not start")
			return fmt.Errorf("warm pool: start agent in %s: %w", name, err)
		}
		// The OOM baseline before the container's first program, read
		// now rather than on the claiming conversation's first command.
		if n, ok := a.oomKills(ctx); ok {
			a.mu.Lock()
			a.oomBase = n
			a.mu.Unlock()
		}
	}
	r.mu.Lock()
	closed := r.closed
	if !closed {
		r.pool = append(r.pool, poolEntry{name: name, id: id, sock: sock, vol: name, img: img.Hash, ops: ops})
	}
	r.mu.Unlock()
	if closed {
		_ = ops.Close()
	}
	return nil
}

// PoolSize is the number of ready, unassigned pool containers.
func (r *Runtime) PoolSize() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pool)
}

// assignFromPool gives b a ready pool container: renamed to b's name (its
// identity from now on) and recorded in the registry with its volume.
// ok is false when the pool is empty. b.lock is held.
func (r *Runtime) assignFromPool(ctx context.Context, b *box) (ok bool, err error) {
	for {
		r.mu.Lock()
		if len(r.pool) == 0 {
			r.mu.Unlock()
			return false, nil
		}
		p := r.pool[0]
		r.pool = r.pool[1:]
		r.mu.Unlock()

		vol, img, sock, err := r.poolLive(ctx, p)
		if err != nil {
			return false, err
		}
		if vol == "" {
			if p.ops != nil {
				_ = p.ops.Close()
			}
			_ = r.removeOrphan(ctx, p.id, p.name, p.name, conch.ConversationKey{}, "pool container not running")
			continue
		}
		if _, err := r.api.ContainerRename(ctx, p.id, client.ContainerRenameOptions{NewName: b.name}); err != nil {
			if cerrdefs.IsConflict(err) {
				// b's name is taken behind our back: the entry goes back.
				r.mu.Lock()
				r.pool = append([]poolEntry{p}, r.pool...)
				r.mu.Unlock()
				return false, errNameTaken
			}
			return false, r.engineErr("assign pool container to "+b.name, err)
		}
		r.noteName(p.name, false)
		r.noteName(b.name, true)
		if err := r.reg.put(b.name, regEntry{Conversation: b.key.String(), Volume: vol, Assigned: r.opts.Now()}); err != nil {
			return false, err
		}
		b.id, b.running, b.volume, b.sock = p.id, true, vol, sock
		b.closeOpsLocked()
		b.ops = p.ops
		r.log.Info("sandbox assigned from warm pool", "conversation", b.key.String(), "container", b.name, "id", shortID(p.id))
		r.audit(ctx, conch.AuditSandboxCreate, b.key, map[string]any{"container": b.name, "id": p.id, "volume": vol,
			"image": img, "engine": r.info.Engine, "profile": r.specHash, "pool": true})
		// Not at once: a container create competing for the CPU slowed
		// the claiming conversation's first command by 1–2 ms on two
		// cores, and a refill takes far longer than the wait anyway.
		time.AfterFunc(poolRefillDelay, r.fillPoolAsync)
		return true, nil
	}
}

func labelOf(c container.InspectResponse, k string) string {
	if c.Config == nil {
		return ""
	}
	return c.Config.Labels[k]
}

// poolLive checks that pool container p still runs and returns its volume,
// image hash and socket directory (vol "" when it does not run). A pool
// container whose agent answers on its open connection runs: no engine
// call. Otherwise the engine is asked.
func (r *Runtime) poolLive(ctx context.Context, p poolEntry) (vol, img, sock string, err error) {
	if a, ok := p.ops.(*sandboxdOps); ok && p.vol != "" && a.Connected() {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, perr := a.Ping(pctx)
		cancel()
		if perr == nil {
			return p.vol, p.img, p.sock, nil
		}
	}
	ins, err := r.api.ContainerInspect(ctx, p.id, client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		return "", "", "", nil
	case err != nil:
		if p.ops != nil {
			_ = p.ops.Close()
		}
		return "", "", "", r.engineErr("inspect pool container", err)
	case ins.Container.State == nil || !ins.Container.State.Running:
		return "", "", "", nil
	}
	return workspaceVolume(ins.Container), labelOf(ins.Container, LabelImageHash), socketDirOf(ins.Container), nil
}
