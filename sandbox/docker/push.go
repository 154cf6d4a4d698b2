package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/client"
)

// `conch sandbox image push`: the images a cluster's nodes need (they
// cannot build conch's sandbox image) are tagged in the local engine as
// REGISTRY/<name>:<tag> and pushed by the engine itself (POST
// /images/{name}/push, the same on Docker and Podman), so the engine's own
// registry settings (insecure registries, mirrors, certificates) apply.

// PushImage is one image to push.
type PushImage struct {
	// Role is what a cluster uses it for: RoleSandbox (sandbox.image),
	// RoleSandboxBase (the sandbox image without the coding CLIs) or
	// RoleAgent (sandbox.kubernetes.agent_image).
	Role string
	// Source is the engine's reference; ID its image id.
	Source, ID string
	// Target is where it goes: REGISTRY/<name>:<tag>.
	Target string
	// Agents are the coding-agent CLIs it carries (name → version).
	Agents map[string]string
	// Digest is the manifest digest the registry holds after the push.
	Digest string
	// Size is the manifest's size as the engine reports it.
	Size int64
}

// Roles of PushImage.
const (
	RoleSandbox     = "sandbox"
	RoleSandboxBase = "sandbox-base"
	RoleAgent       = "agent"
)

// RegistryAuth is a registry login passed to the engine with the push (the
// X-Registry-Auth header). The engine stores nothing: credentials kept by
// `docker login` live in the docker CLI's config file, which the Engine API
// does not read, so conch does not either.
type RegistryAuth struct {
	Username, Password string
}

// header encodes a as the engine's X-Registry-Auth value for server
// (base64url of the JSON AuthConfig). Without a user it is that of "{}",
// as the docker CLI sends: Docker 20.10 refuses a push without the header.
func (a RegistryAuth) header(server string) (string, error) {
	if a.Username == "" {
		return base64.URLEncoding.EncodeToString([]byte("{}")), nil
	}
	b, err := json.Marshal(map[string]string{"username": a.Username, "password": a.Password, "serveraddress": server})
	if err != nil {
		return "", err
	}
	return base64.URLEncoding.EncodeToString(b), nil
}

// ParseRegistry checks a push destination: a registry host with an
// optional repository path (registry.example.org/team, 127.0.0.1:5000),
// without a tag or digest; it returns it without a trailing slash.
func ParseRegistry(s string) (string, error) {
	s = strings.TrimSuffix(strings.TrimSpace(s), "/")
	if s == "" {
		return "", errors.New("no registry given (e.g. registry.example.org/conch or 127.0.0.1:5000)")
	}
	if strings.Contains(s, "://") {
		return "", fmt.Errorf("registry %q: give it without a scheme (registry.example.org/conch)", s)
	}
	host := strings.SplitN(s, "/", 2)[0]
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return "", fmt.Errorf("registry %q: the first part must be a registry host (with a dot or a port, or localhost), "+
			"else the engine would push to Docker Hub", s)
	}
	if _, err := reference.ParseNamed(s + "/x"); err != nil {
		return "", fmt.Errorf("registry %q: %w", s, err)
	}
	return s, nil
}

// PushTarget is where source goes under registry: REGISTRY/<name>:<tag>,
// name the last element of source's repository and tag its own, except
// "latest" (or none), which becomes the first 12 hex digits of the image
// id: a tag per content, so a node pulling with IfNotPresent never keeps
// an older "latest".
func PushTarget(registry, source, id string) (string, error) {
	ref, err := reference.ParseNormalizedNamed(source)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", source, err)
	}
	path := reference.Path(ref)
	name := path[strings.LastIndex(path, "/")+1:]
	tag := "latest"
	if t, ok := ref.(reference.Tagged); ok {
		tag = t.Tag()
	}
	if tag == "latest" {
		hex := strings.TrimPrefix(id, "sha256:")
		if len(hex) < 12 {
			return "", fmt.Errorf("image %s: no image id to tag it by", source)
		}
		tag = hex[:12]
	}
	return registry + "/" + name + ":" + tag, nil
}

