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
			"on Kubernetes, build the sandbox image with your image pipeline and list pods with `conch sandbox ls`", what)
	}
	return rt, nil
}

// removeRef removes the sandbox ref names: on Docker/Podman through the
// engine (container and, unless keep, workspace); elsewhere the
// conversation's sandbox with its workspace.
func removeRef(ctx context.Context, d *deps, ref string, keep bool) ([]string, error) {
	if rt, ok := d.runtime.(*docker.Runtime); ok {
		return rt.RemoveRef(ctx, ref, keep)
	}
	if keep {
		return nil, fmt.Errorf("--keep-workspace works with sandbox.backend = \"engine\" only; " +
			"on Kubernetes delete the pod (kubectl delete pod NAME): its claim stays and the next message recreates it")
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
