package docker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"conch"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Reconcile runs at start and brings the engine in line with what conch
// knows. For every container labelled with this instance:
//   - running, current profile → reattached (its terminals live on);
//   - stopped (an idle stop, a host reboot), current profile and image →
//     kept stopped and restarted on next use;
//   - anything else for a known conversation (another profile, an older
//     image while stopped, dead) → container removed, workspace kept, and a
//     new container is created on next use;
//   - a conversation the store no longer knows (Options.Known), or no
//     conversation at all → an orphan: container and workspace removed;
//   - unassigned warm-pool containers → kept up to WarmPool if current,
//     else removed.
//
// Workspace volumes of unknown conversations and unused pool volumes are
// removed too. Then the warm pool is filled in the background.
func (r *Runtime) Reconcile(ctx context.Context) error {
	if err := r.checkOpen(); err != nil {
		return err
	}
	known, err := r.knownSet(ctx)
	if err != nil {
		return fmt.Errorf("reconcile sandboxes: %w", err)
	}
	list, err := r.listInstance(ctx)
	if err != nil {
		return r.engineErr("reconcile sandboxes: list", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, s := range list.Items {
		names = append(names, containerName(s.Names))
	}
	r.setNames(names)
	rc := &reconciler{r: r, known: known, usedVolumes: map[string]bool{}, usedSockets: map[string]bool{}}
	for _, s := range list.Items {
		if err := rc.container(ctx, s.ID, containerName(s.Names)); err != nil {
			return err
		}
	}
	rc.volumes(ctx)
	if len(rc.errs) == 0 {
		r.sweepSocketDirs(rc.usedSockets)
	}
	r.mu.Lock()
	r.pool = rc.pool
	r.mu.Unlock()
	r.log.Info("sandboxes reconciled", "reattached", rc.reattached, "stopped", rc.kept, "removed", rc.removed, "pool", len(rc.pool))
	r.reconnectAsync(rc.live)
	r.fillPoolAsync()
	return errors.Join(rc.errs...)
}

// reconciler is one Reconcile's progress.
type reconciler struct {
	r *Runtime
	// known is the store's conversations; nil treats all as known.
	known       map[string]bool
	errs        []error
	usedVolumes map[string]bool
	// usedSockets are the socket directories of the containers kept.
	usedSockets map[string]bool
	pool        []poolEntry

	reattached, kept, removed int
	// live are the boxes reattached running, whose agents are started
	// again in the background (reconnect.go).
	live []*box
}

// container reconciles one container of the instance. Its problems are
// collected in rc.errs; an error returned ends Reconcile (ctx is done).
func (rc *reconciler) container(ctx context.Context, id, name string) error {
	r := rc.r
	ins, err := r.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		rc.errs = append(rc.errs, r.engineErr("reconcile sandboxes: inspect "+name, err))
		return nil
	}
	c := ins.Container
	if c.Config == nil || c.State == nil {
		return nil
	}
	vol := workspaceVolume(c)
	labels := c.Config.Labels

	// Unassigned pool containers.
	if labels[LabelPool] == "1" && strings.HasPrefix(name, poolPrefix(r.opts.InstanceID)) {
		reason, err := r.staleReason(ctx, c)
		if err != nil {
			rc.errs = append(rc.errs, err)
			return nil
		}
		if reason == "" && c.State.Running && len(rc.pool) < r.opts.WarmPool {
			rc.pool = append(rc.pool, poolEntry{name: name, id: c.ID, sock: socketDirOf(c)})
			rc.usedVolumes[vol] = true
			rc.usedSockets[socketDirOf(c)] = true
			return nil
		}
		rc.errs = append(rc.errs, r.removeOrphan(ctx, c.ID, name, vol, conch.ConversationKey{}, "surplus or stale pool container"))
		rc.removed++
		return nil
	}

	// The conversation: from the label, or for an assigned pool
	// container from the registry.
	convo := labels[LabelConversation]
	if convo == "" {
		if e, ok := r.reg.get(name); ok {
			convo = e.Conversation
		}
	}
	key, perr := conch.ParseConversationKey(convo)
	if perr != nil || (rc.known != nil && !rc.known[convo]) {
		rc.errs = append(rc.errs, r.removeOrphan(ctx, c.ID, name, vol, key, "orphan"), r.reg.delete(name))
		rc.removed++
		return nil
	}
	if want := ContainerName(r.opts.InstanceID, key); name != want {
		rc.errs = append(rc.errs, r.removeOrphan(ctx, c.ID, name, vol, key, "name does not match its conversation"))
		rc.removed++
		return nil
	}
	rc.usedVolumes[vol] = true
	rc.usedSockets[socketDirOf(c)] = true
	return rc.adopt(ctx, key, c)
}

// adopt takes a conversation's container over (or removes it when stale).
func (rc *reconciler) adopt(ctx context.Context, key conch.ConversationKey, c container.InspectResponse) error {
	r := rc.r
	b, err := r.lockBox(ctx, key)
	if err != nil {
		return err
	}
	defer b.unlock()
	err = r.adoptLocked(ctx, b, c)
	switch {
	case err != nil:
		rc.errs = append(rc.errs, err)
	case b.id == "":
		rc.removed++
	default:
		r.mu.Lock()
		b.lastUse = r.opts.Now()
		if !b.running {
			if t, perr := time.Parse(time.RFC3339Nano, c.State.FinishedAt); perr == nil && t.Year() > 1 {
				b.lastUse = t
			}
		}
		r.mu.Unlock()
		if b.running {
			rc.reattached++
			rc.live = append(rc.live, b)
		} else {
			rc.kept++
		}
	}
	return nil
}

// volumes removes workspaces of unknown conversations and pool volumes
// nobody uses.
func (rc *reconciler) volumes(ctx context.Context) {
	r := rc.r
	vols, err := r.api.VolumeList(ctx, client.VolumeListOptions{
		Filters: make(client.Filters).Add("label", LabelInstance+"="+r.opts.InstanceID)})
	if err != nil {
		rc.errs = append(rc.errs, r.engineErr("reconcile sandboxes: list volumes", err))
		return
	}
	for _, v := range vols.Items {
		if rc.usedVolumes[v.Name] {
			continue
		}
		convo := v.Labels[LabelConversation]
		owner := r.reg.containerOfVolume(v.Name)
		if e, ok := r.reg.get(owner); ok && v.Labels[LabelPool] == "1" {
			convo = e.Conversation // an assigned pool volume
		}
		if convo == "" || (rc.known != nil && !rc.known[convo]) {
			rc.errs = append(rc.errs, r.removeVolume(ctx, v.Name))
			if owner != "" {
				rc.errs = append(rc.errs, r.reg.delete(owner))
			}
		}
	}
}

// brokenContainer finds the id in Podman 4's listing failure for a
// container whose storage is gone (left by a create interrupted halfway).
var brokenContainer = regexp.MustCompile(`getting container from store "([0-9a-f]{64})": container not known`)

// listInstance lists this instance's containers. A Podman listing that fails
// on a half-made container is repaired by removing that container (it has
// no storage, so nothing is lost) and listed again.
func (r *Runtime) listInstance(ctx context.Context) (client.ContainerListResult, error) {
	opts := client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelInstance+"="+r.opts.InstanceID)}
	for range 10 {
		list, err := r.api.ContainerList(ctx, opts)
		if err == nil {
			return list, nil
		}
		m := brokenContainer.FindStringSubmatch(err.Error())
		if m == nil {
			return list, err
		}
		r.log.Warn("removing a half-made container the engine cannot list", "id", shortID(m[1]))
		if _, rerr := r.api.ContainerRemove(ctx, m[1], client.ContainerRemoveOptions{Force: true}); rerr != nil {
			return list, errors.Join(err, rerr)
		}
	}
	return r.api.ContainerList(ctx, opts)
}

func containerName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return strings.TrimPrefix(names[0], "/")
}

// removeOrphan removes a container and its workspace volume.
func (r *Runtime) removeOrphan(ctx context.Context, id, name, vol string, key conch.ConversationKey, reason string) error {
	r.log.Info("removing sandbox", "container", name, "reason", reason)
	if err := r.removeContainer(ctx, id, key, name, reason); err != nil {
		return err
	}
	if vol != "" {
		return r.removeVolume(ctx, vol)
	}
	return nil
}
