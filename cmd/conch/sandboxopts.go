package main

import (
	"fmt"
	"os"

	"conch/config"
	"conch/sandbox/docker"
)

// The sandbox runtime takes options, not the configuration: they are made
// here.

// hardeningFromProfile applies a config profile's overrides to docker.DefaultHardening.
func hardeningFromProfile(p config.SandboxProfile) (docker.Hardening, error) {
	h := docker.DefaultHardening()
	if p.ReadOnlyRoot != nil {
		h.ReadOnlyRoot = *p.ReadOnlyRoot
	}
	if p.NoNewPrivileges != nil {
		h.NoNewPrivileges = *p.NoNewPrivileges
	}
	if p.Init != nil {
		h.Init = *p.Init
	}
	if p.CapDrop != nil {
		h.CapDrop = p.CapDrop
	}
	if p.CapAdd != nil {
		h.CapAdd = p.CapAdd
	}
	if p.Pids != nil {
		h.Pids = *p.Pids
	}
	if p.CPUs != nil {
		h.NanoCPUs = int64(*p.CPUs * 1e9)
	}
	if p.Memory != "" {
		n, err := config.ParseSize(p.Memory)
		if err != nil {
			return docker.Hardening{}, fmt.Errorf("profile memory: %w", err)
		}
		h.Memory = n
	}
	if p.TmpSize != "" {
		n, err := config.ParseSize(p.TmpSize)
		if err != nil {
			return docker.Hardening{}, fmt.Errorf("profile tmp_size: %w", err)
		}
		h.TmpSize = n
	}
	if p.User != "" {
		h.User = p.User
	}
	if p.Network != "" {
		h.Network = p.Network
	}
	if p.Ulimits != nil {
		h.Ulimits = p.Ulimits
	}
	return h, h.Validate()
}

// sandboxOptions builds the runtime's options from the configuration;
// the callers add Known, Audit, Logger and BuildProgress. With coder.agent
// set, Agents holds it (the image gets that CLI); sandbox.npm_registry
// (CONCH_NPM_REGISTRY) is the npm registry the CLIs are downloaded from. An unset
// sandbox.agent_binary means the running executable when it is static, and
// no agent (one engine exec per operation) otherwise.
func sandboxOptions(c *config.Config, instanceID string) (docker.Options, error) {
	s := c.Sandbox
	prof, err := c.SandboxProfile()
	if err != nil {
		return docker.Options{}, err
	}
	h, err := hardeningFromProfile(prof)
	if err != nil {
		return docker.Options{}, fmt.Errorf("sandbox.profiles.%s: %w", s.ProfileName(), err)
	}
	disk, err := s.DiskBytes()
	if err != nil {
		return docker.Options{}, err
	}
	sandboxdBin, _ := s.Sandboxd()
	o := docker.Options{
		Disk: disk, DiskAuto: s.DiskAuto(),
		Host: s.Host, Engine: s.Engine, InstanceID: instanceID, Image: s.Image,
		SandboxdBinary: sandboxdBin, DataDir: c.DataDir, CacheDir: s.CacheDir, Mirror: s.Mirror,
		Profile: &h, IdleStop: s.IdleStopD(), Retention: s.RetentionD(), WarmPool: s.WarmPool,
		NPMRegistry: s.NPMRegistry, Transport: s.Transport,
	}
	// The configured coding agent's CLI is put in the sandbox image.
	if c.Coder.Agent != "" {
		o.Agents = []string{c.Coder.Agent}
	}
	if o.SandboxdBinary == "" {
		if exe, err := os.Executable(); err == nil && docker.CheckStatic(exe) == nil {
			o.SandboxdBinary = exe
		}
	}
	return o, nil
}
