//go:build kubernetes

package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"conch"
	"conch/sandbox/sandboxd"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Runtime manages the sandbox pods of one conch instance in one namespace.
type Runtime struct {
	opts    Options
	spec    spec
	hash    string
	rest    *rest.Config
	cs      k8s.Interface
	ns      string
	version string

	mu     sync.Mutex
	boxes  map[string]*box
	closed bool

	// The warm pool: ready, unclaimed pods; assigned maps a conversation
	// key to the pool pod (and claim) name it was given.
	pool        []poolEntry
	poolFilling bool
	assigned    map[string]string
	scanned     bool // assigned was filled from the cluster

	skillsHash skillsHash // the host's skills, hashed at most once a second
	metrics    *metricsReader

	life context.Context // ends at Close: the janitor
	stop context.CancelFunc
	wg   sync.WaitGroup
}

var (
	_ conch.Runtime      = (*Runtime)(nil)
	_ conch.SandboxAdmin = (*Runtime)(nil)
	_ conch.Releaser     = (*Runtime)(nil)
)

// box is one conversation's sandbox as the runtime tracks it.
type box struct {
	key  conch.ConversationKey
	name string
	// lock is held while the pod is created, waited for or deleted.
	lock chan struct{}

	// verified is when (UnixNano) the pod was last seen running; 0 after
	// the stream to it broke.
	verified atomic.Int64

	// Guarded by lock.
	uid      string
	client   *sandboxd.Client
	released bool

	// skills is what the pod's skills volume holds; guarded by lock.
	skills skillsSent

	// idle is set when the janitor deleted the pod for idleness (not again
	// until the next use).
	idle bool

	// Guarded by Runtime.mu.
	lastUse time.Time
	active  int // calls in flight
}

// RESTConfig loads the client configuration of o: o.REST, else the
// kubeconfig named, else in-cluster, else the default loading rules.
func RESTConfig(o Options) (*rest.Config, error) {
	if o.REST != nil {
		return rest.CopyConfig(o.REST), nil
	}
	if o.Kubeconfig == "" && o.Context == "" {
		if c, err := rest.InClusterConfig(); err == nil {
			return c, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: o.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	return c, nil
}

// New connects to the cluster, checks that the namespace can be used and
// makes sure the instance's deny-all NetworkPolicy is in place.
func New(ctx context.Context, o Options) (*Runtime, error) {
	if err := o.defaults(); err != nil {
		return nil, &conch.Error{Kind: conch.KindInvalid, Err: err}
	}
	rc, err := RESTConfig(o)
	if err != nil {
		return nil, &conch.Error{Kind: conch.KindInvalid, Err: err}
	}
	cs, err := newClientset(rc)
	if err != nil {
		return nil, &conch.Error{Kind: conch.KindInvalid, Err: err}
	}
	r := &Runtime{opts: o, rest: rc, cs: cs, ns: o.Namespace, boxes: map[string]*box{}, assigned: map[string]string{},
		spec: spec{o: o, instance: InstanceLabel(o.InstanceID)}}
	r.hash = r.spec.profileHash()
	if r.metrics, err = newMetricsReader(rc, cs.Discovery(), r.ns, o.Now); err != nil {
		return nil, &conch.Error{Kind: conch.KindInvalid, Err: err}
	}
	if v, err := cs.Discovery().ServerVersion(); err != nil {
		return nil, r.apiErr("reach the API server", err)
	} else {
		r.version = v.GitVersion
	}
	if _, err := cs.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: r.selector()}); err != nil {
		return nil, r.apiErr("list sandbox pods in namespace "+r.ns, err)
	}
	if err := r.ensurePolicy(ctx); err != nil {
		return nil, err
	}
	r.life, r.stop = context.WithCancel(context.Background())
	if every := r.sweepEvery(); every > 0 {
		r.wg.Add(1)
		go r.janitor(every)
	}
	return r, nil
}

// Engine names the backend and the API server's version.
func (r *Runtime) Engine() string { return "kubernetes " + r.version }

// ServerVersion is the API server's version (v1.37.2).
func (r *Runtime) ServerVersion() string { return r.version }

// Namespace is where the sandboxes live.
func (r *Runtime) Namespace() string { return r.ns }

// selector selects the instance's sandbox pods and claims (not doctor's probe pods).
func (r *Runtime) selector() string { return LabelInstance + "=" + r.spec.instance + ",!" + LabelProbe }

// apiErr classifies an API error: unreachable and server trouble are
// KindUnavailable, refusals (RBAC) KindPermission, bad requests KindInvalid.
func (r *Runtime) apiErr(what string, err error) error {
	if err == nil {
		return nil
	}
	kind := conch.KindUnavailable
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("kubernetes: %s: %w", what, err)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		kind = conch.KindAuth
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		kind = conch.KindInvalid
	case apierrors.IsNotFound(err):
		kind = conch.KindNotFound
	}
	return &conch.Error{Kind: kind, Err: fmt.Errorf("kubernetes: %s: %w", what, err)}
}

