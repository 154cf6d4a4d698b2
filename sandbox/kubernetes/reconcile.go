//go:build kubernetes

package kubernetes

import (
	"context"

	"conch"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reconcile runs at start: pods and claims of conversations the store
// knows stay (the next use reattaches, over a new exec; idle from now on); failed or stale
// pods are deleted (claims kept); pods and claims of unknown conversations,
// and those whose conversation cannot be told, are deleted.
func (r *Runtime) Reconcile(ctx context.Context) error {
	var known map[string]bool
	if r.opts.Known != nil {
		keys, err := r.opts.Known(ctx)
		if err != nil {
			return err
		}
		known = make(map[string]bool, len(keys))
		for _, k := range keys {
			known[k.String()] = true
		}
	}
	pods, err := r.listPods(ctx)
	if err != nil {
		return err
	}
	claims, err := r.listClaims(ctx)
	if err != nil {
		return err
	}
	poolPods, poolClaims, err := r.reconcilePool(ctx, pods, claims)
	if err != nil {
		return err
	}
	type orphan struct {
		why string
		key conch.ConversationKey // as its annotation says, when it can be read
	}
	gone := map[string]orphan{}
	orphanOf := func(m metav1.ObjectMeta, why string) {
		k, _ := conch.ParseConversationKey(m.Annotations[AnnotationConversation])
		gone[m.Name] = orphan{why: why, key: k}
	}
	for i := range pods {
		p := &pods[i]
		if poolPods[p.Name] {
			continue
		}
		key, ok := r.podKey(p.ObjectMeta)
		r.noteAssigned(p.ObjectMeta, key, ok, known)
		switch {
		case !ok:
			orphanOf(p.ObjectMeta, "orphan: its conversation cannot be told")
		case known != nil && !known[key.String()]:
			orphanOf(p.ObjectMeta, "orphan: conversation unknown to the store")
		case p.DeletionTimestamp == nil && r.staleReason(p, key) != "":
			reason := r.staleReason(p, key)
			r.opts.Logger.Info("reconcile: deleting stale sandbox pod (workspace kept)", "pod", p.Name, "reason", reason)
			if err := r.deletePodNoWait(ctx, p.Name); err != nil {
				return err
			}
		case p.DeletionTimestamp == nil:
			// Live: tracked from now, so the janitor deletes it if it stays idle.
			r.touch(r.boxFor(key), 0)
		}
	}
	for i := range claims {
		c := &claims[i]
		if poolClaims[c.Name] {
			continue
		}
		key, ok := r.podKey(c.ObjectMeta)
		r.noteAssigned(c.ObjectMeta, key, ok, known)
		switch {
		case !ok:
			orphanOf(c.ObjectMeta, "orphan: its conversation cannot be told")
		case known != nil && !known[key.String()]:
			orphanOf(c.ObjectMeta, "orphan: conversation unknown to the store")
		}
	}
	for name, g := range gone {
		r.opts.Logger.Info("reconcile: removing sandbox pod and workspace", "name", name, "reason", g.why)
		if err := r.removeObjects(ctx, name, g.why, g.key); err != nil {
			return err
		}
	}
	r.opts.Logger.Info("sandboxes reconciled", "backend", "kubernetes", "namespace", r.ns, "pods", len(pods),
		"claims", len(claims), "removed", len(gone), "pool", r.PoolSize())
	r.mu.Lock()
	r.scanned = true
	r.mu.Unlock()
	r.fillPoolAsync()
	return nil
}

// noteAssigned records that key's sandbox is a claimed pool pod and claim.
func (r *Runtime) noteAssigned(m metav1.ObjectMeta, key conch.ConversationKey, ok bool, known map[string]bool) {
	if !ok || !r.isPoolName(m.Name) || (known != nil && !known[key.String()]) {
		return
	}
	r.mu.Lock()
	r.assigned[key.String()] = m.Name
	r.mu.Unlock()
}
