package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"conch"
	sandboximage "conch/images/sandbox"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// imageState is what conch knows about an image new sandboxes use.
type imageState struct {
	ID string
	// Ref is the reference containers are created from.
	Ref string
	// Hash is the image's definition hash: our label, or the image ID for an
	// image conch did not build (an operator's own image is used as it is).
	// For a derived image with coding-agent CLIs it is its AgentsHash.
	Hash string
	// Managed is true when conch built the image and so may rebuild it.
	Managed bool
	// Agents are the coding-agent CLIs the image has, name → version (its
	// conch.agent.<name>.version labels).
	Agents map[string]string
}

// inspectImage reports the configured (base) image; found is false when it
// is missing.
func (r *Runtime) inspectImage(ctx context.Context) (st imageState, found bool, err error) {
	res, err := r.api.ImageInspect(ctx, r.opts.Image)
	if cerrdefs.IsNotFound(err) {
		return imageState{}, false, nil
	}
	if err != nil {
		return imageState{}, false, fmt.Errorf("inspect image %s: %w", r.opts.Image, err)
	}
	st = imageState{ID: res.ID, Ref: r.opts.Image, Hash: res.ID}
	if res.Config != nil {
		labels := res.Config.Labels
		if h, ok := labels[sandboximage.HashLabel]; ok && managedRef(labels, r.opts.Image) {
			st.Hash, st.Managed = h, true
		}
		st.Agents = agentsOf(labels)
	}
	return st, true, nil
}

// managedRef tells whether an image labelled as conch's was built by conch
// as ref. An image built FROM conch's image inherits its labels, so the hash
// label alone would let conch rebuild over an operator's own image: the
// reference label must name the configured reference too. Images conch built
// before it wrote that label have none; they count as conch's only under the
// default reference.
func managedRef(labels map[string]string, ref string) bool {
	built, ok := labels[sandboximage.RefLabel]
	if !ok {
		return ref == DefaultImage && labels[sandboximage.AgentsLabel] == ""
	}
	return built == ref
}

// agentsOf reads the conch.agent.<name>.version labels.
func agentsOf(labels map[string]string) map[string]string {
	var out map[string]string
	for k, v := range labels {
		if name, ok := sandboximage.AgentFromLabel(k); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = v
		}
	}
	return out
}

// EnsureImage makes the image new sandboxes use present and current: a
// missing image, or one conch built from an older definition, is built
// (offline when possible) with progress lines. An image conch did not build
// is used as it is. With Options.Agents the derived image with those
// coding-agent CLIs is ensured on top (agents.go). It returns the image's
// hash.
func (r *Runtime) EnsureImage(ctx context.Context, progress func(string)) (string, error) {
	r.imageMu.Lock()
	defer r.imageMu.Unlock()
	base, err := r.ensureBaseLocked(ctx, progress)
	if err != nil {
		return "", err
	}
	st, err := r.withAgentsLocked(ctx, base, r.agents, progress)
	if err != nil {
		return "", err
	}
	r.image = st
	return st.Hash, nil
}

// ensureBaseLocked makes the configured image present and current.
func (r *Runtime) ensureBaseLocked(ctx context.Context, progress func(string)) (imageState, error) {
	st, found, err := r.inspectImage(ctx)
	if err != nil {
		return imageState{}, err
	}
	want := sandboximage.Hash()
	switch {
	case found && (!st.Managed || st.Hash == want):
		return st, nil
	case found:
		report(progress, fmt.Sprintf("sandbox image %s is from an older definition (%s); rebuilding as %s", r.opts.Image, st.Hash, want))
	default:
		report(progress, fmt.Sprintf("sandbox image %s is missing; building it (first use)", r.opts.Image))
	}
	return r.buildImageLocked(ctx, progress)
}

// BuildImage builds the sandbox image and tags it as the configured image,
// for `conch sandbox image build`. It prefers the offline build (debootstrap
// from the host's apt mirror, cached under the cache dir, then an Engine
// API import); without debootstrap it asks the engine to build the
// Containerfile, which needs a registry. With Options.Agents the derived
// image is ensured on the new base.
func (r *Runtime) BuildImage(ctx context.Context, progress func(string)) error {
	r.imageMu.Lock()
	defer r.imageMu.Unlock()
	base, err := r.buildImageLocked(ctx, progress)
	if err != nil {
		return err
	}
	st, err := r.withAgentsLocked(ctx, base, r.agents, progress)
	if err != nil {
		return err
	}
	r.image = st
	return nil
}

