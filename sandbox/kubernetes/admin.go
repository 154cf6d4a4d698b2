//go:build kubernetes

package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"conch"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podKey is the conversation a pod (or claim) belongs to, checked against
// its name and label: ok is false for one whose conversation cannot be told.
func (r *Runtime) podKey(m metav1.ObjectMeta) (conch.ConversationKey, bool) {
	key, err := conch.ParseConversationKey(m.Annotations[AnnotationConversation])
	if err != nil || m.Labels[LabelConversation] != ConversationLabel(key) || m.Name != PodName(r.opts.InstanceID, key) && (!r.isPoolName(m.Name) || m.Labels[LabelPool] != "") {
		return conch.ConversationKey{}, false
	}
	return key, true
}

func (r *Runtime) listPods(ctx context.Context) ([]corev1.Pod, error) {
	l, err := r.cs.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: r.selector()})
	if err != nil {
		return nil, r.apiErr("list sandbox pods", err)
	}
	return l.Items, nil
}

func (r *Runtime) listClaims(ctx context.Context) ([]corev1.PersistentVolumeClaim, error) {
	l, err := r.cs.CoreV1().PersistentVolumeClaims(r.ns).List(ctx, metav1.ListOptions{LabelSelector: r.selector()})
	if err != nil {
		return nil, r.apiErr("list workspace claims", err)
	}
	return l.Items, nil
}

// info fills the root's view of one pod.
func (r *Runtime) info(p *corev1.Pod) conch.SandboxInfo {
	in := conch.SandboxInfo{
		Name: p.Name, ID: string(p.UID), Engine: r.Engine(), Created: p.CreationTimestamp.Time,
		Image: r.opts.Image, ImageHash: "", Workspace: "pvc/" + p.Name,
		ProfileCurrent: p.Labels[LabelProfileHash] == r.hash,
	}
	for _, c := range p.Spec.Containers {
		if c.Name == SandboxContainer {
			in.Image = c.Image
			in.ImageCurrent = c.Image == r.opts.Image
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == "workspace" && v.PersistentVolumeClaim != nil {
			in.Workspace = "pvc/" + v.PersistentVolumeClaim.ClaimName
		}
	}
	if key, ok := r.podKey(p.ObjectMeta); ok {
		in.Key, in.Conversation = key, key.String()
	} else if r.isPoolName(p.Name) && p.Labels[LabelPool] == "true" {
		in.Pool, in.Conversation = true, conch.PoolConversation
	} else {
		in.Orphan = true
	}
	switch p.Status.Phase {
	case corev1.PodRunning:
		in.State = "running"
	case corev1.PodPending:
		in.State = "created"
	case corev1.PodSucceeded, corev1.PodFailed:
		in.State = "dead"
	default:
		in.State = strings.ToLower(string(p.Status.Phase))
	}
	if p.DeletionTimestamp != nil {
		in.State = "removing"
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.Name != SandboxContainer {
			continue
		}
		if s := st.State.Running; s != nil {
			in.StartedAt = s.StartedAt.Time
			in.Running = p.DeletionTimestamp == nil
		}
		if t := st.LastTerminationState.Terminated; t != nil {
			in.FinishedAt, in.ExitCode, in.OOMKilled = t.FinishedAt.Time, int(t.ExitCode), t.Reason == "OOMKilled"
		}
		if w := st.State.Waiting; w != nil && w.Reason != "" {
			in.Error = w.Reason + ": " + w.Message
		}
	}
	if in.State != "running" && in.Error == "" {
		if msg := podProblem(p); msg != "phase "+string(p.Status.Phase) {
			in.Error = msg
		}
	}
	r.mu.Lock()
	if b := r.boxes[in.Key.String()]; b != nil && !in.Key.IsZero() {
		in.LastUsed, in.Busy = b.lastUse, b.active > 0
	}
	r.mu.Unlock()
	return in
}

// Sandboxes lists the instance's sandbox pods, conversations first by key.
func (r *Runtime) Sandboxes(ctx context.Context) ([]conch.SandboxInfo, error) {
	pods, err := r.listPods(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]conch.SandboxInfo, 0, len(pods))
	for i := range pods {
		out = append(out, r.info(&pods[i]))
	}
	slices.SortFunc(out, func(a, b conch.SandboxInfo) int {
		return strings.Compare(a.Conversation+"\x00"+a.Name, b.Conversation+"\x00"+b.Name)
	})
	return out, nil
}

