//go:build kubernetes

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
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

// TestChatKubernetesSkills: `conch chat` on the Kubernetes backend gives the
// pod the skills, read-only at /opt/conch/skills as on Docker: the skill
// tool names that location, a user skill's script and a bundled one run
// there as the sandbox user, a write there fails, and a skill changed on
// disk reaches the live pod (same pod) on the next turn.
func TestChatKubernetesSkills(t *testing.T) {
	e := kube.Sandboxes(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "k8sk" + hex.EncodeToString(buf)
	env := append(skillEnv(t, srv, dir), kubeEnv(e, instance)...)

	srv.Push(
		fakellm.ToolCall("skill", `{"name":"weather-report"}`),
		fakellm.ToolCall("bash", `{"command":"sh /opt/conch/skills/weather-report/scripts/hello.sh"}`),
		fakellm.ToolCall("bash", `{"command":"bash /opt/conch/skills/report-long-task/scripts/progress.sh run job step1 -- echo step-output"}`),
		fakellm.ToolCall("bash", `{"command":"touch /opt/conch/skills/weather-report/x"}`),
		fakellm.ToolCall("bash", `{"command":"rm -rf /opt/conch/skills/weather-report"}`),
		fakellm.ToolCall("bash", `{"command":"ls /opt/conch/skills/weather-report"}`),
		fakellm.Text("Ran it."),
	)
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "weather please", 3*time.Minute); got != "Ran it." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	reqs := srv.Requests()
	result := func(i int) string {
		t.Helper()
		rs := reqs[i].ToolResults()
		if len(rs) == 0 {
			t.Fatalf("request %d has no tool result", i)
		}
		return rs[len(rs)-1].Content
	}
	if r := result(1); !strings.Contains(r, "Files: /opt/conch/skills/weather-report") {
		t.Errorf("skill tool: %s", r)
	}
	if r := result(2); !strings.Contains(r, "hello from weather-report as 1000") {
		t.Errorf("user skill script in the pod: %s", r)
	}
	if r := result(3); !strings.Contains(r, "step-output") {
		t.Errorf("bundled report-long-task script in the pod: %s", r)
	}
	if r := result(4); !strings.Contains(strings.ToLower(r), "read-only") {
		t.Errorf("writing into /opt/conch/skills: %s, want a read-only failure", r)
	}
	if r := result(5); !strings.Contains(strings.ToLower(r), "read-only") {
		t.Errorf("removing a skill: %s, want a read-only failure", r)
	}
	if r := result(6); !strings.Contains(r, "SKILL.md") || !strings.Contains(r, "scripts") {
		t.Errorf("the skill after the attempts: %s", r)
	}
	key := conch.ConversationKey{Channel: "cli", ID: "local"}
	name := kubernetes.PodName(instance, key)
	pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the conversation's pod: %v", err)
	}

	// The skill changes on disk: the next turn's command sees it in the same pod.
	script := filepath.Join(dir, "config", "conch", "skills", "weather-report", "scripts", "hello.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"second version as $(id -u)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv.Push(
		fakellm.ToolCall("bash", `{"command":"sh /opt/conch/skills/weather-report/scripts/hello.sh"}`),
		fakellm.Text("Again."),
	)
	if got := p.sayWithin(t, "again", 2*time.Minute); got != "Again." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)
	if r := lastToolResult(t, srv); !strings.Contains(r, "second version as 1000") {
		t.Errorf("changed skill in the live pod: %s", r)
	}
	after, err := e.Client.CoreV1().Pods(e.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || after.UID != pod.UID {
		t.Fatalf("pod after the change: %v (uid %s, was %s): the copy must not replace the pod", err, after.UID, pod.UID)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "data", "logs", "*.log"))
	var log strings.Builder
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		log.Write(b)
	}
	if n := strings.Count(log.String(), "skills copied into sandbox pod"); n != 2 {
		t.Errorf("%d copies logged, want 2 (the first use, the change)", n)
	}
}
