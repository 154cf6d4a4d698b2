//go:build kubernetes

package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"conch"
	"conch/sandbox/sandboxd"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// LabelPool marks a warm-pool pod and its claim while no conversation owns
// them; claiming removes it.
const LabelPool = "conch.pool"

// poolEntry is one ready, unclaimed pool pod.
type poolEntry struct {
	name string
	uid  types.UID
	// client is the pod's agent, dialled and pinged ahead so that the
	// conversation's first command does not wait for the exec stream.
	client *sandboxd.Client
	// skills is the hash of the skills copied in ahead ("" if none were):
	// the first command does not wait for that copy either.
	skills string
}

// poolPrefix starts every pool pod's (and claim's) name of the instance.
func poolPrefix(instance string) string { return "conch-pool-" + hashOf(6, "pool", instance) + "-" }

func (r *Runtime) isPoolName(name string) bool {
	return strings.HasPrefix(name, poolPrefix(r.opts.InstanceID))
}

func (s spec) poolLabels() map[string]string {
	return map[string]string{LabelInstance: s.instance, LabelSandbox: "true", LabelPool: "true"}
}

// poolPod is an identity-free sandbox pod: the same spec (so the same
// profile hash) as a conversation's, on its own claim of the same name.
func (s spec) poolPod(name string) *corev1.Pod {
	labels := s.poolLabels()
	labels[LabelProfileHash] = s.profileHash()
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: s.podSpec(name)}
}

func (s spec) poolClaim(name string) *corev1.PersistentVolumeClaim {
	c := s.claim(name, conch.ConversationKey{})
	c.Labels = s.poolLabels()
	delete(c.Labels, LabelSandbox)
	c.Annotations = nil
	return c
}

// nameOf is the pod and claim name of key's sandbox: a claimed pool pod's
// when it has one, else PodName.
func (r *Runtime) nameOf(key conch.ConversationKey) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.assigned[key.String()]; n != "" {
		return n
	}
	return PodName(r.opts.InstanceID, key)
}

// loadAssigned learns, once per process, which conversations hold a pool
// pod and claim (Reconcile does it at start; `conch sandbox` commands and a
// runtime used without Reconcile need it too, or they would look under
// PodName only).
func (r *Runtime) loadAssigned(ctx context.Context) error {
	r.mu.Lock()
	done := r.scanned
	r.mu.Unlock()
	if done {
		return nil
	}
	pods, err := r.listPods(ctx)
	if err != nil {
		return err
	}
	claims, err := r.listClaims(ctx)
	if err != nil {
		return err
	}
	metas := make([]metav1.ObjectMeta, 0, len(pods)+len(claims))
	for i := range pods {
		metas = append(metas, pods[i].ObjectMeta)
	}
	for i := range claims {
		metas = append(metas, claims[i].ObjectMeta)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range metas {
		if key, ok := r.podKey(m); ok && r.isPoolName(m.Name) && r.assigned[key.String()] == "" {
			r.assigned[key.String()] = m.Name
		}
	}
	r.scanned = true
	return nil
}

// PoolSize is the number of ready, unclaimed pool pods.
func (r *Runtime) PoolSize() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pool)
}

// fillPoolAsync tops the warm pool up to WarmPool in the background.
func (r *Runtime) fillPoolAsync() {
	r.mu.Lock()
	if r.closed || r.poolFilling || len(r.pool) >= r.opts.WarmPool {
		r.mu.Unlock()
		return
	}
	r.poolFilling = true
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		err := r.FillPool(r.life)
		r.mu.Lock()
		r.poolFilling = false
		r.mu.Unlock()
		if err != nil && r.life.Err() == nil {
			r.opts.Logger.Warn("warm pool", "err", err)
		}
	}()
}