// SandboxInfo describes the conversation's pod; a *NoSandboxError (naming
// its kept claim) when it has none.
func (r *Runtime) SandboxInfo(ctx context.Context, key conch.ConversationKey) (conch.SandboxInfo, error) {
	if err := r.loadAssigned(ctx); err != nil {
		return conch.SandboxInfo{}, err
	}
	name := r.nameOf(key)
	p, err := r.cs.CoreV1().Pods(r.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		nse := &conch.NoSandboxError{Key: key}
		if _, err := r.cs.CoreV1().PersistentVolumeClaims(r.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			nse.Workspaces = []string{"pvc/" + name}
		}
		return conch.SandboxInfo{}, nse
	}
	if err != nil {
		return conch.SandboxInfo{}, r.apiErr("read sandbox pod "+name, err)
	}
	if k, ok := r.podKey(p.ObjectMeta); !ok || k != key {
		return conch.SandboxInfo{}, &conch.NoSandboxError{Key: key}
	}
	return r.info(p), nil
}

// Inspect describes the pod ref names: a pod name, a uid prefix or a
// conversation key.
func (r *Runtime) Inspect(ctx context.Context, ref string) (conch.SandboxDetails, error) {
	pods, err := r.listPods(ctx)
	if err != nil {
		return conch.SandboxDetails{}, err
	}
	var match []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Name == ref {
			match = []*corev1.Pod{p}
			break
		}
		if len(ref) >= 4 && strings.HasPrefix(string(p.UID), ref) || p.Annotations[AnnotationConversation] == ref {
			match = append(match, p)
		}
	}
	switch len(match) {
	case 0:
		if key, err := conch.ParseConversationKey(ref); err == nil {
			if _, err := r.SandboxInfo(ctx, key); err != nil {
				return conch.SandboxDetails{}, err
			}
		}
		return conch.SandboxDetails{}, &conch.Error{Kind: conch.KindNotFound, Err: &conch.SandboxRefError{Ref: ref, Instance: r.opts.InstanceID}}
	case 1:
	default:
		names := make([]string, len(match))
		for i, p := range match {
			names[i] = p.Name
		}
		return conch.SandboxDetails{}, &conch.Error{Kind: conch.KindInvalid,
			Err: &conch.SandboxRefError{Ref: ref, Instance: r.opts.InstanceID, Matches: names}}
	}
	p := match[0]
	d := conch.SandboxDetails{SandboxInfo: r.info(p), ProfileHash: p.Labels[LabelProfileHash], Labels: p.Labels}
	d.Hardening, d.HardeningProblems = r.hardening(p)
	for _, c := range p.Spec.Containers {
		if c.Name != SandboxContainer {
			continue
		}
		for _, m := range c.VolumeMounts {
			d.Mounts = append(d.Mounts, conch.SandboxMount{Type: volumeType(p, m.Name), Source: m.Name,
				Destination: m.MountPath, ReadOnly: m.ReadOnly})
		}
	}
	return d, nil
}

func volumeType(p *corev1.Pod, name string) string {
	for _, v := range p.Spec.Volumes {
		if v.Name != name {
			continue
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			return "pvc"
		case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
			return "tmpfs"
		case v.EmptyDir != nil:
			return "emptyDir"
		}
	}
	return "volume"
}

// hardening reports the pod's confinement as the API server holds it, and
// where it differs from what conch would create now.
func (r *Runtime) hardening(p *corev1.Pod) ([]conch.SandboxSetting, []string) {
	var c *corev1.Container
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == SandboxContainer {
			c = &p.Spec.Containers[i]
		}
	}
	if c == nil || c.SecurityContext == nil {
		return nil, []string{"no sandbox container with a security context"}
	}
	sc := c.SecurityContext
	b := func(v *bool) string {
		if v == nil {
			return "unset"
		}
		return fmt.Sprint(*v)
	}
	i := func(v *int64) string {
		if v == nil {
			return "unset"
		}
		return fmt.Sprint(*v)
	}
	caps := "none dropped"
	if sc.Capabilities != nil && len(sc.Capabilities.Drop) > 0 {
		caps = fmt.Sprint(sc.Capabilities.Drop)
	}
	seccomp := "unset"
	if sc.SeccompProfile != nil {
		seccomp = string(sc.SeccompProfile.Type)
	}
	sa := b(p.Spec.AutomountServiceAccountToken)
	out := []conch.SandboxSetting{
		{Name: "read-only root", Value: b(sc.ReadOnlyRootFilesystem)},
		{Name: "allow privilege escalation", Value: b(sc.AllowPrivilegeEscalation)},
		{Name: "capabilities dropped", Value: caps},
		{Name: "seccomp", Value: seccomp},
		{Name: "run as non-root", Value: b(sc.RunAsNonRoot)},
		{Name: "user", Value: i(sc.RunAsUser)},
		{Name: "cpu", Value: c.Resources.Limits.Cpu().String()},
		{Name: "memory", Value: c.Resources.Limits.Memory().String()},
		{Name: "service-account token", Value: sa},
		{Name: "service links", Value: b(p.Spec.EnableServiceLinks)},
		{Name: "qos class", Value: string(p.Status.QOSClass)},
	}
	want := r.spec.podSpec(p.Name)
	var problems []string
	wc := want.Containers[0]
	check := func(name string, ok bool) {
		if !ok {
			problems = append(problems, name+" differs from the active profile")
		}
	}
	check("security context", equality.Semantic.DeepEqual(sc, wc.SecurityContext))
	check("resources", c.Resources.Limits.Cpu().Cmp(*wc.Resources.Limits.Cpu()) == 0 &&
		c.Resources.Limits.Memory().Cmp(*wc.Resources.Limits.Memory()) == 0)
	check("service-account token", sa == "false")
	check("service links", b(p.Spec.EnableServiceLinks) == "false")
	return out, problems
}

