package docker

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"conch"
	sandboximage "conch/images/sandbox"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// currentImage returns the image new sandboxes use, building it if needed.
func (r *Runtime) currentImage(ctx context.Context) (imageState, error) {
	r.imageMu.Lock()
	st := r.image
	r.imageMu.Unlock()
	if st.ID != "" {
		return st, nil
	}
	if _, err := r.EnsureImage(ctx, r.opts.BuildProgress); err != nil {
		return imageState{}, err
	}
	r.imageMu.Lock()
	defer r.imageMu.Unlock()
	return r.image, nil
}

// createLocked creates and starts b's container: from the warm pool when
// the conversation has no workspace yet, else fresh with its workspace.
func (r *Runtime) createLocked(ctx context.Context, b *box) error {
	vol := b.name
	if v, ok := r.reg.volumeOf(b.key); ok {
		vol = v
	}
	exists, err := r.volumeExists(ctx, vol)
	if err != nil {
		return err
	}
	if !exists {
		if ok, err := r.assignFromPool(ctx, b); ok || err != nil {
			return err
		}
		vol = b.name
	}
	img, err := r.currentImage(ctx)
	if err != nil {
		return err
	}
	labels := map[string]string{LabelInstance: r.opts.InstanceID, LabelConversation: b.key.String()}
	if !exists {
		if err := r.createVolume(ctx, vol, labels); err != nil {
			return err
		}
	}
	start := r.opts.Now()
	id, sock, err := r.createContainer(ctx, b.name, vol, img, labels)
	if err != nil {
		return err
	}
	b.id, b.running, b.volume, b.sock = id, true, vol, sock
	r.log.Info("sandbox created", "conversation", b.key.String(), "container", b.name, "id", shortID(id),
		"volume", vol, "took", r.opts.Now().Sub(start).Round(time.Millisecond))
	r.audit(ctx, conch.AuditSandboxCreate, b.key, map[string]any{"container": b.name, "id": id, "volume": vol,
		"image": img.Hash, "engine": r.info.Engine, "profile": r.specHash})
	return nil
}

// createContainer creates, verifies and starts one container; on any
// failure the container is removed again.
//
// With the socket transport it also makes the container's socket directory
// (sock, its host path) and starts the agent.
func (r *Runtime) createContainer(ctx context.Context, name, vol string, img imageState, labels map[string]string) (id, sock string, err error) {
	hc, err := r.profile.hostConfig(r.info.Engine, r.seccomp)
	if err != nil {
		return "", "", err
	}
	hc.Binds = []string{vol + ":" + WorkspaceDir}
	if r.agentName != "" {
		hc.Binds = append(hc.Binds, filepath.Join(r.opts.DataDir, "agent")+":"+AgentDir+":ro")
	}
	if r.useSocket() {
		if sock, err = r.newSocketDir(); err != nil {
			return "", "", err
		}
		defer func() {
			if err != nil {
				r.removeSocketDir(sock)
			}
		}()
		hc.Binds = append(hc.Binds, sock+":"+SocketDir)
	}
	hc.Binds = append(hc.Binds, mountBinds(r.opts.ExtraMounts)...)
	all := map[string]string{LabelImageHash: img.Hash, LabelProfileHash: r.specHash}
	for k, v := range labels {
		all[k] = v
	}
	cfg := &container.Config{
		Image:      img.Ref,
		User:       r.profile.containerUser(),
		WorkingDir: WorkspaceDir,
		Cmd:        slices.Clone(sandboximage.Cmd),
		Hostname:   "sandbox",
		Labels:     all,
	}
	// Not cancelled once begun: an engine interrupted halfway through a
	// create can leave a half-made container (Podman 4 then fails every
	// listing). A caller that gave up finds the sandbox ready next time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	res, err := r.api.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		return "", "", r.engineErr("create sandbox "+name, err)
	}
	id = res.ID
	r.noteName(name, true)
	defer func() {
		if err != nil {
			if _, rerr := r.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); rerr == nil || cerrdefs.IsNotFound(rerr) {
				r.noteName(name, false)
			}
		}
	}()
	for _, w := range res.Warnings {
		r.log.Warn("engine warning on sandbox create", "container", name, "warning", w)
	}
	ins, err := r.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", "", r.engineErr("inspect new sandbox "+name, err)
	}
	if bad := r.profile.verify(r.info.Engine, r.seccomp, ins.Container); len(bad) > 0 {
		if len(res.Warnings) > 0 {
			bad = append(bad, "engine warnings: "+strings.Join(res.Warnings, " | "))
		}
		return "", "", &conch.Error{Kind: conch.KindUnavailable, User: "the container engine did not apply the sandbox hardening",
			Err: &HardeningMismatchError{Container: name, Engine: r.info.Engine, Settings: bad}}
	}
	if err := r.startContainer(ctx, id, name, sock); err != nil {
		return "", "", r.engineErr("start new sandbox "+name, err)
	}
	return id, sock, nil
}

func (r *Runtime) volumeExists(ctx context.Context, name string) (bool, error) {
	_, err := r.api.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, r.engineErr("inspect volume "+name, err)
}

// removeContainer force-removes a container (its workspace volume stays).
func (r *Runtime) removeContainer(ctx context.Context, id string, key conch.ConversationKey, name, reason string) error {
	_, err := r.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return r.engineErr("remove sandbox "+name, err)
	}
	r.noteName(name, false)
	r.audit(ctx, conch.AuditSandboxRemove, key, map[string]any{"container": name, "id": id, "reason": reason, "engine": r.info.Engine})
	return nil
}

func (r *Runtime) removeVolume(ctx context.Context, name string) error {
	_, err := r.api.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
	if cerrdefs.IsConflict(err) {
		// In use by a container we do not track (one being created as we
		// look); the next reconcile sees it settled.
		r.log.Info("volume in use, not removed", "volume", name)
		return nil
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		return r.engineErr("remove workspace volume "+name, err)
	}
	r.removeDiskImage(name)
	return nil
}
