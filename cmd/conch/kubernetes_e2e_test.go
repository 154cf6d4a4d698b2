//go:build kubernetes

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/kube"
	"conch/sandbox/kubernetes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeEnv points conch at the test cluster as the RBAC user "conch".
func kubeEnv(e *kube.Env, instance string) []string {
	return []string{
		"CONCH_SANDBOX_ENGINE=auto",
		"CONCH_SANDBOX_BACKEND=kubernetes",
		"CONCH_SANDBOX_IMAGE=" + kube.SandboxImage,
		"CONCH_SANDBOX_DISK=64m",
		"CONCH_SANDBOX_KUBERNETES_KUBECONFIG=" + e.Kubeconfig,
		"CONCH_SANDBOX_KUBERNETES_NAMESPACE=" + e.Namespace,
		"CONCH_SANDBOX_KUBERNETES_AGENT_IMAGE=" + e.AgentImage,
		"CONCH_INSTANCE_ID=" + instance,
	}
}

// TestChatKubernetes runs `conch chat` (built with -tags kubernetes) with
// sandbox.backend = "kubernetes" against the real API server: a file and a
// terminal made in the conversation's pod are there after kill -9 and a
// restart, in the same pod over a new exec stream; `conch sandbox ls`,
// `inspect` and `doctor` read the cluster.
func TestChatKubernetes(t *testing.T) {
	e := kube.Sandboxes(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "k8s" + hex.EncodeToString(buf)
	env := append(testEnv(srv, fakellm.OpenAI, dir), kubeEnv(e, instance)...)

	srv.Push(
		fakellm.ToolCall("write_file", `{"path":"note.txt","content":"written before the kill"}`),
		fakellm.ToolCall("terminal_open", `{}`),
		fakellm.ToolCall("terminal_type", `{"tty":0,"expect":"bash","text":"export MARK=kept; cd /tmp; false"}`),
		fakellm.ToolCall("terminal_wait", `{"timeout_seconds":20}`),
		fakellm.Text("Saved."),
	)
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "save a note and open a terminal", 3*time.Minute); got != "Saved." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	if res := lastToolResult(t, srv); !strings.Contains(res, "exit 1") {
		t.Fatalf("terminal_wait said %q, want exit 1", res)
	}
	key := conch.ConversationKey{Channel: "cli", ID: "local"}
	name := kubernetes.PodName(instance, key)
	pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the conversation's pod: %v", err)
	}
	waitNoUnfinished(t, filepath.Join(dir, "data", "conch.db"))
	p.kill9(t)

	srv.Push(
		fakellm.ToolCall("bash", `{"command":"cat /workspace/note.txt"}`),
		fakellm.ToolCall("terminal_type", `{"tty":0,"expect":"bash","text":"echo $MARK in $PWD"}`),
		fakellm.ToolCall("terminal_wait", `{"timeout_seconds":20}`),
		fakellm.Text("Read it."),
	)
	p = startConch(t, env, "chat")
	if got := p.sayWithin(t, "read the note", 2*time.Minute); got != "Read it." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)
	if res := lastToolResult(t, srv); !strings.Contains(res, "kept in /tmp") {
		t.Fatalf("terminal after restart: %q", res)
	}
	last, _ := srv.Last()
	if rs := last.ToolResults(); len(rs) < 3 || !strings.Contains(rs[len(rs)-3].Content, "written before the kill") {
		t.Fatalf("bash after restart: %+v", rs)
	}
	after, err := e.Client.CoreV1().Pods(e.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || after.UID != pod.UID {
		t.Fatalf("pod after restart: %v (uid %s, was %s)", err, after.UID, pod.UID)
	}

	out, errOut, code := conchRun(t, env, "sandbox ls")
	if code != 0 || !strings.Contains(out, name) || !strings.Contains(out, "cli:local") {
		t.Fatalf("sandbox ls (exit %d):\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = conchRun(t, env, "sandbox inspect cli:local")
	if code != 0 || !strings.Contains(out, "RuntimeDefault") {
		t.Fatalf("sandbox inspect (exit %d):\n%s\n%s", code, out, errOut)
	}
	out, _, _ = conchRun(t, env, "doctor")
	if !strings.Contains(out, "✓ kubernetes permissions") {
		t.Fatalf("doctor:\n%s", out)
	}
}
