package main

import (
	"os"
	"reflect"
	"slices"
	"testing"

	"conch/config"
	"conch/sandbox/docker"
)

func TestHardeningFromProfile(t *testing.T) {
	pids, cpus, ro := int64(512), 2.5, false
	h, err := hardeningFromProfile(config.SandboxProfile{Pids: &pids, CPUs: &cpus, ReadOnlyRoot: &ro, Memory: "1g", Network: "egress"})
	if err != nil {
		t.Fatal(err)
	}
	want := docker.DefaultHardening()
	want.Pids, want.NanoCPUs, want.ReadOnlyRoot, want.Memory, want.Network = 512, 2.5e9, false, 1<<30, "egress"
	if !reflect.DeepEqual(h, want) {
		t.Errorf("got %+v, want %+v", h, want)
	}
	if _, err := hardeningFromProfile(config.SandboxProfile{Network: "host"}); err == nil {
		t.Errorf("host network: got no error")
	}
}

func TestOptionsAgents(t *testing.T) {
	cfg, err := config.Load("", append(os.Environ(), "CONCH_CODER_AGENT=codex", "CONCH_DATA_DIR="+t.TempDir(), "CONCH_NPM_REGISTRY=http://npm.local"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := sandboxOptions(cfg, "i")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Agents, []string{"codex"}) || o.NPMRegistry != "http://npm.local" {
		t.Errorf("agents %v registry %q: want [codex] from coder.agent and the env registry", o.Agents, o.NPMRegistry)
	}
}