// FillPool creates pool pods until WarmPool are ready. It runs in the
// background after Reconcile and after each claim; tests call it directly.
func (r *Runtime) FillPool(ctx context.Context) error {
	for {
		r.mu.Lock()
		need := len(r.pool) < r.opts.WarmPool && !r.closed
		r.mu.Unlock()
		if !need {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.addPoolPod(ctx); err != nil {
			return err
		}
	}
}

// addPoolPod creates one pool claim and pod, waits for it to run and opens
// its agent stream. A pod that does not make it is deleted with its claim.
func (r *Runtime) addPoolPod(ctx context.Context) error {
	rb := make([]byte, 4)
	_, _ = rand.Read(rb)
	name := poolPrefix(r.opts.InstanceID) + hex.EncodeToString(rb)
	if _, err := r.cs.CoreV1().PersistentVolumeClaims(r.ns).Create(ctx, r.spec.poolClaim(name), metav1.CreateOptions{}); err != nil {
		return r.apiErr("create warm-pool claim "+name, err)
	}
	fail := func(err error) error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = r.deleteObjects(cctx, name)
		return err
	}
	p, err := r.cs.CoreV1().Pods(r.ns).Create(ctx, r.spec.poolPod(name), metav1.CreateOptions{})
	if err != nil {
		return fail(r.apiErr("create warm-pool pod "+name, err))
	}
	if p, err = r.waitRunning(ctx, p); err != nil {
		return fail(fmt.Errorf("warm pool: %w", err))
	}
	c := r.poolClient(p)
	if _, err := c.Ping(ctx); err != nil {
		_ = c.Close()
		return fail(fmt.Errorf("warm pool: start the agent in %s: %w", name, err))
	}
	entry := poolEntry{name: name, uid: p.UID, client: c}
	if r.opts.SkillsDir != "" {
		if hash, err := r.hostSkillsHash(); err == nil {
			if err := r.copySkills(ctx, name, hash); err != nil {
				r.opts.Logger.Warn("warm pool: skills not copied ahead (copied on use)", "pod", name, "err", err)
			} else {
				entry.skills = hash
			}
		}
	}
	r.mu.Lock()
	closed := r.closed
	if !closed {
		r.pool = append(r.pool, entry)
	}
	r.mu.Unlock()
	if closed {
		_ = c.Close()
	}
	r.opts.Logger.Info("warm pool pod ready", "pod", name)
	return nil
}

func (r *Runtime) poolClient(p *corev1.Pod) *sandboxd.Client {
	name := p.Name
	return sandboxd.NewClient(func(ctx context.Context) (io.ReadWriteCloser, error) {
		return r.dialAgent(ctx, name)
	}, sandboxd.ClientOptions{ID: string(p.UID)})
}

// claimPatch gives a pool object its conversation: the conversation label
// and annotation set, the pool label removed. uid, when set, makes the
// patch fail on another object of the same name.
func claimPatch(key conch.ConversationKey, uid types.UID) []byte {
	meta := map[string]any{
		"labels":      map[string]any{LabelPool: nil, LabelConversation: ConversationLabel(key)},
		"annotations": map[string]any{AnnotationConversation: key.String()},
	}
	if uid != "" {
		meta["uid"] = string(uid)
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta})
	return b
}