// ImagesToPush names what a cluster needs of this engine's images: the
// image sandboxes use (built first when missing or stale, as on first use
// of a sandbox; with coding-agent CLIs that is the derived image, and its
// base is pushed too), and agentImage, conch's own image, when the engine
// has it (notes say when it does not). Targets are under registry.
func (r *Runtime) ImagesToPush(ctx context.Context, registry, agentImage string, progress func(string)) ([]PushImage, []string, error) {
	if _, err := r.EnsureImage(ctx, progress); err != nil {
		return nil, nil, err
	}
	r.imageMu.Lock()
	use := r.image
	r.imageMu.Unlock()
	var out []PushImage
	var notes []string
	add := func(role, source string, agents map[string]string) error {
		res, err := r.api.ImageInspect(ctx, source)
		if err != nil {
			return fmt.Errorf("inspect image %s: %w", source, err)
		}
		target, err := PushTarget(registry, source, res.ID)
		if err != nil {
			return err
		}
		out = append(out, PushImage{Role: role, Source: source, ID: res.ID, Target: target, Agents: maps.Clone(agents)})
		return nil
	}
	if err := add(RoleSandbox, use.Ref, use.Agents); err != nil {
		return nil, nil, err
	}
	if use.Ref != r.opts.Image {
		base, _, err := r.inspectImage(ctx)
		if err != nil {
			return nil, nil, err
		}
		if err := add(RoleSandboxBase, r.opts.Image, base.Agents); err != nil {
			return nil, nil, err
		}
	}
	if agentImage != "" {
		_, err := r.api.ImageInspect(ctx, agentImage)
		switch {
		case cerrdefs.IsNotFound(err):
			notes = append(notes, fmt.Sprintf("conch's own image %s is not in this engine: not pushed "+
				"(`make release-image` builds it, images/conch; or name another with --agent-image)", agentImage))
		case err != nil:
			return nil, nil, fmt.Errorf("inspect image %s: %w", agentImage, err)
		default:
			if err := add(RoleAgent, agentImage, nil); err != nil {
				return nil, nil, err
			}
		}
	}
	return out, notes, nil
}

// Push tags img.Source as img.Target in the engine and pushes it, with
// progress lines; it returns img with Digest and Size from the engine's
// report.
func (r *Runtime) Push(ctx context.Context, img PushImage, auth RegistryAuth, progress func(string)) (PushImage, error) {
	if _, err := r.api.ImageTag(ctx, client.ImageTagOptions{Source: img.Source, Target: img.Target}); err != nil {
		return img, fmt.Errorf("tag %s as %s: %w", img.Source, img.Target, err)
	}
	target, err := reference.ParseNormalizedNamed(img.Target)
	if err != nil {
		return img, err
	}
	hdr, err := auth.header(reference.Domain(target))
	if err != nil {
		return img, err
	}
	res, err := r.api.ImagePush(ctx, img.Target, client.ImagePushOptions{RegistryAuth: hdr})
	if err != nil {
		return img, fmt.Errorf("push %s: %w", img.Target, err)
	}
	defer res.Close()
	last := ""
	for m, err := range res.JSONMessages(ctx) {
		if err != nil {
			return img, fmt.Errorf("push %s: %w", img.Target, err)
		}
		if m.Error != nil {
			return img, fmt.Errorf("push %s: %s", img.Target, strings.TrimSpace(m.Error.Message))
		}
		if m.Aux != nil {
			var aux struct {
				Tag, Digest string
				Size        int64
			}
			if json.Unmarshal(*m.Aux, &aux) == nil && aux.Digest != "" {
				img.Digest, img.Size = aux.Digest, aux.Size
			}
		}
		// A line per layer when it is done ("Pushed", "Layer already exists",
		// "Mounted from …") and the final "tag: digest"; no progress bars.
		if s := strings.TrimSpace(m.Status); s != "" && s != last && s != "Preparing" && s != "Waiting" && s != "Pushing" {
			last = s
			if m.ID != "" {
				s = m.ID + ": " + s
			}
			report(progress, s)
		}
	}
	if img.Digest == "" {
		return img, fmt.Errorf("push %s: the engine reported no digest (did the push finish?)", img.Target)
	}
	return img, nil
}
