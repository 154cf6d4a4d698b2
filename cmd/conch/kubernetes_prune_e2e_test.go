//go:build kubernetes

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/kube"
	"conch/sandbox/kubernetes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestChatKubernetesPrune: `conch sandbox rm --keep-workspace` deletes the
// conversation's pod and keeps its claim, and the next message of `conch
// chat` gets a new pod on it with the workspace; `conch sandbox prune`
// lists (--dry-run, nothing touched) then removes the pod and claim of a
// conversation the store does not know and a failed pod of a known one
// (its claim stays), and a second prune finds nothing.
func TestChatKubernetesPrune(t *testing.T) {
	e := kube.Sandboxes(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "k8sr" + hex.EncodeToString(buf)
	env := append(testEnv(srv, fakellm.OpenAI, dir), kubeEnv(e, instance)...)
	ctx := context.Background()
	pods, claims := e.Client.CoreV1().Pods(e.Namespace), e.Client.CoreV1().PersistentVolumeClaims(e.Namespace)
	gone := func(what string, get func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := get()
			if apierrors.IsNotFound(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still there: %v", what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	srv.Push(fakellm.ToolCall("write_file", `{"path":"note.txt","content":"kept across pods"}`), fakellm.Text("Saved."))
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "save a note", 3*time.Minute); got != "Saved." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)
	key := conch.ConversationKey{Channel: "cli", ID: "local"}
	name := kubernetes.PodName(instance, key)
	first, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, code := conchRun(t, env, "sandbox rm --keep-workspace cli:local")
	if code != 0 || strings.TrimSpace(out) != "removed pod "+name+" (workspace claim "+name+" kept)" {
		t.Fatalf("rm --keep-workspace (exit %d):\n%s\n%s", code, out, errOut)
	}
	gone("the pod after rm --keep-workspace", func() error { _, err := pods.Get(ctx, name, metav1.GetOptions{}); return err })
	if _, err := claims.Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the claim after rm --keep-workspace: %v", err)
	}
	if _, errOut, code := conchRun(t, env, "sandbox rm --keep-workspace cli:local"); code == 0 || !strings.Contains(errOut, "no sandbox pod") {
		t.Fatalf("rm --keep-workspace of a conversation without a pod: exit %d: %s", code, errOut)
	}

	srv.Push(fakellm.ToolCall("bash", `{"command":"cat /workspace/note.txt"}`), fakellm.Text("Read."))
	p = startConch(t, env, "chat")
	if got := p.sayWithin(t, "read the note", 3*time.Minute); got != "Read." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)
	if res := lastToolResult(t, srv); !strings.Contains(res, "kept across pods") {
		t.Fatalf("the workspace in the new pod: %q", res)
	}
	second, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil || second.UID == first.UID {
		t.Fatalf("pod after rm --keep-workspace: %v (uid %s, was %s)", err, second.UID, first.UID)
	}

	// An orphan: a conversation's pod and claim, made by the backend
	// itself, of a conversation the store never had.
	orphanKey := conch.ConversationKey{Channel: "telegram", ID: "gone"}
	rt, err := kubernetes.New(ctx, kubernetes.Options{InstanceID: instance, REST: e.User, Namespace: e.Namespace,
		Image: kube.SandboxImage, AgentImage: e.AgentImage, Disk: 64 << 20, StartTimeout: 2 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Sandbox(ctx, orphanKey); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	orphan := kubernetes.PodName(instance, orphanKey)
	// A known conversation's pod that failed (as a node reports it).
	second.Status.Phase, second.Status.Reason, second.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	if _, err := pods.UpdateStatus(ctx, second, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	out, errOut, code = conchRun(t, env, "sandbox prune --dry-run")
	wantOrphan := "pod " + orphan + " and claim " + orphan + " (orphan: the store no longer knows conversation telegram:gone)"
	wantFailed := "would remove pod " + name + " (pod Failed: "
	if code != 0 || !strings.Contains(out, "would remove "+wantOrphan) || !strings.Contains(out, wantFailed) ||
		!strings.Contains(out, "workspace claim kept)") || strings.Count(out, "\n") != 2 {
		t.Fatalf("prune --dry-run (exit %d):\n%s\n%s", code, out, errOut)
	}
	for _, n := range []string{orphan, name} {
		if p, err := pods.Get(ctx, n, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
			t.Fatalf("dry run touched pod %s: %v", n, err)
		}
	}
	out, errOut, code = conchRun(t, env, "sandbox prune")
	if code != 0 || !strings.Contains(out, "removed "+wantOrphan) || !strings.Contains(out, "removed pod "+name+" (pod Failed: ") {
		t.Fatalf("prune (exit %d):\n%s\n%s", code, out, errOut)
	}
	gone("the orphan's pod", func() error { _, err := pods.Get(ctx, orphan, metav1.GetOptions{}); return err })
	gone("the orphan's claim", func() error { _, err := claims.Get(ctx, orphan, metav1.GetOptions{}); return err })
	gone("the failed pod", func() error { _, err := pods.Get(ctx, name, metav1.GetOptions{}); return err })
	if c, err := claims.Get(ctx, name, metav1.GetOptions{}); err != nil || c.DeletionTimestamp != nil {
		t.Fatalf("the known conversation's claim after prune: %v", err)
	}
	if out, errOut, code = conchRun(t, env, "sandbox prune"); code != 0 || strings.TrimSpace(out) != "nothing to prune" {
		t.Fatalf("second prune (exit %d):\n%s\n%s", code, out, errOut)
	}
}
