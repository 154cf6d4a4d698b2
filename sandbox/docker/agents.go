package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	sandboximage "conch/images/sandbox"
	"conch/internal/flock"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// A derived image adds coding-agent CLIs (images/sandbox/agents.go pins
// them) to the base image. It is built without the engine's builder, the
// same way on Docker and Podman and with no registry: a container is
// created from the base (never started), a tar laying out AgentsDir and
// BinDir is copied into it, and it is committed with the base's
// configuration and conch's labels. Its tag carries its hash, so a changed
// pin or base gives a new image; an unchanged one is reused.

// lookupAgents validates agent names (Options.Agents, AgentImage).
func lookupAgents(names []string) ([]sandboximage.Agent, error) {
	if len(names) == 0 {
		return nil, nil
	}
	as, err := sandboximage.LookupAgents(names)
	if err != nil {
		return nil, fmt.Errorf("sandbox agents: %w", err)
	}
	return as, nil
}

// hasAgents tells whether an image's labels already show every agent at its
// pinned version (an image built with Containerfile.agents).
func hasAgents(have map[string]string, as []sandboximage.Agent) bool {
	for _, a := range as {
		if have[a.Name] != a.Version {
			return false
		}
	}
	return true
}

// derivedRef returns the derived image's hash and reference over base.
func derivedRef(base imageState, as []sandboximage.Agent) (hash, ref string) {
	hash = sandboximage.AgentsHash(base.Hash, as)
	return hash, sandboximage.AgentsRef(as, hash)
}

// inspectDerived reports the derived image ref if conch built it with hash.
func (r *Runtime) inspectDerived(ctx context.Context, ref, hash string) (imageState, bool, error) {
	res, err := r.api.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return imageState{}, false, nil
	}
	if err != nil {
		return imageState{}, false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if res.Config == nil || res.Config.Labels[sandboximage.AgentsHashLabel] != hash || res.Config.Labels[sandboximage.RefLabel] != ref {
		return imageState{}, false, nil
	}
	return imageState{ID: res.ID, Ref: ref, Hash: hash, Managed: true, Agents: agentsOf(res.Config.Labels)}, true, nil
}

// withAgentsLocked returns the image with as on top of base: base itself
// without agents or when it already has them, else the derived image,
// built when missing. r.imageMu is held.
func (r *Runtime) withAgentsLocked(ctx context.Context, base imageState, as []sandboximage.Agent, progress func(string)) (imageState, error) {
	if len(as) == 0 || hasAgents(base.Agents, as) {
		return base, nil
	}
	hash, ref := derivedRef(base, as)
	if st, ok, err := r.inspectDerived(ctx, ref, hash); err != nil || ok {
		return st, err
	}
	// Another process (conch up, `conch sandbox image build`, a test) may be
	// building the same image on this engine: wait for it, then look again.
	unlock, err := flock.Lock(ctx, filepath.Join(r.opts.CacheDir, "locks", "image-"+hash8(r.info.Host)+"-"+hash+".lock"))
	if err != nil {
		return imageState{}, fmt.Errorf("build image %s: %w", ref, err)
	}
	defer unlock()
	if st, ok, err := r.inspectDerived(ctx, ref, hash); err != nil || ok {
		return st, err
	}
	start := r.opts.Now()
	report(progress, fmt.Sprintf("sandbox image %s with %s is missing; building it (first use; downloads are cached in %s)",
		ref, agentList(as), filepath.Join(r.opts.CacheDir, "npm")))
	if err := r.buildDerived(ctx, base, as, hash, ref, progress); err != nil {
		return imageState{}, r.engineErr("build image "+ref, err)
	}
	st, ok, err := r.inspectDerived(ctx, ref, hash)
	if err != nil {
		return imageState{}, err
	}
	if !ok {
		return imageState{}, fmt.Errorf("build image %s: the engine does not show the committed image with hash %s", ref, hash)
	}
	report(progress, fmt.Sprintf("sandbox image %s ready (%s, took %s)", ref, agentList(as), r.opts.Now().Sub(start).Round(time.Second)))
	r.log.Info("sandbox image with coding agents built", "image", ref, "agents", agentList(as), "took", r.opts.Now().Sub(start).Round(time.Millisecond))
	r.pruneDerived(ctx, ref)
	return st, nil
}

func agentList(as []sandboximage.Agent) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Name + " " + a.Version
	}
	return strings.Join(parts, ", ")
}

