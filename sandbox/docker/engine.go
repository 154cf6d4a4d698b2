// Package docker runs conch's sandboxes, one hardened container per
// conversation, over the Docker Engine API. The same code drives Docker and
// Podman (through its Docker-compatible socket); nothing shells out to a CLI.
package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"conch"

	"github.com/moby/moby/client"
)

// Engine names.
const (
	EngineDocker = "docker"
	EnginePodman = "podman"
)

// ErrNoEngine is in the chain of New's error when no engine address was
// configured and none of the usual sockets exists.
var ErrNoEngine = errors.New("no container engine socket found")

// Info describes the engine conch talks to, for `conch doctor`.
type Info struct {
	// Engine is docker or podman.
	Engine string
	// Host is the API address in use.
	Host string
	// Version is the engine's own version.
	Version string
	// APIVersion is the Engine API version negotiated with the engine.
	APIVersion string
	// ServerAPIVersion is the newest API version the engine offers.
	ServerAPIVersion string
	// OS and Arch of the engine's host.
	OS, Arch string
}

// Candidate sockets, in the order tried when neither the config nor
// DOCKER_HOST names one.
func candidateSockets(engine string, getenv func(string) string) []string {
	docker := []string{"/var/run/docker.sock", "/run/docker.sock"}
	podman := []string{"/run/podman/podman.sock"}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		podman = append(podman, filepath.Join(d, "podman", "podman.sock"))
	}
	if engine == EnginePodman {
		return append(podman, docker...)
	}
	return append(docker, podman...)
}

// DetectHost picks the engine API address: host if set, else DOCKER_HOST,
// else the first of the usual sockets that exists (Docker's first unless
// engine is podman). getenv is os.Getenv in production.
func DetectHost(host, engine string, getenv func(string) string) (string, error) {
	if host != "" {
		return host, nil
	}
	if h := getenv("DOCKER_HOST"); h != "" {
		return h, nil
	}
	if engine == EnginePodman {
		if h := getenv("CONTAINER_HOST"); strings.HasPrefix(h, "unix://") {
			return h, nil
		}
	}
	cands := candidateSockets(engine, getenv)
	for _, s := range cands {
		if fi, err := os.Stat(s); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return "unix://" + s, nil
		}
	}
	return "", &conch.Error{Kind: conch.KindUnavailable,
		User: "no container engine found",
		Err:  fmt.Errorf("detect engine: none of %s exists; set sandbox.host or DOCKER_HOST, or start dockerd or `podman system service`: %w", strings.Join(cands, ", "), ErrNoEngine)}
}

// dial connects to the engine at host and identifies it. engine is the
// configured name ("", auto, docker or podman); a mismatch with what answers
// is an error.
func dial(ctx context.Context, host, engine string) (*client.Client, Info, error) {
	api, err := client.New(client.WithHost(host))
	if err != nil {
		return nil, Info{}, fmt.Errorf("engine client for %s: %w", host, err)
	}
	info, err := identify(ctx, api, host)
	if err != nil {
		api.Close()
		return nil, Info{}, err
	}
	if engine != "" && engine != "auto" && engine != info.Engine {
		api.Close()
		return nil, Info{}, &conch.Error{Kind: conch.KindInvalid,
			User: fmt.Sprintf("sandbox.engine is %s but %s answers at %s", engine, info.Engine, host),
			Err:  errors.New("set sandbox.engine to auto or point sandbox.host at the right socket")}
	}
	return api, info, nil
}

func identify(ctx context.Context, api engineAPI, host string) (Info, error) {
	if _, err := api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return Info{}, &conch.Error{Kind: conch.KindUnavailable, User: "the container engine does not answer",
			Err: fmt.Errorf("ping engine at %s: %w", host, err)}
	}
	v, err := api.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return Info{}, &conch.Error{Kind: conch.KindUnavailable, User: "the container engine does not answer",
			Err: fmt.Errorf("engine version at %s: %w", host, err)}
	}
	info := Info{Engine: EngineDocker, Host: host, Version: v.Version, APIVersion: api.ClientVersion(),
		ServerAPIVersion: v.APIVersion, OS: v.Os, Arch: v.Arch}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			info.Engine = EnginePodman
			info.Version = c.Version
		}
	}
	if strings.Contains(strings.ToLower(v.Platform.Name), "podman") {
		info.Engine = EnginePodman
	}
	return info, nil
}

// Probe connects to the engine the way New would and returns its Info,
// without touching any container; for `conch doctor`.
func Probe(ctx context.Context, host, engine string) (Info, error) {
	h, err := DetectHost(host, engine, os.Getenv)
	if err != nil {
		return Info{}, err
	}
	api, info, err := dial(ctx, h, engine)
	if err != nil {
		return Info{}, err
	}
	api.Close()
	return info, nil
}
