//go:build kubernetes

package kubernetes_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/kube"
	"conch/sandbox/kubernetes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const ns = "conch"

type env struct{ *kube.Env }

func newEnv(t testing.TB) env { return env{kube.Sandboxes(t)} }

func (e env) options(t testing.TB, mod func(*kubernetes.Options)) kubernetes.Options {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	o := kubernetes.Options{
		InstanceID: "test-" + hex.EncodeToString(b), REST: e.User, Namespace: ns,
		AgentImage: e.AgentImage, Disk: 64 << 20, StartTimeout: 2 * time.Minute,
	}
	if mod != nil {
		mod(&o)
	}
	return o
}

func (e env) runtime(t *testing.T, o kubernetes.Options) *kubernetes.Runtime {
	t.Helper()
	rt, err := kubernetes.New(context.Background(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func run(t *testing.T, sb conch.Sandbox, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"bash", "-c", script}})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d: %s", script, res.ExitCode, res.Output)
	}
	return strings.TrimSpace(string(res.Output))
}

// TestKubernetes runs the backend against the real API server: create,
// watch, the one exec stream, files, the workspace claim surviving the
// pod, hardening as the server holds it, stats, reconcile by labels,
// remove, and RBAC both ways. One cluster for all (starting one costs
// seconds).
func TestKubernetes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rt := e.runtime(t, e.options(t, nil))
	key := conch.ConversationKey{Channel: "telegram", ID: "42"}

	t.Run("sandbox over one exec stream", func(t *testing.T) {
		before := e.Node.Execs()
		sb, err := rt.Sandbox(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, sb, "id -u; id -G; pwd; echo $HOME"); got != "1000\n1000\n/workspace\n/workspace" {
			t.Fatalf("identity = %q", got)
		}
		if err := sb.WriteFile(ctx, "/workspace/notes/a.txt", []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := sb.ReadFile(ctx, "/workspace/notes/a.txt", 0)
		if err != nil || string(b) != "kept" {
			t.Fatalf("ReadFile = %q, %v", b, err)
		}
		if wr, ok := sb.(conch.WorkspaceReader); !ok {
			t.Fatal("no WorkspaceReader: send_file would refuse")
		} else if b, err := wr.ReadWorkspaceFile(ctx, "notes/a.txt", 1<<20); err != nil || string(b) != "kept" {
			t.Fatalf("ReadWorkspaceFile = %q, %v", b, err)
		}
		fs, err := sb.ListFiles(ctx, "/workspace/notes")
		if err != nil || len(fs) != 1 || fs[0].Name != "a.txt" {
			t.Fatalf("ListFiles = %+v, %v", fs, err)
		}
		var streamed bytes.Buffer
		res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "read x; echo got $x; exit 3"},
			Stdin: strings.NewReader("line\n"), OnOutput: func(b []byte) { streamed.Write(b) }})
		if err != nil || res.ExitCode != 3 || strings.TrimSpace(string(res.Output)) != "got line" || streamed.String() != "got line\n" {
			t.Fatalf("exec with stdin: %+v %q %v", res, streamed.String(), err)
		}
		for range 5 {
			sb2, err := rt.Sandbox(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			run(t, sb2, "true")
		}
		if n := e.Node.Execs() - before; n != 1 {
			t.Fatalf("%d exec streams for one conversation, want 1 long-lived one", n)
		}
	})

	t.Run("hardened pod as the API server holds it", func(t *testing.T) {
		name := kubernetes.PodName(rt.Options().InstanceID, key)
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := p.Spec.Containers[0]
		sc := c.SecurityContext
		switch {
		case !*sc.ReadOnlyRootFilesystem, *sc.AllowPrivilegeEscalation, !*sc.RunAsNonRoot, *sc.RunAsUser != 1000,
			len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL",
			sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			t.Fatalf("security context %+v", sc)
		case *p.Spec.AutomountServiceAccountToken, *p.Spec.EnableServiceLinks:
			t.Fatal("service account token or service links on")
		case p.Status.QOSClass != corev1.PodQOSGuaranteed:
			t.Fatalf("QoS %s, want Guaranteed", p.Status.QOSClass)
		}
		if p.Labels[kubernetes.LabelConversation] != kubernetes.ConversationLabel(key) || p.Annotations[kubernetes.AnnotationConversation] != key.String() {
			t.Fatalf("labels %v annotations %v", p.Labels, p.Annotations)
		}
		d, err := rt.Inspect(ctx, key.String())
		if err != nil {
			t.Fatal(err)
		}
		if len(d.HardeningProblems) > 0 || !d.Running || d.Key != key || d.Workspace != "pvc/"+name {
			t.Fatalf("inspect: %+v", d)
		}
		sb, _ := rt.Sandbox(ctx, key)
		// Read-only root, tmpfs /tmp, the agent read-only, no capabilities, no network.
		if got := run(t, sb, "touch /etc/x 2>/dev/null && echo rw || echo ro; touch /opt/conch/x 2>/dev/null && echo rw || echo ro; "+
			"grep -c ' /tmp tmpfs ' /proc/mounts; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status; ls /sys/class/net"); got !=
			"ro\nro\n1\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nlo" {
			t.Fatalf("confinement = %q", got)
		}
		np, err := e.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(np.Items) != 1 || len(np.Items[0].Spec.PolicyTypes) != 2 ||
			len(np.Items[0].Spec.Ingress)+len(np.Items[0].Spec.Egress) != 0 {
			t.Fatalf("network policy: %+v %v", np, err)
		}
		st, err := rt.SandboxStats(ctx, key)
		// The test API server aggregates no metrics API: use is unknown (-1), not 0.
		// The test node's claims are file systems of their own, of the claim's size
		// (as a CSI provisioner's): the workspace's use is what the agent sees.
		if err != nil || st.DiskLimit != 64<<20 || st.MemoryLimit != 512<<20 || st.DiskBytes < 0 || st.DiskBytes > 1<<20 ||
			st.CPUPercent != -1 || st.MemoryBytes != -1 {
			t.Fatalf("stats %+v %v", st, err)
		}
		sb, err = rt.Sandbox(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.WriteFile(ctx, "/workspace/big.bin", bytes.Repeat([]byte{1}, 4<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		if st2, err := rt.SandboxStats(ctx, key); err != nil || st2.DiskBytes < st.DiskBytes+4<<20 {
			t.Fatalf("after 4 MiB written: disk %d (before %d), %v", st2.DiskBytes, st.DiskBytes, err)
		}
		run(t, sb, "rm /workspace/big.bin")
	})

	t.Run("workspace claim outlives the pod", func(t *testing.T) {
		name := kubernetes.PodName(rt.Options().InstanceID, key)
		p, _ := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		// Evicted, drained or deleted by an operator: the next use makes a new pod on the same claim.
		if err := e.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, e, name, string(p.UID))
		sb, err := rt.Sandbox(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, sb, "cat /workspace/notes/a.txt"); got != "kept" {
			t.Fatalf("after a new pod: %q", got)
		}
		np, _ := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if np.UID == p.UID {
			t.Fatal("same pod")
		}
	})

	t.Run("reconcile by labels and remove", func(t *testing.T) {
		other := conch.ConversationKey{Channel: "email", ID: "thread-with-a-very-long-id-" + strings.Repeat("x", 80)}
		if _, err := rt.Sandbox(ctx, other); err != nil {
			t.Fatal(err)
		}
		// A restart in which the store knows only key: other's pod and claim go.
		rt2 := e.runtime(t, e.options(t, func(o *kubernetes.Options) {
			o.InstanceID = rt.Options().InstanceID
			o.Known = func(context.Context) ([]conch.ConversationKey, error) { return []conch.ConversationKey{key}, nil }
		}))
		if err := rt2.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		otherName := kubernetes.PodName(rt.Options().InstanceID, other)
		waitNoClaim(t, e, otherName)
		list, err := rt2.Sandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.Key == other && s.State != "removing" {
				t.Fatalf("orphan still listed: %+v", s)
			}
		}
		sb, err := rt2.Sandbox(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, sb, "cat /workspace/notes/a.txt"); got != "kept" {
			t.Fatalf("reattached after restart: %q", got)
		}
		if err := rt2.Remove(ctx, key); err != nil {
			t.Fatal(err)
		}
		waitNoClaim(t, e, kubernetes.PodName(rt.Options().InstanceID, key))
		_, err = rt2.SandboxInfo(ctx, key)
		var nse *conch.NoSandboxError
		if !errors.As(err, &nse) {
			t.Fatalf("after Remove: %v", err)
		}
	})

	t.Run("idle pod deleted, claim kept", func(t *testing.T) {
		idleRT := e.runtime(t, e.options(t, func(o *kubernetes.Options) {
			o.IdleStop, o.SweepEvery = 1500*time.Millisecond, 100*time.Millisecond
		}))
		k := conch.ConversationKey{Channel: "web", ID: "idle"}
		sb, err := idleRT.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		name := kubernetes.PodName(idleRT.Options().InstanceID, k)
		first, _ := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		// A call longer than IdleStop is in use all along: not idle.
		run(t, sb, "echo busy > /workspace/mark; sleep 2.5")
		if p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || p.UID != first.UID || p.DeletionTimestamp != nil {
			t.Fatalf("pod deleted while a call ran: %v", err)
		}
		waitGone(t, e, name, string(first.UID))
		if _, err := e.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("claim after the idle pod went: %v", err)
		}
		if got := run(t, sb, "cat /workspace/mark"); got != "busy" {
			t.Fatalf("workspace on the new pod: %q", got)
		}
		if err := idleRT.Remove(ctx, k); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("warm pool", func(t *testing.T) { testWarmPool(t, e) })

	t.Run("deploy manifests", func(t *testing.T) {
		// deploy/kubernetes as the API server takes it (validation and
		// admission, dry run): the namespace's own labels are already in
		// force (Pod Security restricted, which every sandbox pod above met).
		dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		for _, f := range []string{"serviceaccount.yaml", "rolebinding.yaml", "pvc.yaml", "deployment.yaml", "service.yaml"} {
			var err error
			switch o := kube.Manifest(t, f).(type) {
			case *corev1.ServiceAccount:
				_, err = e.Client.CoreV1().ServiceAccounts(ns).Create(ctx, o, dry)
			case *rbacv1.RoleBinding:
				_, err = e.Client.RbacV1().RoleBindings(ns).Create(ctx, o, dry)
			case *corev1.PersistentVolumeClaim:
				_, err = e.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, o, dry)
			case *appsv1.Deployment:
				_, err = e.Client.AppsV1().Deployments(ns).Create(ctx, o, dry)
				if o.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || *o.Spec.Replicas != 1 {
					t.Errorf("deployment: strategy %s, replicas %d; want Recreate and one", o.Spec.Strategy.Type, *o.Spec.Replicas)
				}
			case *corev1.Service:
				_, err = e.Client.CoreV1().Services(ns).Create(ctx, o, dry)
			default:
				t.Fatalf("%s: unexpected %T", f, o)
			}
			if err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
		got, err := e.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil || got.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			t.Fatalf("namespace labels %v, %v", got.Labels, err)
		}
	})

	t.Run("rbac", func(t *testing.T) {
		// Another namespace: the Role does not reach it.
		_, err := kubernetes.New(ctx, e.options(t, func(o *kubernetes.Options) { o.Namespace = "default" }))
		if conch.KindOf(err) != conch.KindAuth {
			t.Fatalf("outside its namespace: %v (kind %s)", err, conch.KindOf(err))
		}
		if err := kubernetes.CheckAccess(ctx, e.options(t, nil)); err != nil {
			t.Fatalf("the manifest's Role: %v", err)
		}
		o := e.options(t, func(o *kubernetes.Options) { o.REST = e.Cluster.User(t, "nobody") })
		if err := kubernetes.CheckAccess(ctx, o); err == nil || !strings.Contains(err.Error(), "create pods/exec") {
			t.Fatalf("an unbound user: %v", err)
		}
	})
}

func waitGone(t *testing.T, e env, name, uid string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		p, err := e.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || string(p.UID) != uid {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pod %s still there", name)
}

func waitNoClaim(t *testing.T, e env, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		_, perr := e.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		_, cerr := e.Client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if perr != nil && cerr != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pod or claim %s still there", name)
}