// buildDerived fetches the tarballs and commits the derived image.
func (r *Runtime) buildDerived(ctx context.Context, base imageState, as []sandboximage.Agent, hash, ref string, progress func(string)) (err error) {
	paths, err := sandboximage.FetchAgents(ctx, sandboximage.FetchOptions{
		Registry: r.opts.NPMRegistry, CacheDir: r.opts.CacheDir, Progress: progress,
	}, as)
	if err != nil {
		return err
	}
	baseIns, err := r.api.ImageInspect(ctx, base.ID)
	if err != nil {
		return fmt.Errorf("inspect base image: %w", err)
	}
	if baseIns.Config == nil {
		return fmt.Errorf("base image %s has no configuration", base.Ref)
	}
	// Never started: the copy and the commit work on a created container.
	name := "conch-image-build-" + randomHex(4)
	created, err := r.api.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: base.ID},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return fmt.Errorf("create build container: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, rerr := r.api.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true}); rerr != nil && !cerrdefs.IsNotFound(rerr) {
			r.log.Warn("remove image build container", "container", name, "err", rerr)
		}
	}()
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(sandboximage.WriteAgentsTar(ctx, pw, as, paths))
	}()
	cr := &countingReader{r: pr, every: 2 * time.Second, last: time.Now(), report: func(n int64) {
		report(progress, fmt.Sprintf("copying the CLIs into the image: %s", humanBytes(n)))
	}}
	report(progress, "copying the CLIs into the image")
	_, err = r.api.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: cr})
	pr.CloseWithError(errors.New("copy ended"))
	if err != nil {
		return fmt.Errorf("copy the CLIs into the build container: %w", err)
	}
	report(progress, fmt.Sprintf("copied %s; committing %s", humanBytes(cr.n), ref))
	bc := baseIns.Config
	changes, labels := commitChanges(bc.User, bc.WorkingDir, bc.Cmd, bc.Labels, base.Ref, as, hash, ref)
	_, err = r.api.ContainerCommit(ctx, created.ID, client.ContainerCommitOptions{
		Reference: ref,
		Comment:   "conch sandbox image with " + agentList(as),
		Changes:   changes,
		NoPause:   true,
		// Docker merges it into the container's; Podman needs a body.
		Config: &container.Config{User: bc.User, WorkingDir: bc.WorkingDir, Cmd: slices.Clone(bc.Cmd),
			Env: slices.Clone(bc.Env), Labels: labels},
	})
	if err != nil {
		return fmt.Errorf("commit %s: %w", ref, err)
	}
	return nil
}

// commitChanges restates the base's configuration (a commit takes the
// container's, which the engine may have added to) and sets conch's labels:
// the base's hash label stays (inherited), the reference label names the
// derived image.
func commitChanges(user, workDir string, cmd []string, baseLabels map[string]string, baseRef string, as []sandboximage.Agent, hash, ref string) ([]string, map[string]string) {
	var cs []string
	if user != "" {
		cs = append(cs, "USER "+user)
	}
	if workDir != "" {
		cs = append(cs, "WORKDIR "+workDir)
	}
	if len(cmd) > 0 {
		q := make([]string, len(cmd))
		for i, c := range cmd {
			q[i] = strconv.Quote(c)
		}
		cs = append(cs, "CMD ["+strings.Join(q, ", ")+"]")
	}
	ours := sandboximage.AgentLabels(as, hash)
	ours[sandboximage.RefLabel] = ref
	ours[labelAgentsBase] = baseRef
	for _, k := range slices.Sorted(maps.Keys(ours)) {
		cs = append(cs, "LABEL "+k+"="+strconv.Quote(ours[k]))
	}
	all := maps.Clone(baseLabels)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, ours)
	return cs, all
}

// labelAgentsBase names the base image reference a derived image was built on.
const labelAgentsBase = "conch.agents-base"

// pruneDerived removes derived images of the same agents on the same base
// reference other than keep (older pins or base definitions) that no
// container uses; failures only log.
func (r *Runtime) pruneDerived(ctx context.Context, keep string) {
	repo, _, _ := strings.Cut(keep, ":")
	list, err := r.api.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", sandboximage.AgentsHashLabel)})
	if err != nil {
		r.log.Warn("list older sandbox images", "err", err)
		return
	}
	for _, img := range list.Items {
		for _, tag := range img.RepoTags {
			t := strings.TrimPrefix(tag, "localhost/")
			if t == keep || !strings.HasPrefix(t, repo+":") || img.Labels[sandboximage.RefLabel] != t || img.Labels[labelAgentsBase] != r.opts.Image {
				continue
			}
			if _, err := r.api.ImageRemove(ctx, tag, client.ImageRemoveOptions{}); err != nil {
				r.log.Info("older sandbox image kept (in use?)", "image", tag, "err", err)
				continue
			}
			r.log.Info("older sandbox image removed", "image", tag)
		}
	}
}

