//go:build kubernetes

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/kube"
	"conch/sandbox/docker"
	"conch/sandbox/kubernetes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// claudeImage is the sandbox image with the real Claude Code CLI, built
// from the pinned npm tarballs in the test engine as conch builds it for
// Docker (once per engine and pin set; on Kubernetes the image comes from
// the cluster's registry, here the test node runs it from the engine).
func claudeImage(t *testing.T, eng *engine.Engine) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, docker.Options{
		Host: eng.Host, Engine: eng.Name, InstanceID: "k8simg-" + hex.EncodeToString(b), Image: eng.Image,
		DataDir: t.TempDir(), CacheDir: eng.CacheDir, SandboxdBinary: engine.SandboxdBinary(t),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Agents: []string{"claude"},
	})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	defer rt.Close()
	ref, err := rt.AgentImage(ctx, []string{"claude"}, func(s string) { t.Logf("image: %s", s) })
	if err != nil {
		t.Fatalf("the Claude Code image: %v", err)
	}
	return ref
}

// TestChatKubernetesCode: `conch chat` on the Kubernetes backend hands a
// task to the real Claude Code CLI in the conversation's pod through the
// code tool. The CLI reaches its (faked) vendor API only through conch's
// bridge over the pod's exec stream (the pod has no network): the API gets
// the user's real key, added on the host, and the key is in no process or
// file of the pod.
func TestChatKubernetesCode(t *testing.T) {
	e := kube.Sandboxes(t)
	image := claudeImage(t, e.Engine)

	orch := fakellm.New(t)
	vendor := fakellm.New(t)
	const key = "sk-ant-real-key-of-the-user-k8s-0123456789"
	const wrote = "I created hello.txt with the text hi."
	vendor.Handle(func(r fakellm.Request) fakellm.Reply {
		last := r.Messages[len(r.Messages)-1]
		if len(last.ToolResults) > 0 {
			return fakellm.Text(wrote)
		}
		return fakellm.ToolCall("Bash", `{"command":"printf hi > /workspace/hello.txt","description":"Write hello.txt"}`)
	})
	dir := t.TempDir()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "k8sc" + hex.EncodeToString(buf)
	env := append(testEnv(orch, fakellm.OpenAI, dir), kubeEnv(e, instance)...)
	env = append(env,
		"CONCH_SANDBOX_IMAGE="+image, // the last value of a variable wins
		"CONCH_SANDBOX_DISK=256m",
		"CONCH_CODER_AGENT=claude",
		"ANTHROPIC_API_KEY="+key,
		"CONCH_CODER_BASE_URL="+vendor.URL(),
	)

	orch.Push(
		fakellm.ToolCall("code", `{"task":"Create the file hello.txt in the workspace with the text hi."}`),
		fakellm.ToolCall("bash", `{"command":"sh -c 'cat /workspace/hello.txt; grep -slzF `+key+` /proc/[0-9]*/environ; grep -srlF `+key+` /workspace /tmp; echo; echo checked'"}`),
		fakellm.Text("Claude Code did it."),
	)
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "please have the coding agent create hello.txt", 4*time.Minute); got != "Claude Code did it." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)

	var code, check string
	for _, r := range orch.Requests() {
		for _, res := range r.ToolResults() {
			switch {
			case strings.Contains(res.Content, "checked"):
				check = res.Content
			case strings.Contains(res.Content, "coding agent"):
				code = res.Content
			}
		}
	}
	if !strings.Contains(code, "finished its turn") || !strings.Contains(code, "Its answer:\n"+wrote) || !strings.Contains(code, "hello.txt (created)") {
		t.Errorf("code tool result: got %q, want the CLI's finished turn with its answer and the file it wrote", code)
	}
	if !strings.Contains(check, "hi\nchecked") || strings.Contains(check, "/proc/") || strings.Contains(check, "/workspace/") {
		t.Errorf("in the pod: got %q, want hello.txt written (hi) and the key in no process or file", check)
	}
	if len(vendor.Requests()) < 2 {
		t.Fatalf("the vendor API got %d requests, want the task and the tool result", len(vendor.Requests()))
	}
	for _, r := range vendor.Requests() {
		if r.APIKey != key {
			t.Fatalf("the vendor API got key %q, want the user's key added on the host", r.APIKey)
		}
	}
	// It ran in the conversation's pod, on the image with the CLI.
	pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(context.Background(),
		kubernetes.PodName(instance, conch.ConversationKey{Channel: "cli", ID: "local"}), metav1.GetOptions{})
	if err != nil || pod.Spec.Containers[0].Image != image {
		t.Fatalf("the conversation's pod: %v %v", err, pod)
	}
}