func (r *Runtime) audit(ctx context.Context, kind conch.AuditKind, key conch.ConversationKey, detail map[string]any) {
	if err := conch.RecordAudit(ctx, r.opts.Audit, r.opts.Now(), kind, key, detail); err != nil {
		r.opts.Logger.Error("audit event", "kind", kind, "err", err)
	}
}

func (r *Runtime) ensurePolicy(ctx context.Context) error {
	want := r.spec.denyAll()
	np := r.cs.NetworkingV1().NetworkPolicies(r.ns)
	cur, err := np.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := np.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return r.apiErr("create the sandboxes' deny-all network policy", err)
		}
		r.opts.Logger.Info("sandbox network policy created", "namespace", r.ns, "policy", want.Name)
		return nil
	case err != nil:
		return r.apiErr("read the sandboxes' network policy", err)
	}
	cur.Spec = want.Spec
	if _, err := np.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return r.apiErr("update the sandboxes' network policy", err)
	}
	return nil
}

func (r *Runtime) boxFor(key conch.ConversationKey) *box {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.boxes[key.String()]
	if b == nil {
		name := r.assigned[key.String()]
		if name == "" {
			name = PodName(r.opts.InstanceID, key)
		}
		b = &box{key: key, name: name, lock: make(chan struct{}, 1)}
		r.boxes[key.String()] = b
	}
	return b
}

// lockBox returns the conversation's current box with its lock held.
func (r *Runtime) lockBox(ctx context.Context, key conch.ConversationKey) (*box, error) {
	b := r.boxFor(key)
	for {
		select {
		case b.lock <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !b.released {
			return b, nil
		}
		<-b.lock
		b = r.boxFor(key)
	}
}

func (b *box) unlock() { <-b.lock }

func (r *Runtime) checkOpen() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return conch.Errorf(conch.KindUnavailable, "the sandbox runtime is closed")
	}
	return nil
}

// Sandbox returns the conversation's sandbox, creating its claim and pod on
// first use and recreating a pod that is gone, failed or stale (its
// workspace claim kept).
func (r *Runtime) Sandbox(ctx context.Context, key conch.ConversationKey) (conch.Sandbox, error) {
	if key.IsZero() || key.Channel == "" || key.ID == "" {
		return nil, conch.Errorf(conch.KindInvalid, "a sandbox needs a conversation key with a channel and an id")
	}
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	if err := r.loadAssigned(ctx); err != nil {
		return nil, err
	}
	b, err := r.lockBox(ctx, key)
	if err != nil {
		return nil, err
	}
	defer b.unlock()
	if err := r.ensureLocked(ctx, b); err != nil {
		return nil, err
	}
	r.mu.Lock()
	b.lastUse = r.opts.Now()
	r.mu.Unlock()
	return &podSandbox{r: r, key: key, id: b.uid}, nil
}

// ensureLocked makes b's pod exist and run, and b.client talk to it.
func (r *Runtime) ensureLocked(ctx context.Context, b *box) error {
	b.idle = false
	// A pod seen running within verifyEvery, whose stream has not broken
	// since, is used without asking the API server again (one GET per tool
	// call would be the API server's load and its client's rate limit).
	if b.client != nil && r.opts.Now().UnixNano()-b.verified.Load() < int64(verifyEvery) {
		r.syncSkillsLocked(ctx, b)
		return nil
	}
	pods := r.cs.CoreV1().Pods(r.ns)
	p, err := pods.Get(ctx, b.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		p = nil
	case err != nil:
		return r.apiErr("read sandbox pod "+b.name, err)
	}
	if p != nil {
		if reason := r.staleReason(p, b.key); reason != "" {
			r.opts.Logger.Info("replacing sandbox pod", "pod", b.name, "reason", reason)
			if err := r.deletePod(ctx, p); err != nil {
				return err
			}
			p = nil
		}
	}
	if p != nil && b.client != nil && string(p.UID) == b.uid && podReady(p) {
		b.verified.Store(r.opts.Now().UnixNano())
		r.syncSkillsLocked(ctx, b)
		return nil
	}
	b.closeClient()
	if p == nil {
		if p, err = r.createLocked(ctx, b); err != nil {
			return err
		}
	}
	if p, err = r.waitRunning(ctx, p); err != nil {
		return err
	}
	b.uid = string(p.UID)
	b.verified.Store(r.opts.Now().UnixNano())
	if b.client == nil { // a claimed pool pod comes with its stream open
		b.client = r.poolClient(p)
	}
	r.syncSkillsLocked(ctx, b)
	return nil
}