// countingReader counts what passes and calls report at most every interval.
type countingReader struct {
	r      io.Reader
	n      int64
	every  time.Duration
	last   time.Time
	report func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.report != nil && time.Since(c.last) >= c.every {
		c.last = time.Now()
		c.report(c.n)
	}
	return n, err
}

// AgentImage ensures the image with the coding-agent CLIs agents (names as
// in coder.agent: claude, codex, gemini) on the configured base image,
// building the base and the derived image when missing or stale, and
// returns its reference. With the runtime's own Options.Agents it also
// becomes the image new sandboxes use.
func (r *Runtime) AgentImage(ctx context.Context, agents []string, progress func(string)) (string, error) {
	as, err := lookupAgents(agents)
	if err != nil {
		return "", err
	}
	if len(as) == 0 {
		return "", errors.New("sandbox agents: none named")
	}
	r.imageMu.Lock()
	defer r.imageMu.Unlock()
	base, err := r.ensureBaseLocked(ctx, progress)
	if err != nil {
		return "", err
	}
	st, err := r.withAgentsLocked(ctx, base, as, progress)
	if err != nil {
		return "", err
	}
	if sameAgents(as, r.agents) {
		r.image = st
	}
	return st.Ref, nil
}

func sameAgents(a, b []sandboximage.Agent) bool {
	return slices.EqualFunc(a, b, func(x, y sandboximage.Agent) bool { return x.Name == y.Name })
}

// ImageAgents reports the coding-agent CLIs (name → version, from the
// image's labels) of the image new sandboxes use, without building
// anything: with Options.Agents that is the derived image, which has none
// of them until it is built.
func (r *Runtime) ImageAgents(ctx context.Context) (map[string]string, error) {
	st, _, err := r.wantImage(ctx)
	if err != nil {
		return nil, err
	}
	return maps.Clone(st.Agents), nil
}

// wantImage is the image a sandbox created now would use, without building
// anything: the image in use, else the configured image (or the definition
// conch would build) with Options.Agents on top. found is false when that
// image does not exist yet; st.Hash is then the hash it will have.
func (r *Runtime) wantImage(ctx context.Context) (st imageState, found bool, err error) {
	r.imageMu.Lock()
	st = r.image
	r.imageMu.Unlock()
	if st.ID != "" {
		return st, true, nil
	}
	base, found, err := r.inspectImage(ctx)
	if err != nil {
		return imageState{}, false, err
	}
	if !found || (base.Managed && base.Hash != sandboximage.Hash()) {
		base = imageState{Ref: r.opts.Image, Hash: sandboximage.Hash(), Managed: true}
		found = false
	}
	if len(r.agents) == 0 || hasAgents(base.Agents, r.agents) {
		return base, found, nil
	}
	hash, ref := derivedRef(base, r.agents)
	if !found {
		return imageState{Ref: ref, Hash: hash, Managed: true}, false, nil
	}
	d, ok, err := r.inspectDerived(ctx, ref, hash)
	if err != nil || ok {
		return d, ok, err
	}
	return imageState{Ref: ref, Hash: hash, Managed: true}, false, nil
}

// AgentsReport is what `conch doctor` says about the coding-agent CLIs.
type AgentsReport struct {
	// Image is the image new sandboxes would use; Built is false when it
	// does not exist yet (built on first use).
	Image string
	Built bool
	// Agents are the CLIs that image has, name → version.
	Agents map[string]string
	// Want are the configured agents (Options.Agents) with their pinned versions.
	Want map[string]string
}

// ProbeAgents connects to the engine as New would and reports the coding-agent
// CLIs of the image new sandboxes would use, without building or touching
// containers (for `conch doctor`).
func ProbeAgents(ctx context.Context, o Options) (AgentsReport, error) {
	o, _, err := o.withDefaults()
	if err != nil {
		return AgentsReport{}, err
	}
	as, err := o.installs()
	if err != nil {
		return AgentsReport{}, err
	}
	host, err := DetectHost(o.Host, o.Engine, os.Getenv)
	if err != nil {
		return AgentsReport{}, err
	}
	api, info, err := dial(ctx, host, o.Engine)
	if err != nil {
		return AgentsReport{}, err
	}
	defer api.Close()
	r := &Runtime{opts: o, api: api, info: info, agents: as, log: o.Logger}
	st, found, err := r.wantImage(ctx)
	if err != nil {
		return AgentsReport{}, err
	}
	rep := AgentsReport{Image: st.Ref, Built: found, Agents: maps.Clone(st.Agents), Want: map[string]string{}}
	for _, a := range as {
		rep.Want[a.Name] = a.Version
	}
	return rep, nil
}