// assignFromPool binds a ready pool pod and its claim to b's conversation:
// metadata patches only (a running pod's labels and annotations change
// without a restart). The pod is patched first: it is what Sandbox reads,
// and Reconcile finishes a claim left unpatched. ok is false when the pool
// is empty. b.lock is held.
func (r *Runtime) assignFromPool(ctx context.Context, b *box) (p *corev1.Pod, ok bool, err error) {
	for {
		r.mu.Lock()
		if len(r.pool) == 0 {
			r.mu.Unlock()
			return nil, false, nil
		}
		e := r.pool[0]
		r.pool = r.pool[1:]
		r.mu.Unlock()

		p, err := r.cs.CoreV1().Pods(r.ns).Patch(ctx, e.name, types.MergePatchType, claimPatch(b.key, e.uid), metav1.PatchOptions{})
		if err == nil && (p.DeletionTimestamp != nil || !podReady(p)) {
			err = fmt.Errorf("pool pod %s is no longer running", e.name)
		}
		if err != nil {
			if e.client != nil {
				_ = e.client.Close()
			}
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			r.opts.Logger.Info("warm pool pod dropped", "pod", e.name, "err", err)
			_ = r.deleteObjects(ctx, e.name)
			continue
		}
		r.mu.Lock()
		r.assigned[b.key.String()] = e.name
		r.mu.Unlock()
		b.name = e.name
		b.client = e.client
		if e.skills != "" {
			b.skills = skillsSent{uid: string(e.uid), hash: e.skills}
		}
		if b.client == nil {
			b.client = r.poolClient(p)
		}
		if _, err := r.cs.CoreV1().PersistentVolumeClaims(r.ns).Patch(ctx, e.name, types.MergePatchType,
			claimPatch(b.key, ""), metav1.PatchOptions{}); err != nil {
			// The pod is the conversation's already; Reconcile labels its claim.
			r.opts.Logger.Warn("warm pool: label the claimed workspace", "claim", e.name, "err", err)
		}
		r.opts.Logger.Info("sandbox assigned from warm pool", "conversation", b.key.String(), "pod", e.name, "namespace", r.ns)
		r.audit(ctx, conch.AuditSandboxCreate, b.key, map[string]any{"pod": e.name, "namespace": r.ns, "claim": e.name,
			"image": r.opts.Image, "engine": r.Engine(), "pool": true})
		r.fillPoolAsync()
		return p, true, nil
	}
}

// reconcilePool sorts the free pool pods and claims found at start: ready,
// current pods are kept up to WarmPool (their agent dialled on claim), the
// rest are deleted with their claims; a claim whose pod was claimed but
// which was not itself relabelled (conch stopped in between) is finished.
// It returns the pods and the claims it handled, by name.
func (r *Runtime) reconcilePool(ctx context.Context, pods []corev1.Pod, claims []corev1.PersistentVolumeClaim) (handledPods, handledClaims map[string]bool, err error) {
	handledPods, handledClaims = map[string]bool{}, map[string]bool{}
	claimedPod := map[string]conch.ConversationKey{}
	var keep []poolEntry
	drop := map[string]string{}
	for i := range pods {
		p := &pods[i]
		if !r.isPoolName(p.Name) {
			continue
		}
		if p.Labels[LabelPool] != "true" {
			if k, ok := r.podKey(p.ObjectMeta); ok {
				claimedPod[p.Name] = k
			}
			continue
		}
		handledPods[p.Name] = true
		switch {
		case p.DeletionTimestamp != nil:
		case p.Labels[LabelProfileHash] != r.hash:
			drop[p.Name] = "warm pool pod of another pod spec"
		case !podReady(p):
			drop[p.Name] = "warm pool pod not running"
		case len(keep) >= r.opts.WarmPool:
			drop[p.Name] = "warm pool larger than sandbox.kubernetes.warm_pool"
		default:
			keep = append(keep, poolEntry{name: p.Name, uid: p.UID})
		}
	}
	kept := map[string]bool{}
	for _, e := range keep {
		kept[e.name] = true
	}
	for i := range claims {
		c := &claims[i]
		if !r.isPoolName(c.Name) || c.Labels[LabelPool] != "true" {
			continue
		}
		handledClaims[c.Name] = true
		if k, ok := claimedPod[c.Name]; ok {
			if _, err := r.cs.CoreV1().PersistentVolumeClaims(r.ns).Patch(ctx, c.Name, types.MergePatchType,
				claimPatch(k, ""), metav1.PatchOptions{}); err != nil {
				return nil, nil, r.apiErr("label claimed workspace "+c.Name, err)
			}
			r.opts.Logger.Info("reconcile: claimed warm-pool workspace labelled", "claim", c.Name, "conversation", k.String())
			continue
		}
		if !kept[c.Name] && drop[c.Name] == "" {
			drop[c.Name] = "warm pool claim without a pod"
		}
	}
	for name, why := range drop {
		r.opts.Logger.Info("reconcile: removing warm pool pod and claim", "name", name, "reason", why)
		if err := r.deleteObjects(ctx, name); err != nil {
			return nil, nil, err
		}
	}
	r.mu.Lock()
	r.pool = append(r.pool, keep...)
	r.mu.Unlock()
	return handledPods, handledClaims, nil
}
