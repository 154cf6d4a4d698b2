//go:build kubernetes

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/kube"
	"conch/sandbox/kubernetes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestChatKubernetesDoctorProbes: `conch doctor` on the test cluster starts
// probe pods (Pod Security restricted admits them): with the images the
// node has it says they ran, and that the network policy cannot be tested
// because the test node gives pods no network (never a made-up
// "enforced"); with a sandbox image no registry serves it names the
// container and ErrImagePull; interrupted while a pull hangs it deletes its
// probe pods on the way out. No probe pod is left after any run, and none
// is ever listed as a sandbox.
func TestChatKubernetesDoctorProbes(t *testing.T) {
	e := kube.Sandboxes(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "k8sd" + hex.EncodeToString(buf)
	env := append(testEnv(fakellm.New(t), fakellm.OpenAI, dir), kubeEnv(e, instance)...)
	probes := func() []string {
		l, err := e.Client.CoreV1().Pods(e.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: kubernetes.LabelProbe + "=true"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range l.Items {
			names = append(names, p.Name)
		}
		return names
	}
	noProbesLeft := func(after string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for len(probes()) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("probe pods left after %s: %v", after, probes())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	out, errOut, code := conchRun(t, env, "doctor --offline")
	if code != 0 || !strings.Contains(out, "✓ kubernetes images: a probe pod of sandbox.image "+kube.SandboxImage) ||
		!strings.Contains(out, "- kubernetes network policy: cannot test: pods get no network") {
		t.Fatalf("doctor (exit %d):\n%s\n%s", code, out, errOut)
	}
	noProbesLeft("doctor")
	if strings.Contains(out, "enforced") {
		t.Fatalf("doctor claims a verdict the test node cannot give:\n%s", out)
	}

	closed := freeAddr(t)
	missing := closed + "/conch-sandbox:missing"
	out, errOut, code = conchRun(t, append(env, "CONCH_SANDBOX_IMAGE="+missing), "doctor --offline")
	if code == 0 || !strings.Contains(out, "✗ kubernetes images: probe pod ") || !strings.Contains(out, "container sandbox (image "+missing+") waiting: ErrImagePull") ||
		!strings.Contains(out, "- kubernetes network policy: not probed") {
		t.Fatalf("doctor with a missing image (exit %d):\n%s\n%s", code, out, errOut)
	}
	noProbesLeft("a failed image check")

	// A registry that accepts and never answers: the pull hangs, doctor
	// waits, and ctrl-C ends it with its probe pods deleted.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(env, "CONCH_SANDBOX_IMAGE="+hang.Addr().String()+"/conch-sandbox:hangs"), "CONCH_TEST_ARGS=doctor --offline")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for len(probes()) < 2 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no probe pods while doctor waits:\n%s", stdout.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("doctor did not end on ctrl-C:\n%s", stdout.String())
	}
	if !strings.Contains(stdout.String(), "✗ kubernetes images") || !strings.Contains(stdout.String(), "canceled") {
		t.Fatalf("doctor after ctrl-C:\n%s", stdout.String())
	}
	noProbesLeft("ctrl-C")

	out, errOut, code = conchRun(t, env, "sandbox ls")
	if code != 0 || !strings.Contains(out, "(no sandboxes)") {
		t.Fatalf("sandbox ls after the probes (exit %d):\n%s\n%s", code, out, errOut)
	}
}
