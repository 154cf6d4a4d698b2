package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"conch"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// box is one conversation's sandbox as the runtime tracks it.
type box struct {
	key  conch.ConversationKey
	name string
	// lock is held while the container is created, started, stopped or
	// removed; a channel so that waiting honours ctx.
	lock chan struct{}

	// Guarded by lock.
	id      string
	running bool
	volume  string
	// sock is the host's socket directory of the container ("" for the
	// exec transport).
	sock string
	ops  sandboxOps
	// released is set when the box left Runtime.boxes (Release, Remove):
	// whoever still holds it takes the conversation's current box instead.
	released bool

	// Guarded by Runtime.mu.
	lastUse time.Time
	active  int
}

func (r *Runtime) boxFor(key conch.ConversationKey) *box {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.boxes[key.String()]
	if b == nil {
		b = &box{key: key, name: ContainerName(r.opts.InstanceID, key), lock: make(chan struct{}, 1)}
		r.boxes[key.String()] = b
	}
	return b
}

// lockBox returns the conversation's box with its lock held.
func (r *Runtime) lockBox(ctx context.Context, key conch.ConversationKey) (*box, error) {
	return r.relock(ctx, r.boxFor(key))
}

// relock locks b, or the conversation's current box when b was released
// while the caller held on to it.
func (r *Runtime) relock(ctx context.Context, b *box) (*box, error) {
	for {
		if err := b.acquireLock(ctx); err != nil {
			return nil, err
		}
		if !b.released {
			return b, nil
		}
		b.unlock()
		b = r.boxFor(b.key)
	}
}

// Release drops what the runtime holds for the conversation: its box and
// the connection to its sandbox's agent. The container is left as it is (a
// later Sandbox call or Reconcile picks it up again).
func (r *Runtime) Release(ctx context.Context, key conch.ConversationKey) error {
	r.mu.Lock()
	b := r.boxes[key.String()]
	r.mu.Unlock()
	if b == nil {
		return nil
	}
	if err := b.acquireLock(ctx); err != nil {
		return err
	}
	defer b.unlock()
	r.releaseLocked(b)
	return nil
}

// releaseLocked closes b's agent connection and forgets b. b.lock is held.
func (r *Runtime) releaseLocked(b *box) {
	b.closeOpsLocked()
	if b.released {
		return
	}
	b.released = true
	r.mu.Lock()
	if r.boxes[b.key.String()] == b {
		delete(r.boxes, b.key.String())
	}
	r.mu.Unlock()
}

