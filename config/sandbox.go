package config

// SandboxConfig configures the container runtime. Owned by the sandbox package's authors.
type SandboxConfig struct {
	// Engine is auto | docker | podman | none.
	Engine string `toml:"engine" env:"ENGINE"`
	// Host is the engine's API address (unix:///run/docker.sock); "" means auto-detect.
	Host  string `toml:"host" env:"HOST"`
	Image string `toml:"image" env:"IMAGE"`
}

func (s SandboxConfig) validate() []Problem {
	switch s.Engine {
	case "auto", "docker", "podman", "none":
		return nil
	}
	return []Problem{{Key: "sandbox.engine", Msg: "unknown engine " + s.Engine, Fix: "use auto, docker, podman or none"}}
}
