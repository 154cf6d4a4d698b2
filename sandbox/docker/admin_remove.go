package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"conch"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Removal and pruning for `conch sandbox rm | prune`.

// RemoveRef removes the sandbox ref names and returns what it removed
// ("container NAME", "volume NAME"). A conversation's workspace goes too,
// as with Remove, unless keepWorkspace; a conversation then gets a new
// container with its old workspace on next use. An unknown ref is refused.
func (r *Runtime) RemoveRef(ctx context.Context, ref string, keepWorkspace bool) ([]string, error) {
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	var removed []string
	// A container that is not its conversation's (pool, orphan, misnamed).
	if f := t.found; f != nil && (t.key.IsZero() || f.s.Name != ContainerName(r.opts.InstanceID, t.key)) {
		if err := r.removeContainer(ctx, f.s.ID, t.key, f.s.Name, "removed by the operator"); err != nil {
			return nil, err
		}
		removed = append(removed, "container "+f.s.Name)
		if keepWorkspace || f.s.Workspace == "" {
			return removed, nil
		}
		if err := r.removeVolume(ctx, f.s.Workspace); err != nil {
			return removed, err
		}
		removed = append(removed, "volume "+f.s.Workspace)
		return removed, r.reg.delete(f.s.Name)
	}

	// A conversation's sandbox.
	vols := slices.Clone(t.workspaces)
	if t.found != nil && t.found.s.Workspace != "" && !slices.Contains(vols, t.found.s.Workspace) {
		vols = append(vols, t.found.s.Workspace)
	}
	if keepWorkspace {
		if t.found == nil {
			return nil, conch.Errorf(conch.KindNotFound, "conversation %s has no container to remove (its workspace is kept as asked)", t.key)
		}
		b, err := r.lockBox(ctx, t.key)
		if err != nil {
			return nil, err
		}
		defer b.unlock()
		b.closeOpsLocked()
		if err := r.removeContainer(ctx, t.found.s.ID, t.key, t.found.s.Name, "removed by the operator, workspace kept"); err != nil {
			return nil, err
		}
		b.id, b.running = "", false
		r.removeSocketDir(b.sock)
		b.sock = ""
		r.log.Info("sandbox removed by the operator, workspace kept", "conversation", t.key.String(), "container", t.found.s.Name)
		return []string{"container " + t.found.s.Name}, nil
	}
	if t.found == nil && len(vols) == 0 {
		return nil, conch.Errorf(conch.KindNotFound, "conversation %s has neither a container nor a workspace: nothing to remove", t.key)
	}
	if err := r.Remove(ctx, t.key); err != nil {
		return nil, err
	}
	if t.found != nil {
		removed = append(removed, "container "+t.found.s.Name)
	}
	for _, v := range vols {
		if err := r.removeVolume(ctx, v); err != nil {
			return removed, err
		}
		removed = append(removed, "volume "+v)
	}
	return removed, nil
}

