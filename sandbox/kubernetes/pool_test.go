//go:build kubernetes

package kubernetes_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"conch"
	"conch/sandbox/kubernetes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// freePool lists the instance's unclaimed pool pods not being deleted.
func freePool(t *testing.T, e env, instance string) map[string]corev1.Pod {
	t.Helper()
	l, err := e.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: kubernetes.LabelInstance + "=" + kubernetes.InstanceLabel(instance) + "," + kubernetes.LabelPool + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
}

func sandboxStarted(p *corev1.Pod) (time.Time, int32) {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == kubernetes.SandboxContainer && st.State.Running != nil {
			return st.State.Running.StartedAt.Time, st.RestartCount
		}
	}
	return time.Time{}, -1
}

// testWarmPool: pool pods made ahead, a new conversation bound to one by
// relabelling (same pod, not restarted), the pool refilled, and at the next
// start the claimed pod reattached, a half-done claim finished, the pool
// shrunk to its new size.
func testWarmPool(t *testing.T, e env) {
	ctx := context.Background()
	o := e.options(t, func(o *kubernetes.Options) { o.WarmPool = 2 })
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{
			LabelSelector: kubernetes.LabelInstance + "=" + kubernetes.InstanceLabel(o.InstanceID)})
	})
	rt := e.runtime(t, o)
	if err := rt.FillPool(ctx); err != nil {
		t.Fatal(err)
	}
	before := freePool(t, e, o.InstanceID)
	if rt.PoolSize() != 2 || len(before) != 2 {
		t.Fatalf("pool: %d ready, %d pods; want 2", rt.PoolSize(), len(before))
	}
	list, err := rt.Sandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(list, func(s conch.SandboxInfo) bool { return !s.Pool || s.Orphan })); n != 2 {
		t.Fatalf("sandbox ls shows %d pool pods, want 2: %+v", n, list)
	}

	key := conch.ConversationKey{Channel: "web", ID: "pooled"}
	sb, err := rt.Sandbox(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	info, err := rt.SandboxInfo(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	was, ok := before[info.Name]
	if !ok || info.ID != string(was.UID) {
		t.Fatalf("conversation got pod %s (%s), not one of the pool's", info.Name, info.ID)
	}
	p, err := e.Client.CoreV1().Pods(ns).Get(ctx, info.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startedBefore, _ := sandboxStarted(&was)
	startedAfter, restarts := sandboxStarted(p)
	switch {
	case p.UID != was.UID, !startedAfter.Equal(startedBefore), restarts != 0:
		t.Fatalf("the claim restarted the pod: uid %s→%s, started %v→%v, restarts %d", was.UID, p.UID, startedBefore, startedAfter, restarts)
	case p.Annotations[kubernetes.AnnotationConversation] != key.String(), p.Labels[kubernetes.LabelPool] != "",
		p.Labels[kubernetes.LabelConversation] != kubernetes.ConversationLabel(key):
		t.Fatalf("claimed pod's metadata: %v %v", p.Labels, p.Annotations)
	}
	c, err := e.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, info.Name, metav1.GetOptions{})
	if err != nil || c.Annotations[kubernetes.AnnotationConversation] != key.String() || c.Labels[kubernetes.LabelPool] != "" {
		t.Fatalf("claimed workspace claim: %+v, %v", c, err)
	}
	if got := run(t, sb, "id -u; pwd; echo pooled > /workspace/mark; cat /workspace/mark"); got != "1000\n/workspace\npooled" {
		t.Fatalf("in the claimed pod: %q", got)
	}
	deadline := time.Now().Add(time.Minute)
	for rt.PoolSize() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("pool not refilled: %d", rt.PoolSize())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, ok := freePool(t, e, o.InstanceID)[info.Name]; ok {
		t.Fatal("the claimed pod is still listed as free")
	}
	rt.Close()

	// conch stopped between relabelling the pod and its claim.
	if _, err := e.Client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, info.Name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"conch.pool":"true","conch.conversation":null},"annotations":{"conch.conversation":null}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// The next start with a pool of 1: the claimed pod is the conversation's,
	// one free pod goes.
	rt2 := e.runtime(t, e.options(t, func(o2 *kubernetes.Options) {
		o2.InstanceID, o2.WarmPool = o.InstanceID, 1
		o2.Known = func(context.Context) ([]conch.ConversationKey, error) { return []conch.ConversationKey{key}, nil }
	}))
	if err := rt2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if rt2.PoolSize() != 1 {
		t.Fatalf("pool after a restart with warm_pool = 1: %d", rt2.PoolSize())
	}
	if n := len(freePool(t, e, o.InstanceID)); n != 1 {
		t.Fatalf("%d free pool pods left, want 1", n)
	}
	c, err = e.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, info.Name, metav1.GetOptions{})
	if err != nil || c.Annotations[kubernetes.AnnotationConversation] != key.String() || c.Labels[kubernetes.LabelPool] != "" {
		t.Fatalf("half-claimed workspace not finished by reconcile: %+v, %v", c, err)
	}
	sb2, err := rt2.Sandbox(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if sb2.ID() != info.ID {
		t.Fatalf("after a restart the conversation got pod %s, want its claimed %s", sb2.ID(), info.ID)
	}
	if got := run(t, sb2, "cat /workspace/mark"); got != "pooled" {
		t.Fatalf("workspace after restart: %q", got)
	}
	// `conch sandbox inspect` / `rm` run a runtime without Reconcile: they
	// find the conversation's pool-named pod too.
	cli := e.runtime(t, e.options(t, func(o3 *kubernetes.Options) { o3.InstanceID = o.InstanceID }))
	if in, err := cli.SandboxInfo(ctx, key); err != nil || in.Name != info.Name || in.Conversation != key.String() {
		t.Fatalf("SandboxInfo without Reconcile: %+v, %v", in, err)
	}
	if err := cli.Remove(ctx, key); err != nil {
		t.Fatal(err)
	}
	waitNoClaim(t, e, info.Name)
}
