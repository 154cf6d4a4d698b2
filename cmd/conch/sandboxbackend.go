package main

import (
	"context"
	"fmt"

	"conch"
	"conch/sandbox/docker"
)

// sandboxRuntime is what the wiring needs of a sandbox backend: the
// Docker/Podman runtime or the Kubernetes one (kubernetes.go, built with
// -tags kubernetes).
type sandboxRuntime interface {
	conch.Runtime
	conch.SandboxAdmin
	conch.Releaser
	// KeyOf resolves a `conch sandbox` reference to its conversation.
	KeyOf(ctx context.Context, ref string) (conch.ConversationKey, error)
}

var _ sandboxRuntime = (*docker.Runtime)(nil)

// engineRuntime is the Docker/Podman runtime for commands only it has.
func (d *deps) engineRuntime(what string) (*docker.Runtime, error) {
	rt, ok := d.runtime.(*docker.Runtime)
	if !ok {
		return nil, fmt.Errorf("%s works with sandbox.backend = \"engine\" only (Docker or Podman); "+
			"on Kubernetes, `conch sandbox image push REGISTRY` builds the images with this machine's engine "+
			"when missing and pushes them to the cluster's registry", what)
	}
	return rt, nil
}

// refRemover and pruner are what `conch sandbox rm` and `prune` need of a
// backend: Docker/Podman (containers and volumes) and Kubernetes (pods and
// claims) both have them.
type refRemover interface {
	RemoveRef(ctx context.Context, ref string, keepWorkspace bool) ([]string, error)
}

type pruner interface {
	Prune(ctx context.Context, dryRun bool) ([]string, error)
}

var (
	_ refRemover = (*docker.Runtime)(nil)
	_ pruner     = (*docker.Runtime)(nil)
)

// removeRef removes the sandbox ref names and, unless keep, its workspace.
func removeRef(ctx context.Context, d *deps, ref string, keep bool) ([]string, error) {
	if rr, ok := d.runtime.(refRemover); ok {
		return rr.RemoveRef(ctx, ref, keep)
	}
	if keep {
		return nil, fmt.Errorf("--keep-workspace: this sandbox backend cannot keep a workspace without its sandbox")
	}
	key, err := d.runtime.KeyOf(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := d.runtime.Remove(ctx, key); err != nil {
		return nil, err
	}
	return []string{"sandbox and workspace of " + key.String()}, nil
}