func (b *box) closeClient() {
	b.verified.Store(0)
	if b.client != nil {
		_ = b.client.Close()
		b.client = nil
	}
}

// staleReason says why an existing pod must not be used ("" when it may).
func (r *Runtime) staleReason(p *corev1.Pod, key conch.ConversationKey) string {
	switch {
	case p.Annotations[AnnotationConversation] != key.String():
		return "its name belongs to another conversation"
	case p.DeletionTimestamp != nil:
		return "being deleted"
	case p.Labels[LabelProfileHash] != r.hash:
		return "created with another pod spec"
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		return "pod " + string(p.Status.Phase)
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == SandboxContainer {
			return cs.State.Running != nil
		}
	}
	return false
}

// createLocked creates b's workspace claim (when missing) and pod; a new
// conversation (no claim yet) is given a warm-pool pod when there is one.
func (r *Runtime) createLocked(ctx context.Context, b *box) (*corev1.Pod, error) {
	claims := r.cs.CoreV1().PersistentVolumeClaims(r.ns)
	if _, err := claims.Get(ctx, b.name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if p, ok, err := r.assignFromPool(ctx, b); err != nil || ok {
			return p, err
		}
		if _, err := claims.Create(ctx, r.spec.claim(b.name, b.key), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, r.apiErr("create workspace claim "+b.name, err)
		}
	} else if err != nil {
		return nil, r.apiErr("read workspace claim "+b.name, err)
	}
	p, err := r.cs.CoreV1().Pods(r.ns).Create(ctx, r.spec.pod(b.name, b.key), metav1.CreateOptions{})
	if err != nil {
		return nil, r.apiErr("create sandbox pod "+b.name, err)
	}
	r.opts.Logger.Info("sandbox pod created", "conversation", b.key.String(), "pod", b.name, "namespace", r.ns)
	r.audit(ctx, conch.AuditSandboxCreate, b.key, map[string]any{"pod": b.name, "namespace": r.ns, "claim": b.name,
		"image": r.opts.Image, "engine": r.Engine()})
	return p, nil
}

// waitRunning watches p until its sandbox container runs, it fails, or
// StartTimeout passes (then the pod's last condition is the error).
func (r *Runtime) waitRunning(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	if podReady(p) {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	pods := r.cs.CoreV1().Pods(r.ns)
	last := p
	for {
		w, err := pods.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", p.Name).String(),
			ResourceVersion: last.ResourceVersion,
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, r.startErr(ctx, last)
			}
			return nil, r.apiErr("watch sandbox pod "+p.Name, err)
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				w.Stop()
				return nil, conch.Errorf(conch.KindTransient, "sandbox pod %s was deleted while starting; try again", p.Name)
			case watch.Error:
				continue
			}
			np, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			last = np
			if podReady(np) {
				w.Stop()
				return np, nil
			}
			if np.Status.Phase == corev1.PodFailed {
				w.Stop()
				return nil, conch.Errorf(conch.KindUnavailable, "sandbox pod %s failed: %s", p.Name, podProblem(np))
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil, r.startErr(ctx, last)
		}
		// The watch ended (server timeout): read the pod again and go on.
		np, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return nil, r.startErr(ctx, last)
			}
			return nil, r.apiErr("read sandbox pod "+p.Name, err)
		}
		if last = np; podReady(np) {
			return np, nil
		}
	}
}

func (r *Runtime) startErr(ctx context.Context, p *corev1.Pod) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return conch.Errorf(conch.KindUnavailable, "sandbox pod %s did not start within %s: %s",
			p.Name, r.opts.StartTimeout, podProblem(p))
	}
	return ctx.Err()
}

// podProblem says what holds a pod back, from its conditions and statuses.
func podProblem(p *corev1.Pod) string {
	for _, st := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil && w.Reason != "" {
			return fmt.Sprintf("container %s waiting: %s %s", st.Name, w.Reason, w.Message)
		}
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("container %s exited %d: %s %s", st.Name, t.ExitCode, t.Reason, t.Message)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return fmt.Sprintf("%s: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	if p.Status.Phase == "" {
		return "no status yet"
	}
	return "phase " + string(p.Status.Phase)
}

func (r *Runtime) deletePod(ctx context.Context, p *corev1.Pod) error {
	err := r.cs.CoreV1().Pods(r.ns).Delete(ctx, p.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return r.apiErr("delete sandbox pod "+p.Name, err)
	}
	return r.waitGone(ctx, p.Name, p.UID)
}

