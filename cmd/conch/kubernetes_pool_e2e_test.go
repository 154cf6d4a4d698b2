//go:build kubernetes

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/kube"
	"conch/sandbox/kubernetes"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestChatKubernetesWarmPool runs `conch up` (built with -tags kubernetes)
// with sandbox.kubernetes.warm_pool = 1 against the real API server: at
// start the pool pod comes up; a web conversation's first command runs in
// that very pod (bound by relabelling: same uid, same container, not
// restarted), and the pool is refilled with another pod.
func TestChatKubernetesWarmPool(t *testing.T) {
	e := kube.Sandboxes(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "k8p" + hex.EncodeToString(buf)
	addr := freeAddr(t)
	env := append(testEnv(srv, fakellm.OpenAI, dir), kubeEnv(e, instance)...)
	env = append(env, "CONCH_SANDBOX_KUBERNETES_WARM_POOL=1", "CONCH_GATEWAY_LISTEN="+addr)
	base := "http://" + addr

	p := startConch(t, env, "up")
	p.waitStderr(t, "Web chat: open http://"+addr+"/login?token=")
	pooled := waitPoolPods(t, e, instance, nil)[0]
	// Running as the API server has it is not yet in conch's pool: its
	// agent stream is opened and pinged first.
	p.waitStderr(t, "warm pool pod ready")

	srv.Push(fakellm.ToolCall("bash", `{"command":"id -u"}`), fakellm.ToolCall("bash", `{"command":"ls /opt/conch/skills"}`),
		fakellm.Text("Ran it."))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wc := webLogin(t, env, base)
	id := wc.newConversation(t)
	conn := wc.socket(t, ctx, id)
	f, _ := json.Marshal(map[string]string{"type": "send", "id": "m1", "text": "run something"})
	if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
		t.Fatal(err)
	}
	_, answers, _ := readAnswers(t, ctx, conn, 1)
	var got []string
	for _, a := range answers {
		got = append(got, a...)
	}
	if len(got) != 1 || got[0] != "Ran it." {
		t.Fatalf("answers %q; stderr:\n%s", got, p.stderr)
	}
	reqs := srv.Requests()
	if rs := reqs[len(reqs)-2].ToolResults(); len(rs) == 0 || !strings.Contains(rs[len(rs)-1].Content, "1000") {
		t.Fatalf("id -u said %+v", rs)
	}
	// The pool pod was given the skills ahead: one copy, before the claim.
	if res := lastToolResult(t, srv); !strings.Contains(res, "report-long-task") {
		t.Fatalf("skills in the pool pod: %q", res)
	}
	copies, assigned, copiedFirst := 0, false, false
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if !strings.Contains(line, "pod="+pooled.Name) {
			continue
		}
		switch {
		case strings.Contains(line, "skills copied into sandbox pod"):
			copies++
			copiedFirst = copiedFirst || !assigned
		case strings.Contains(line, "sandbox assigned from warm pool"):
			assigned = true
		}
	}
	if copies != 1 || !copiedFirst {
		t.Fatalf("%d skills copies into %s logged (before the claim: %v), want 1, while in the pool; stderr:\n%s",
			copies, pooled.Name, copiedFirst, p.stderr)
	}

	pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, pooled.Name, metav1.GetOptions{})
	if err != nil || string(pod.UID) != pooled.UID || pod.Labels[kubernetes.LabelPool] != "" ||
		!strings.HasPrefix(pod.Annotations[kubernetes.AnnotationConversation], "web:") {
		t.Fatalf("the conversation was not given the pool's pod %s: %v %v %v", pooled.Name, err, pod.Labels, pod.Annotations)
	}
	if now := sandboxRun(pod); now != pooled.run {
		t.Fatalf("the pool pod was restarted when bound: %s, was %s", now, pooled.run)
	}
	// The pool is topped up with a new pod.
	if next := waitPoolPods(t, e, instance, map[string]bool{pooled.Name: true}); len(next) != 1 {
		t.Fatalf("pool after the claim: %+v", next)
	}
}

type poolPod struct {
	Name string
	UID  string
	run  string // the sandbox container's id, start and restarts: what a restart changes
}

func sandboxRun(p *corev1.Pod) string {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == kubernetes.SandboxContainer && st.State.Running != nil {
			return fmt.Sprintf("%s started %s restarts %d", st.ContainerID, st.State.Running.StartedAt.UTC(), st.RestartCount)
		}
	}
	return ""
}

// waitPoolPods waits for the instance's warm pool to hold a running pod
// not in except, and returns the running free pool pods.
func waitPoolPods(t *testing.T, e *kube.Env, instance string, except map[string]bool) []poolPod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		l, err := e.Client.CoreV1().Pods(e.Namespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: kubernetes.LabelInstance + "=" + kubernetes.InstanceLabel(instance) + "," + kubernetes.LabelPool + "=true"})
		if err != nil {
			t.Fatal(err)
		}
		var out []poolPod
		for i := range l.Items {
			if p := &l.Items[i]; p.DeletionTimestamp == nil && sandboxRun(p) != "" && !except[p.Name] {
				out = append(out, poolPod{Name: p.Name, UID: string(p.UID), run: sandboxRun(p)})
			}
		}
		if len(out) > 0 {
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no warm pool pod came up")
	return nil
}
