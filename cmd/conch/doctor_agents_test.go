package main

import (
	"strings"
	"testing"

	"conch/sandbox/docker"
)

// A configured coding agent whose CLI the image lacks fails doctor with the
// fix; one that is there passes and is named with its version.
func TestDoctorAgents(t *testing.T) {
	missing := docker.AgentsReport{Image: "conch-sandbox-claude:abc", Want: map[string]string{"claude": "2.1.330"}}
	err := agentsProblem(missing)
	if err == nil || !strings.Contains(err.Error(), "conch sandbox image build --agents claude") || !strings.Contains(err.Error(), "not built yet") {
		t.Errorf("missing CLI: got %v, want a failure naming the build command", err)
	}
	old := docker.AgentsReport{Image: "mine:1", Built: true, Agents: map[string]string{"claude": "2.0.0"}, Want: map[string]string{"claude": "2.1.330"}}
	if err := agentsProblem(old); err == nil || !strings.Contains(err.Error(), "does not have it") {
		t.Errorf("other version: got %v", err)
	}
	ok := docker.AgentsReport{Image: "conch-sandbox-claude:abc", Built: true, Agents: map[string]string{"claude": "2.1.330"}, Want: map[string]string{"claude": "2.1.330"}}
	if err := agentsProblem(ok); err != nil {
		t.Errorf("present: %v", err)
	}
	if got := describeAgents(ok); got != "claude 2.1.330 in conch-sandbox-claude:abc" {
		t.Errorf("describe: %q", got)
	}
	if got := describeAgents(docker.AgentsReport{Image: "conch-sandbox:latest"}); !strings.Contains(got, "none") {
		t.Errorf("describe none: %q", got)
	}
}
