//go:build kubernetes

package kubernetes

import (
	"context"

	"conch"
)

// Reconcile runs at start: pods and claims of conversations the store
// knows stay (the next use reattaches, over a new exec); failed or stale
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
	gone := map[string]string{} // name → why
	for i := range pods {
		p := &pods[i]
		key, ok := r.podKey(p.ObjectMeta)
		switch {
		case !ok:
			gone[p.Name] = "orphan: its conversation cannot be told"
		case known != nil && !known[key.String()]:
			gone[p.Name] = "orphan: conversation unknown to the store"
		case p.DeletionTimestamp == nil && r.staleReason(p, key) != "":
			reason := r.staleReason(p, key)
			r.opts.Logger.Info("reconcile: deleting stale sandbox pod (workspace kept)", "pod", p.Name, "reason", reason)
			if err := r.deletePodNoWait(ctx, p.Name); err != nil {
				return err
			}
		}
	}
	for i := range claims {
		c := &claims[i]
		key, ok := r.podKey(c.ObjectMeta)
		switch {
		case !ok:
			gone[c.Name] = "orphan: its conversation cannot be told"
		case known != nil && !known[key.String()]:
			gone[c.Name] = "orphan: conversation unknown to the store"
		}
	}
	for name, why := range gone {
		r.opts.Logger.Info("reconcile: removing sandbox pod and workspace", "name", name, "reason", why)
		key := conch.ConversationKey{}
		if err := r.removeObjects(ctx, name, why, key); err != nil {
			return err
		}
	}
	r.opts.Logger.Info("sandboxes reconciled", "backend", "kubernetes", "namespace", r.ns, "pods", len(pods),
		"claims", len(claims), "removed", len(gone))
	return nil
}