// waitGone waits until no pod with that name and uid is left (a new pod of
// the same name cannot be created before).
func (r *Runtime) waitGone(ctx context.Context, name string, uid types.UID) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	for {
		p, err := r.cs.CoreV1().Pods(r.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return r.apiErr("read sandbox pod "+name, err)
		}
		select {
		case <-ctx.Done():
			return conch.Errorf(conch.KindUnavailable, "sandbox pod %s is still being deleted after %s", name, r.opts.StartTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Remove destroys the conversation's pod and its workspace claim.
func (r *Runtime) Remove(ctx context.Context, key conch.ConversationKey) error {
	if key.IsZero() {
		return conch.Errorf(conch.KindInvalid, "no conversation given")
	}
	if err := r.loadAssigned(ctx); err != nil {
		return err
	}
	b, err := r.lockBox(ctx, key)
	if err != nil {
		return err
	}
	defer b.unlock()
	b.closeClient()
	if err := r.removeObjects(ctx, b.name, "removed", key); err != nil {
		return err
	}
	r.releaseLocked(b)
	r.mu.Lock()
	delete(r.assigned, key.String())
	r.mu.Unlock()
	r.opts.Logger.Info("sandbox removed", "conversation", key.String(), "pod", b.name)
	return nil
}

// removeObjects deletes pod and claim called name (a claim in use by a
// terminating pod goes when the pod has: storage-object-in-use protection).
func (r *Runtime) removeObjects(ctx context.Context, name, reason string, key conch.ConversationKey) error {
	if err := r.deleteObjects(ctx, name); err != nil {
		return err
	}
	r.audit(ctx, conch.AuditSandboxRemove, key, map[string]any{"pod": name, "namespace": r.ns, "claim": name,
		"reason": reason, "engine": r.Engine()})
	return nil
}

// deleteObjects deletes pod and claim called name, in the background.
func (r *Runtime) deleteObjects(ctx context.Context, name string) error {
	bg := metav1.DeletePropagationBackground
	err := r.cs.CoreV1().Pods(r.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return r.apiErr("delete sandbox pod "+name, err)
	}
	err = r.cs.CoreV1().PersistentVolumeClaims(r.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return r.apiErr("delete workspace claim "+name, err)
	}
	return nil
}

// Release drops the runtime's connection to the conversation's pod; the
// pod stays (the next Sandbox call reattaches).
func (r *Runtime) Release(ctx context.Context, key conch.ConversationKey) error {
	r.mu.Lock()
	b := r.boxes[key.String()]
	r.mu.Unlock()
	if b == nil {
		return nil
	}
	select {
	case b.lock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer b.unlock()
	b.closeClient()
	r.releaseLocked(b)
	return nil
}

func (r *Runtime) releaseLocked(b *box) {
	b.released = true
	r.mu.Lock()
	if r.boxes[b.key.String()] == b {
		delete(r.boxes, b.key.String())
	}
	r.mu.Unlock()
}

// Close drops every agent connection; pods stay.
func (r *Runtime) Close() error {
	r.stop()
	r.wg.Wait()
	r.mu.Lock()
	r.closed = true
	for _, e := range r.pool { // the pods stay: the next start's pool
		if e.client != nil {
			_ = e.client.Close()
		}
	}
	r.pool = nil
	bs := make([]*box, 0, len(r.boxes))
	for _, b := range r.boxes {
		bs = append(bs, b)
	}
	r.mu.Unlock()
	for _, b := range bs {
		select {
		case b.lock <- struct{}{}:
			b.closeClient()
			b.unlock()
		case <-time.After(5 * time.Second):
			// A pod still starting for a caller: its stream, if it gets one,
			// ends with the process.
			r.opts.Logger.Warn("sandbox runtime closed while a pod was starting", "pod", b.name)
		}
	}
	return nil
}

func (r *Runtime) deletePodNoWait(ctx context.Context, name string) error {
	err := r.cs.CoreV1().Pods(r.ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return r.apiErr("delete sandbox pod "+name, err)
	}
	return nil
}

// forget makes the next use of key's pod ask the API server about it.
func (r *Runtime) forget(key conch.ConversationKey) {
	r.mu.Lock()
	b := r.boxes[key.String()]
	r.mu.Unlock()
	if b != nil {
		b.verified.Store(0)
	}
}

// verifyEvery is how long a pod seen running is trusted without a GET.
const verifyEvery = 5 * time.Second

func newClientset(rc *rest.Config) (*k8s.Clientset, error) {
	rc.UserAgent = "conch"
	if rc.QPS == 0 && rc.Burst == 0 { // client-go's default, 5/s, is for controllers, not a gateway
		rc.QPS, rc.Burst = 50, 100
	}
	return k8s.NewForConfig(rc)
}

// Options returns the options in effect (defaults filled in).
func (r *Runtime) Options() Options { return r.opts }