func (r *Runtime) buildImageLocked(ctx context.Context, progress func(string)) (imageState, error) {
	prev, prevFound, _ := r.inspectImage(ctx) // pruned once the new one stands
	rootfs, offErr := sandboximage.CachedRootfs(ctx, sandboximage.RootfsOptions{
		CacheDir: r.opts.CacheDir, Mirror: r.opts.Mirror, Progress: progress,
	})
	if offErr == nil {
		if err := r.importRootfs(ctx, rootfs, progress); err != nil {
			return imageState{}, err
		}
	} else {
		if ctx.Err() != nil {
			return imageState{}, fmt.Errorf("build image: %w", offErr)
		}
		report(progress, "offline build unavailable ("+offErr.Error()+"); building the Containerfile in the engine")
		if err := r.buildContainerfile(ctx, progress); err != nil {
			return imageState{}, &conch.Error{Kind: conch.KindUnavailable, User: "the sandbox image could not be built",
				Err: fmt.Errorf("build image %s: offline: %v; containerfile: %w", r.opts.Image, offErr, err)}
		}
	}
	st, found, err := r.inspectImage(ctx)
	if err != nil {
		return imageState{}, err
	}
	if !found || !st.Managed || st.Hash != sandboximage.Hash() {
		return imageState{}, fmt.Errorf("build image %s: the engine does not show the built image with hash %s (found %v, hash %q)",
			r.opts.Image, sandboximage.Hash(), found, st.Hash)
	}
	report(progress, fmt.Sprintf("sandbox image %s ready (%s)", r.opts.Image, st.Hash))
	r.pruneReplacedBase(ctx, prev, prevFound, st)
	return st, nil
}

// importRootfs is `docker import` over the Engine API: the root file system
// tarball plus the image configuration as Dockerfile changes.
func (r *Runtime) importRootfs(ctx context.Context, path string, progress func(string)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("import image: %w", err)
	}
	defer f.Close()
	report(progress, "importing the root file system into "+r.info.Engine)
	rc, err := r.api.ImageImport(ctx, client.ImageImportSource{Source: f, SourceName: "-"}, r.opts.Image,
		client.ImageImportOptions{Changes: sandboximage.Changes(r.opts.Image), Message: "conch sandbox image " + sandboximage.Hash()})
	if err != nil {
		return fmt.Errorf("import image %s: %w", r.opts.Image, err)
	}
	defer rc.Close()
	if err := readJSONMessages(rc, nil); err != nil {
		return fmt.Errorf("import image %s: %w", r.opts.Image, err)
	}
	return nil
}

// buildContainerfile asks the engine to build images/sandbox/Containerfile.
func (r *Runtime) buildContainerfile(ctx context.Context, progress func(string)) error {
	bctx, err := sandboximage.BuildContext()
	if err != nil {
		return err
	}
	res, err := r.api.ImageBuild(ctx, bytes.NewReader(bctx), client.ImageBuildOptions{
		Tags: []string{r.opts.Image}, Dockerfile: "Containerfile", Remove: true, ForceRemove: true,
		Labels: map[string]string{sandboximage.HashLabel: sandboximage.Hash(), sandboximage.RefLabel: r.opts.Image},
	})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	return readJSONMessages(res.Body, progress)
}

// readJSONMessages consumes an engine progress stream and returns the first
// error it reports.
func readJSONMessages(r io.Reader, progress func(string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var m struct {
			Stream      string `json:"stream"`
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			continue // Podman sometimes sends a bare image id
		}
		if m.Error != "" || m.ErrorDetail.Message != "" {
			return errors.New(strings.TrimSpace(m.Error + " " + m.ErrorDetail.Message))
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			report(progress, s)
		}
	}
	return sc.Err()
}

func report(progress func(string), s string) {
	if progress != nil {
		progress(s)
	}
}
