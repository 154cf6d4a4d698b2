//go:build !kubernetes

package main

import (
	"strings"
	"testing"

	"conch/internal/testenv/fakellm"
)

// A conch built without the kubernetes tag refuses the backend, saying how
// to build one that has it, at start and in doctor.
func TestKubernetesBackendNotBuilt(t *testing.T) {
	srv := fakellm.New(t)
	env := append(testEnv(srv, fakellm.OpenAI, t.TempDir()), "CONCH_SANDBOX_ENGINE=auto", "CONCH_SANDBOX_BACKEND=kubernetes")
	_, stderr, code := conchRun(t, env, "sandbox ls")
	if code == 0 || !strings.Contains(stderr, "go build -tags goolm,kubernetes") {
		t.Fatalf("sandbox ls: exit %d, stderr:\n%s", code, stderr)
	}
	out, _, _ := conchRun(t, env, "doctor")
	if !strings.Contains(out, "✗ kubernetes: ") || !strings.Contains(out, "kubernetes tag") {
		t.Fatalf("doctor:\n%s", out)
	}
}
