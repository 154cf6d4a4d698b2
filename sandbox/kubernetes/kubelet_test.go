//go:build kubernetes

package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/kube"
	"conch/sandbox/kubernetes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeletNode runs the backend's pods under a REAL kubelet (containerd,
// runc, a CNI bridge; `make kube-kubelet`): conch's own pod spec admitted
// under Pod Security restricted, its init container, sandbox and skills
// containers started by the kubelet, the agent's exec stream through the
// API server and the kubelet's streaming server, and the hardening seen
// from inside (uid, read-only root and agent, no capabilities,
// no-new-privileges, seccomp filter, /tmp on tmpfs, the workspace claim
// writable, the skills read-only) plus the pod's pids limit from the
// kubelet's podPidsLimit and its QoS class.
func TestKubeletNode(t *testing.T) {
	e, node := kube.KubeletSandboxes(t)
	ctx := context.Background()
	skills := t.TempDir()
	if err := os.MkdirAll(filepath.Join(skills, "demo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skills, "demo", "SKILL.md"), []byte("---\nname: demo\n---\nhi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := env{e}.options(t, func(o *kubernetes.Options) {
		o.Image = engine.Image
		o.ImagePullPolicy = corev1.PullNever
		o.SkillsDir = skills
		o.StartTimeout = 3 * time.Minute
	})
	rt := env{e}.runtime(t, o)
	key := conch.ConversationKey{Channel: "telegram", ID: "kubelet"}
	sb, err := rt.Sandbox(ctx, key)
	if err != nil {
		t.Fatalf("Sandbox under the kubelet: %v", err)
	}
	got := run(t, sb, "id -u; id -g; touch /etc/x 2>/dev/null && echo rw || echo ro; touch /opt/conch/x 2>/dev/null && echo rw || echo ro; "+
		"touch /opt/conch/skills/x 2>/dev/null && echo rw || echo ro; cat /opt/conch/skills/demo/SKILL.md | tail -1; "+
		"echo kept > /workspace/a.txt && cat /workspace/a.txt; grep -c ' /tmp tmpfs ' /proc/mounts; "+
		"grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status")
	want := "1000\n1000\nro\nro\nro\nhi\nkept\n1\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2"
	if got != want {
		t.Fatalf("inside the pod:\n%s\nwant:\n%s", got, want)
	}
	pod, err := e.Client.CoreV1().Pods(ns).Get(ctx, kubernetes.PodName(o.InstanceID, key), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != node.Name || pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Fatalf("pod on %q (want %s), QoS %s", pod.Spec.NodeName, node.Name, pod.Status.QOSClass)
	}
	if got := node.PIDsMax(string(pod.UID)); got != "128" {
		t.Fatalf("pod pids.max %q, want the kubelet's podPidsLimit 128", got)
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.State.Running == nil || !strings.HasPrefix(st.ContainerID, "containerd://") {
			t.Fatalf("container %s: %+v", st.Name, st)
		}
	}

	// conch doctor's probes under the kubelet: the probe pods start, the
	// listener has a pod address on the bridge and is reached before the
	// deny-all policy selects it, and, the bridge plugin enforcing no
	// NetworkPolicy, still after: NOT enforced, as doctor must say here.
	probe, err := rt.StartProbe(ctx)
	if err != nil {
		t.Fatalf("probe pods under the kubelet: %v", err)
	}
	defer probe.Close()
	if probe.Node != node.Name {
		t.Fatalf("probe pod on %q", probe.Node)
	}
	res := probe.NetworkPolicy(ctx)
	if res.Verdict != kubernetes.NetNotEnforced {
		t.Fatalf("network probe on a bridge without a policy agent: %+v, want NOT enforced", res)
	}
	t.Logf("network policy: %s", res.Detail)
	probe.Close()
	if l, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelProbe}); err != nil || len(l.Items) != 0 && l.Items[0].DeletionTimestamp == nil {
		t.Fatalf("probe pods after Close: %v %v", err, l)
	}
}