// Prune removes, and returns as "container NAME (reason)" or "volume NAME
// (reason)" lines (only lists them when dryRun):
//   - containers of conversations the store no longer knows, and containers
//     whose conversation cannot be told (orphans), with their workspaces;
//   - stopped warm-pool containers and stale ones, with their volumes;
//   - stopped containers unused past Options.Retention, or stopped with a
//     stale image or profile (their workspaces stay: the conversation gets
//     a new container with them on next use);
//   - workspace volumes of this instance that no container uses and whose
//     conversation the store does not know (dangling).
//
// A container still being created (state created, less than five minutes
// old) is left alone.
func (r *Runtime) Prune(ctx context.Context, dryRun bool) ([]string, error) {
	all, known, err := r.inspectAll(ctx)
	if err != nil {
		return nil, err
	}
	now := r.opts.Now()
	var out []string
	var errs []error
	used := map[string]bool{}
	for i := range all {
		s := all[i].s
		// Its workspace is kept, or removed with it: either way not dangling.
		used[s.Workspace] = true
		reason, withWorkspace := r.pruneReason(s, now)
		if reason == "" {
			continue
		}
		line := "container " + s.Name + " (" + reason + ")"
		if withWorkspace && s.Workspace != "" {
			line += " and volume " + s.Workspace
		}
		out = append(out, line)
		if dryRun {
			continue
		}
		if withWorkspace {
			errs = append(errs, r.removeOrphan(ctx, s.ID, s.Name, s.Workspace, s.Key, reason))
			if !s.Pool {
				errs = append(errs, r.reg.delete(s.Name))
			}
			continue
		}
		errs = append(errs, r.removeKeepWorkspace(ctx, s, reason))
	}

	vols, err := r.api.VolumeList(ctx, client.VolumeListOptions{
		Filters: make(client.Filters).Add("label", LabelInstance+"="+r.opts.InstanceID)})
	if err != nil {
		return out, errors.Join(append(errs, r.engineErr("prune: list volumes", err))...)
	}
	names := make([]string, 0, len(vols.Items))
	labels := map[string]map[string]string{}
	for _, v := range vols.Items {
		names = append(names, v.Name)
		labels[v.Name] = v.Labels
	}
	slices.Sort(names)
	for _, v := range names {
		if used[v] {
			continue
		}
		convo := labels[v][LabelConversation]
		owner := r.reg.containerOfVolume(v)
		if e, ok := r.reg.get(owner); ok {
			convo = e.Conversation // an assigned pool volume
		}
		if convo != "" && (known == nil || known[convo]) {
			continue // a known conversation's workspace, kept until Remove
		}
		reason := "dangling workspace of " + convo + ", a conversation the store no longer knows"
		if convo == "" {
			reason = "dangling workspace of no conversation"
		}
		out = append(out, "volume "+v+" ("+reason+")")
		if dryRun {
			continue
		}
		errs = append(errs, r.removeVolume(ctx, v))
		if owner != "" {
			errs = append(errs, r.reg.delete(owner))
		}
	}
	if !dryRun {
		r.log.Info("sandboxes pruned", "removed", len(out))
	}
	return out, errors.Join(errs...)
}

// pruneReason says why prune removes a container ("" keeps it) and whether
// its workspace goes with it.
func (r *Runtime) pruneReason(s conch.SandboxInfo, now time.Time) (reason string, withWorkspace bool) {
	if s.State == string(container.StateCreated) && now.Sub(s.Created) < 5*time.Minute {
		return "", false // being created
	}
	stopped := s.State == string(container.StateExited) || s.State == string(container.StateDead) ||
		s.State == string(container.StateCreated)
	switch {
	case s.Pool && stopped:
		return "stopped warm-pool container", true
	case s.Pool && !s.ImageCurrent:
		return "warm-pool container with a stale image", true
	case s.Pool && !s.ProfileCurrent:
		return "warm-pool container with a stale profile", true
	case s.Pool:
		return "", false
	case s.Key.IsZero():
		return "orphan: belongs to no conversation", true
	case s.Name != ContainerName(r.opts.InstanceID, s.Key):
		return "orphan: name does not match conversation " + s.Conversation, true
	case s.Orphan:
		return "orphan: the store no longer knows conversation " + s.Conversation, true
	case !stopped:
		return "", false
	case r.opts.Retention > 0 && !s.LastUsed.IsZero() && now.Sub(s.LastUsed) >= r.opts.Retention:
		return "stopped and unused for " + humanDuration(now.Sub(s.LastUsed)) + ", past retention; workspace kept", false
	case !s.ImageCurrent || !s.ProfileCurrent:
		return "stopped with a " + s.Freshness() + "; workspace kept", false
	}
	return "", false
}

// removeKeepWorkspace removes a conversation's container under its lock,
// keeping its workspace and registry entry.
func (r *Runtime) removeKeepWorkspace(ctx context.Context, s conch.SandboxInfo, reason string) error {
	b, err := r.lockBox(ctx, s.Key)
	if err != nil {
		return err
	}
	defer b.unlock()
	b.closeOpsLocked()
	if err := r.removeContainer(ctx, s.ID, s.Key, s.Name, reason); err != nil {
		return err
	}
	b.id, b.running = "", false
	return nil
}

// humanDuration renders d coarsely: 45s, 3m, 2h5m, 4d.
func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m > 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