func (b *box) acquireLock(ctx context.Context) error {
	select {
	case b.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *box) unlock() { <-b.lock }

func (b *box) closeOpsLocked() {
	if b.ops != nil {
		_ = b.ops.Close()
		b.ops = nil
	}
}

// Sandbox returns the conversation's sandbox, creating its container on
// first use and restarting it after an idle stop.
func (r *Runtime) Sandbox(ctx context.Context, key conch.ConversationKey) (conch.Sandbox, error) {
	if key.IsZero() || key.Channel == "" || key.ID == "" {
		return nil, conch.Errorf(conch.KindInvalid, "a sandbox needs a conversation key with a channel and an id")
	}
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	b, err := r.lockBox(ctx, key)
	if err != nil {
		return nil, err
	}
	defer b.unlock()
	if err := r.ensureLocked(ctx, b); err != nil {
		return nil, err
	}
	r.touch(b, 0)
	return newSandbox(r, b), nil
}

// touch records use of b and changes its count of operations in flight.
func (r *Runtime) touch(b *box, delta int) {
	r.mu.Lock()
	b.active += delta
	b.lastUse = r.opts.Now()
	r.mu.Unlock()
}

// ensureLocked makes b's container exist and run. b.lock is held.
func (r *Runtime) ensureLocked(ctx context.Context, b *box) error {
	if b.id != "" && b.running {
		return nil
	}
	if b.id == "" && r.mayExist(b.name) {
		c, err := r.api.ContainerInspect(ctx, b.name, client.ContainerInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
		case err != nil:
			return r.engineErr("inspect sandbox", err)
		default:
			if err := r.adoptLocked(ctx, b, c.Container); err != nil {
				return err
			}
		}
	}
	if b.id != "" {
		if b.running {
			return nil
		}
		err := r.startContainer(ctx, b.id, b.name, b.sock)
		switch {
		case cerrdefs.IsNotFound(err):
			b.id = ""
		case err != nil:
			return r.engineErr("start sandbox "+b.name, err)
		default:
			b.running = true
			r.log.Info("sandbox restarted", "conversation", b.key.String(), "container", b.name)
			return nil
		}
	}
	err := r.createLocked(ctx, b)
	if nameConflict(err) && !r.mayExist(b.name) {
		// Made behind this runtime's back: ask the engine after all.
		r.noteName(b.name, true)
		return r.ensureLocked(ctx, b)
	}
	return err
}

// adoptLocked takes over an existing container with b's name, or removes it
// when it is stale (another profile, dead, or stopped with an old image).
func (r *Runtime) adoptLocked(ctx context.Context, b *box, c container.InspectResponse) error {
	reason, err := r.staleReason(ctx, c)
	if err != nil {
		return err
	}
	if reason != "" {
		r.log.Info("removing stale sandbox", "container", b.name, "reason", reason)
		return r.removeContainer(ctx, c.ID, b.key, b.name, reason)
	}
	b.id = c.ID
	b.running = c.State != nil && c.State.Running
	b.volume = workspaceVolume(c)
	b.sock = socketDirOf(c)
	return nil
}

// staleReason says why an existing container must not be reused ("" when it may).
func (r *Runtime) staleReason(ctx context.Context, c container.InspectResponse) (string, error) {
	if c.Config == nil || c.State == nil {
		return "incomplete inspect", nil
	}
	labels := c.Config.Labels
	if labels[LabelInstance] != r.opts.InstanceID {
		return "", fmt.Errorf("container %s has our name but belongs to instance %q", c.Name, labels[LabelInstance])
	}
	if labels[LabelProfileHash] != r.specHash {
		return "created with another hardening profile or agent binary", nil
	}
	if bad := r.profile.verify(r.info.Engine, r.seccomp, c); len(bad) > 0 {
		return "hardening not in effect: " + strings.Join(bad, "; "), nil
	}
	switch {
	case c.State.Running && !c.State.Paused:
		return "", nil
	case c.State.Status == container.StateExited:
		// A stopped container is restarted only when its image is current.
		img, err := r.currentImage(ctx)
		if err != nil {
			return "", err
		}
		if labels[LabelImageHash] != img.Hash {
			return "stopped with an older image", nil
		}
		return "", nil
	}
	return "state " + string(c.State.Status), nil
}

func workspaceVolume(c container.InspectResponse) string {
	for _, m := range c.Mounts {
		if m.Destination == WorkspaceDir && m.Name != "" {
			return m.Name
		}
	}
	return ""
}

// Remove destroys the conversation's sandbox and its workspace.
func (r *Runtime) Remove(ctx context.Context, key conch.ConversationKey) error {
	if key.IsZero() {
		return conch.Errorf(conch.KindInvalid, "no conversation given")
	}
	b, err := r.lockBox(ctx, key)
	if err != nil {
		return err
	}
	defer b.unlock()
	b.closeOpsLocked()
	target := b.id
	if target == "" {
		target = b.name
	}
	if err := r.removeContainer(ctx, target, key, b.name, "removed"); err != nil {
		return err
	}
	vols := []string{b.name}
	if b.volume != "" {
		vols = append(vols, b.volume)
	}
	if v, ok := r.reg.volumeOf(key); ok {
		vols = append(vols, v)
	}
	slices.Sort(vols)
	for _, v := range slices.Compact(vols) {
		if err := r.removeVolume(ctx, v); err != nil {
			return err
		}
	}
	if err := r.reg.delete(b.name); err != nil {
		return err
	}
	r.removeSocketDir(b.sock)
	b.id, b.running, b.volume, b.sock = "", false, "", ""
	r.releaseLocked(b)
	r.log.Info("sandbox removed", "conversation", key.String(), "container", b.name)
	return nil
}
