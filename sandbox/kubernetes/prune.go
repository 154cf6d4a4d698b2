//go:build kubernetes

package kubernetes

import (
	"context"
	"errors"
	"slices"
	"time"

	"conch"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RemoveRef is `conch sandbox rm REF`: ref (a pod name, a uid prefix or a
// conversation key) names a conversation, whose pod and workspace claim go;
// with keepWorkspace only the pod goes, and the conversation's next use
// makes a new pod on the same claim (as after an eviction or idle_stop).
func (r *Runtime) RemoveRef(ctx context.Context, ref string, keepWorkspace bool) ([]string, error) {
	if d, err := r.Inspect(ctx, ref); err == nil && d.Key.IsZero() {
		// A pod that is no conversation's (an orphan, a pool pod): it goes,
		// with its claim unless asked to keep it.
		if keepWorkspace {
			if err := r.deletePodNoWait(ctx, d.Name); err != nil {
				return nil, err
			}
			return []string{"pod " + d.Name + " (claim " + d.Name + " kept)"}, nil
		}
		if err := r.removeObjects(ctx, d.Name, "removed by the operator", conch.ConversationKey{}); err != nil {
			return nil, err
		}
		return []string{"pod " + d.Name + " and claim " + d.Name}, nil
	}
	key, err := r.KeyOf(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !keepWorkspace {
		name := r.nameOfLoaded(ctx, key)
		if err := r.Remove(ctx, key); err != nil {
			return nil, err
		}
		return []string{"pod " + name + " and workspace claim " + name + " of " + key.String()}, nil
	}
	if err := r.loadAssigned(ctx); err != nil {
		return nil, err
	}
	b, err := r.lockBox(ctx, key)
	if err != nil {
		return nil, err
	}
	defer b.unlock()
	p, err := r.cs.CoreV1().Pods(r.ns).Get(ctx, b.name, metav1.GetOptions{})
	if err != nil || p.Annotations[AnnotationConversation] != key.String() {
		return nil, conch.Errorf(conch.KindNotFound, "conversation %s has no sandbox pod to remove (its workspace claim is kept as asked)", key)
	}
	b.closeClient()
	b.uid = ""
	if err := r.deletePod(ctx, p); err != nil {
		return nil, err
	}
	r.audit(ctx, conch.AuditSandboxRemove, key, map[string]any{"pod": b.name, "namespace": r.ns,
		"reason": "removed by the operator, workspace kept", "engine": r.Engine()})
	r.opts.Logger.Info("sandbox pod removed by the operator, workspace claim kept", "conversation", key.String(), "pod", b.name)
	return []string{"pod " + b.name + " (workspace claim " + b.name + " kept)"}, nil
}

// nameOfLoaded is the conversation's pod and claim name, a claimed warm-pool
// name included ("" reads as its own name when the cluster cannot be asked).
func (r *Runtime) nameOfLoaded(ctx context.Context, key conch.ConversationKey) string {
	_ = r.loadAssigned(ctx)
	return r.nameOf(key)
}

// pruneGrace spares what may still be in the making: a pod pending and a
// warm-pool claim without its pod yet.
const pruneGrace = 5 * time.Minute

// Prune is `conch sandbox prune` on Kubernetes; it removes, and returns as
// "pod NAME (reason)", "claim NAME (reason)" lines (only lists them when
// dryRun):
//   - pods and claims of conversations the store no longer knows, and those
//     whose conversation cannot be told (orphans);
//   - failed or finished pods of known conversations (their claims stay:
//     the next use makes a new pod on them);
//   - failed warm-pool pods and those of another pod spec, with their
//     claims, and warm-pool claims without a pod;
//   - probe pods `conch doctor` left behind.
//
// A running pod of a known conversation stays even with a stale spec (a
// running conch may be using it; its next use replaces it, idle_stop
// deletes it when idle); a pod pending for less than pruneGrace stays.
// sandbox.retention has no meaning here: a pod is deleted whole, claims
// stay until the conversation goes.
func (r *Runtime) Prune(ctx context.Context, dryRun bool) ([]string, error) {
	if r.opts.Known == nil {
		return nil, conch.Errorf(conch.KindInvalid, "prune needs the store's conversations")
	}
	// Pods and claims first: a conversation is stored before its pod is
	// made, so any conversation of a pod listed here is in the list read
	// after.
	pods, err := r.listPods(ctx)
	if err != nil {
		return nil, err
	}
	claims, err := r.listClaims(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := r.opts.Known(ctx)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(keys))
	for _, k := range keys {
		known[k.String()] = true
	}
	now := r.opts.Now()
	var out []string
	var errs []error
	podNames := map[string]bool{}
	claimGone := map[string]bool{}
	remove := func(line string, key conch.ConversationKey, name string, withClaim bool, reason string) {
		out = append(out, line)
		if withClaim {
			claimGone[name] = true
		}
		if dryRun {
			return
		}
		if withClaim {
			errs = append(errs, r.removeObjects(ctx, name, reason, key))
			return
		}
		if err := r.deletePodNoWait(ctx, name); err != nil {
			errs = append(errs, err)
			return
		}
		r.audit(ctx, conch.AuditSandboxRemove, key, map[string]any{"pod": name, "namespace": r.ns,
			"reason": reason + ", workspace kept", "engine": r.Engine()})
	}
	for i := range pods {
		p := &pods[i]
		podNames[p.Name] = true
		if p.DeletionTimestamp != nil {
			continue
		}
		dead := p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		if r.isPoolName(p.Name) && p.Labels[LabelPool] == "true" {
			reason := ""
			switch {
			case dead:
				reason = "failed warm-pool pod"
			case p.Labels[LabelProfileHash] != r.hash:
				reason = "warm-pool pod of another pod spec"
			}
			if reason != "" {
				remove("pod "+p.Name+" and claim "+p.Name+" ("+reason+")", conch.ConversationKey{}, p.Name, true, reason)
			}
			continue
		}
		key, ok := r.podKey(p.ObjectMeta)
		switch {
		case !ok:
			k, _ := conch.ParseConversationKey(p.Annotations[AnnotationConversation])
			reason := "orphan: its conversation cannot be told"
			remove("pod "+p.Name+" and claim "+p.Name+" ("+reason+")", k, p.Name, true, reason)
		case !known[key.String()]:
			reason := "orphan: the store no longer knows conversation " + key.String()
			remove("pod "+p.Name+" and claim "+p.Name+" ("+reason+")", key, p.Name, true, reason)
		case dead:
			reason := "pod " + string(p.Status.Phase) + ": " + podProblem(p)
			remove("pod "+p.Name+" ("+reason+"; workspace claim kept)", key, p.Name, false, "pod "+string(p.Status.Phase))
		}
	}
	for i := range claims {
		c := &claims[i]
		if c.DeletionTimestamp != nil || claimGone[c.Name] {
			continue
		}
		if r.isPoolName(c.Name) && c.Labels[LabelPool] == "true" {
			if !podNames[c.Name] && now.Sub(c.CreationTimestamp.Time) > pruneGrace {
				remove("claim "+c.Name+" (warm-pool claim without its pod)", conch.ConversationKey{}, c.Name, true, "warm-pool claim without its pod")
			}
			continue
		}
		key, ok := r.podKey(c.ObjectMeta)
		switch {
		case !ok:
			k, _ := conch.ParseConversationKey(c.Annotations[AnnotationConversation])
			remove("claim "+c.Name+" (dangling workspace of no conversation that can be told)", k, c.Name, true, "dangling workspace")
		case !known[key.String()]:
			remove("claim "+c.Name+" (dangling workspace of "+key.String()+", a conversation the store no longer knows)", key, c.Name, true, "dangling workspace")
		}
	}
	probes, err := r.cs.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{
		LabelSelector: LabelInstance + "=" + r.spec.instance + "," + LabelProbe + "=true"})
	if err != nil {
		errs = append(errs, r.apiErr("list probe pods", err))
	} else {
		for _, p := range probes.Items {
			if p.DeletionTimestamp == nil && now.Sub(p.CreationTimestamp.Time) > probeStale {
				out = append(out, "pod "+p.Name+" (probe pod conch doctor left behind)")
				if !dryRun {
					errs = append(errs, r.deletePodNoWait(ctx, p.Name))
				}
			}
		}
	}
	slices.Sort(out)
	if !dryRun {
		r.opts.Logger.Info("sandboxes pruned", "backend", "kubernetes", "removed", len(out))
	}
	return out, errors.Join(errs...)
}