// SandboxStats reads the limits of the conversation's pod and claim, and
// the sandbox container's CPU and memory use from the metrics API
// (metrics.k8s.io) where the cluster serves it: -1 where it does not, or
// has no sample of the pod yet. DiskBytes is -1 and PIDs unknown (the
// kubelet's volume stats and the node's podPidsLimit are not visible).
func (r *Runtime) SandboxStats(ctx context.Context, key conch.ConversationKey) (conch.SandboxStats, error) {
	if err := r.loadAssigned(ctx); err != nil {
		return conch.SandboxStats{}, err
	}
	name := r.nameOf(key)
	p, err := r.cs.CoreV1().Pods(r.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return conch.SandboxStats{}, &conch.NoSandboxError{Key: key}
	}
	if err != nil {
		return conch.SandboxStats{}, r.apiErr("read sandbox pod "+name, err)
	}
	st := conch.SandboxStats{CPUPercent: -1, MemoryBytes: -1, DiskBytes: -1}
	for _, c := range p.Spec.Containers {
		if c.Name == SandboxContainer {
			st.MemoryLimit = c.Resources.Limits.Memory().Value()
		}
	}
	if u, err := r.metrics.container(ctx, name, SandboxContainer); err != nil {
		r.opts.Logger.Warn("sandbox use unknown", "pod", name, "err", err)
	} else if u.ok {
		st.CPUPercent, st.MemoryBytes = u.CPUPercent, u.MemoryBytes
	}
	pvc, err := r.cs.CoreV1().PersistentVolumeClaims(r.ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if c, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
			q = c
		}
		st.DiskLimit = q.Value()
	} else if !apierrors.IsNotFound(err) {
		return conch.SandboxStats{}, r.apiErr("read workspace claim "+name, err)
	}
	st.DiskBytes = r.workspaceUse(ctx, key, st.DiskLimit)
	return st, nil
}

// workspaceUse is the conversation's workspace use, in bytes, or -1 when
// unknown: asked of the pod's agent over the stream already open (never a
// new one: stats are read every few seconds by the dashboard), and
// believed only when the workspace is a file system of its own the size of
// its claim (ownFileSystem): a claim on a shared file system (hostPath,
// local-path, NFS) reports the whole disk.
func (r *Runtime) workspaceUse(ctx context.Context, key conch.ConversationKey, claim int64) int64 {
	r.mu.Lock()
	b := r.boxes[key.String()]
	r.mu.Unlock()
	if b == nil || claim <= 0 {
		return -1
	}
	select {
	case b.lock <- struct{}{}: // not while the pod is made or deleted
	default:
		return -1
	}
	c := b.client
	b.unlock()
	if c == nil || !c.Connected() {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	size, used, err := c.FileSystem(ctx, "/workspace")
	if err != nil {
		r.opts.Logger.Debug("workspace use unknown", "conversation", key, "err", err)
		return -1
	}
	if !ownFileSystem(size, claim) {
		return -1
	}
	return used
}

// ownFileSystem reports whether a file system of size bytes is a volume
// made for a claim of claim bytes: a little smaller (the file system's own
// metadata and reserve) up to a little larger (provisioners round up).
func ownFileSystem(size, claim int64) bool {
	return claim > 0 && size >= claim*8/10 && size <= claim+claim/10
}

// KeyOf resolves a `conch sandbox` reference to a conversation.
func (r *Runtime) KeyOf(ctx context.Context, ref string) (conch.ConversationKey, error) {
	if key, err := conch.ParseConversationKey(ref); err == nil && !strings.HasPrefix(ref, "conch-") {
		return key, nil
	}
	d, err := r.Inspect(ctx, ref)
	if err != nil {
		return conch.ConversationKey{}, err
	}
	if d.Key.IsZero() {
		return conch.ConversationKey{}, conch.Errorf(conch.KindInvalid, "pod %s belongs to no conversation this instance can tell", d.Name)
	}
	return d.Key, nil
}
