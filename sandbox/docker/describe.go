package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"conch"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Describe is one line about the conversation's computer for /status, e.g.
// "Computer: conch-matrix-abc-1234abcd, running, idle 3m, image current".
// It never fails: a problem reads "Computer: unknown: <reason>".
func (r *Runtime) Describe(ctx context.Context, key conch.ConversationKey) string {
	const p = "Computer: "
	if key.Channel == "" || key.ID == "" {
		return p + "unknown: no conversation given"
	}
	if err := r.checkOpen(); err != nil {
		return p + "unknown: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	name := ContainerName(r.opts.InstanceID, key)
	ins, err := r.api.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		ws, err := r.workspacesOf(ctx, key)
		switch {
		case err != nil:
			return p + "unknown: " + r.describeErr(err)
		case len(ws) > 0:
			return p + "none now, workspace kept (a container is created on next use)"
		}
		return p + "none yet (created on first use)"
	}
	if err != nil {
		return p + "unknown: " + r.describeErr(err)
	}
	c := ins.Container
	if c.State == nil || c.Config == nil {
		return p + name + ", unknown: the engine reported no state"
	}
	parts := []string{name}
	switch {
	case c.State.Running && !c.State.Paused:
		parts = append(parts, "running")
	case c.State.Status == container.StateExited:
		st := "stopped"
		if c.State.OOMKilled {
			st += " (out of memory)"
		}
		parts = append(parts, st+", restarted on next use")
	default:
		parts = append(parts, string(c.State.Status))
	}
	now := r.opts.Now()
	r.mu.Lock()
	var last time.Time
	active := 0
	if b := r.boxes[key.String()]; b != nil {
		last, active = b.lastUse, b.active
	}
	r.mu.Unlock()
	if last.IsZero() && !c.State.Running {
		if t, err := time.Parse(time.RFC3339Nano, c.State.FinishedAt); err == nil && t.Year() > 1 {
			last = t
		}
	}
	switch {
	case active > 0:
		parts = append(parts, "busy")
	case !last.IsZero():
		parts = append(parts, "idle "+humanDuration(now.Sub(last)))
	}
	if c.State.Running {
		if cur, limit, ok := r.pids(ctx, c.ID); ok && limit > 0 {
			if atPidsLimit(cur, limit) {
				parts = append(parts, fmt.Sprintf("processes %d/%d: at its limit, cannot start programs (recovered on next use)", cur, limit))
			} else {
				parts = append(parts, fmt.Sprintf("processes %d/%d", cur, limit))
			}
		}
	}
	if used, limit, ok := r.diskUse(ctx, workspaceVolume(c)); ok && used >= 0 {
		parts = append(parts, fmt.Sprintf("workspace %s of %s used", humanBytes(used), humanBytes(limit)))
	} else if ok {
		parts = append(parts, fmt.Sprintf("workspace limited to %s", humanBytes(limit)))
	} else if r.opts.Disk > 0 {
		parts = append(parts, "workspace without a quota (made before sandbox.disk was set)")
	}
	if want, err := r.wantImageHash(ctx); err == nil {
		if c.Config.Labels[LabelImageHash] == want {
			parts = append(parts, "image current")
		} else {
			parts = append(parts, "image stale")
		}
	}
	return p + strings.Join(parts, ", ")
}

// pids reads the container's process count and limit from one stats sample
// (the limit falls back to the profile's).
func (r *Runtime) pids(ctx context.Context, id string) (cur, limit int64, ok bool) {
	res, err := r.api.ContainerStats(ctx, id, client.ContainerStatsOptions{Stream: false})
	if err != nil {
		return 0, 0, false
	}
	defer res.Body.Close()
	var raw container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&raw); err != nil {
		return 0, 0, false
	}
	limit = int64(raw.PidsStats.Limit)
	if limit == 0 || limit > 1<<22 {
		// Podman's stats leave the limit out: it is the profile's.
		limit = r.profile.Pids
	}
	return int64(raw.PidsStats.Current), limit, true
}

// atPidsLimit: too few processes are left to start the agent (the engine's
// exec helper, the agent and its threads).
func atPidsLimit(cur, limit int64) bool { return limit > 0 && cur+4 > limit }

// describeErr is a reason safe to show in a chat; the detail is logged.
func (r *Runtime) describeErr(err error) string {
	r.log.Warn("describe sandbox", "err", err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "the container engine did not answer in time"
	case client.IsErrConnectionFailed(err) || cerrdefs.IsUnavailable(err) || conch.KindOf(err) == conch.KindUnavailable:
		return "the container engine does not answer"
	}
	return "the container engine reported an error (see the logs)"
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

// refresh rereads the registry file: another conch process (`conch up`
// beside `conch sandbox`) may have assigned pool containers since this one
// read it.
func (g *registry) refresh() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reloadLocked()
}
