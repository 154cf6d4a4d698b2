//go:build kubernetes

package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/remotecommand"
)

// `conch doctor`'s probes: two short-lived pods with a sandbox pod's spec
// (conch's init container, the sandbox image, the same confinement, so Pod
// Security restricted admits them) show that a node pulls and starts the
// images, and, with a listener in one and a dial from the other, whether
// the CNI enforces the instance's deny-all NetworkPolicy.

// LabelProbe marks a probe pod. Probe pods carry the instance label (the
// deny-all policy selects by it) but are never sandboxes: every listing of
// the runtime (Reconcile, Sandboxes, the warm pool) leaves them out.
const LabelProbe = "conch.probe"

const (
	probePort = 7411
	// probeDeadline stops a probe pod left behind (doctor killed): its
	// kubelet ends it; the next probe deletes what is older than probeStale.
	probeDeadline = 600
	probeStale    = 15 * time.Minute
	// policyWait is how long a dial may still get through after the
	// policy selected the listener's pod before the policy counts as not
	// enforced (Calico and Cilium apply a new selection within seconds).
	policyWait = 15 * time.Second
)

// waitReasons are the container waiting reasons a probe reports at once:
// a kubelet retries them, but they do not pass by waiting.
var waitReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
	"CrashLoopBackOff": true, "PreCreateHookError": true, "PreStartHookError": true,
}

// Probe is one run of the probes: its pods, deleted by Close.
type Probe struct {
	r    *Runtime
	run  string
	pods []*corev1.Pod // running, in creation order: the listener's, the dialer's
	// Node is where the first pod ran; Took how long both took to run.
	Node string
	Took time.Duration
	once sync.Once
}

// StartProbe deletes probe pods left behind, then starts two probe pods and
// waits (StartTimeout at most) until their sandbox containers run. An
// error names the pod's reason (ErrImagePull, ImagePullBackOff,
// CreateContainerError, Unschedulable, …); the pods are deleted then.
// Otherwise Close deletes them.
func (r *Runtime) StartProbe(ctx context.Context) (*Probe, error) {
	r.removeStaleProbes(ctx)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	p := &Probe{r: r, run: hex.EncodeToString(b)}
	start := r.opts.Now()
	for _, role := range []string{"listen", "dial"} {
		pod, err := r.cs.CoreV1().Pods(r.ns).Create(ctx, r.probePod(p.run, role), metav1.CreateOptions{})
		if err != nil {
			p.Close()
			return nil, r.apiErr("create probe pod", err)
		}
		p.pods = append(p.pods, pod)
	}
	// The first failure ends the other wait: it is the one reported.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(p.pods))
	running := make([]*corev1.Pod, len(p.pods))
	var wg sync.WaitGroup
	for i := range p.pods {
		wg.Go(func() {
			if running[i], errs[i] = r.waitProbe(wctx, p.pods[i]); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled) && ctx.Err() == nil) {
			first = err
		}
	}
	if first != nil {
		p.Close()
		return nil, first
	}
	p.pods = running
	p.Node, p.Took = p.pods[0].Spec.NodeName, r.opts.Now().Sub(start)
	return p, nil
}

// probePod is a sandbox pod's spec for a probe: conch's init container, the
// sandbox image, the same confinement; an emptyDir for the workspace, small
// Guaranteed resources, no restarts and a deadline.
func (r *Runtime) probePod(run, role string) *corev1.Pod {
	name := "conch-probe-" + hashOf(6, r.opts.InstanceID) + "-" + run + "-" + role
	ps := r.spec.podSpec(name)
	for i := range ps.Volumes {
		if ps.Volumes[i].Name == "workspace" {
			ps.Volumes[i].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: resource.NewQuantity(16<<20, resource.BinarySI)}}
		}
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(100, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(128<<20, resource.BinarySI),
	}
	small := corev1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()}
	ps.InitContainers[0].Resources = small
	ps.Containers[0].Resources = *small.DeepCopy()
	ps.RestartPolicy = corev1.RestartPolicyNever
	ps.ActiveDeadlineSeconds = ptr(int64(probeDeadline))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			LabelInstance: r.spec.instance, LabelProbe: "true", LabelProbe + "-run": run}},
		Spec: ps,
	}
}

// removeStaleProbes deletes probe pods of the instance older than
// probeStale (a doctor killed before it could); errors are only logged.
func (r *Runtime) removeStaleProbes(ctx context.Context) {
	l, err := r.cs.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{
		LabelSelector: LabelInstance + "=" + r.spec.instance + "," + LabelProbe + "=true"})
	if err != nil {
		r.opts.Logger.Warn("list probe pods", "err", err)
		return
	}
	for _, p := range l.Items {
		if r.opts.Now().Sub(p.CreationTimestamp.Time) > probeStale {
			if err := r.deletePodNoWait(ctx, p.Name); err != nil {
				r.opts.Logger.Warn("delete a stale probe pod", "pod", p.Name, "err", err)
			}
		}
	}
}

// waitProbe watches p until its sandbox container runs; a failed pod, a
// container waiting for a reason that does not pass (waitReasons) and
// StartTimeout end it with the pod's reason.
func (r *Runtime) waitProbe(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	pods := r.cs.CoreV1().Pods(r.ns)
	last := p
	for {
		if podReady(last) {
			return last, nil
		}
		if err := probeFailure(last); err != nil {
			return nil, err
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", p.Name).String(),
			ResourceVersion: last.ResourceVersion,
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, r.probeTimeout(ctx, last)
			}
			return nil, r.apiErr("watch probe pod "+p.Name, err)
		}
		settled := false
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return nil, fmt.Errorf("probe pod %s was deleted while starting", p.Name)
			}
			np, ok := ev.Object.(*corev1.Pod)
			if !ok { // a watch error (an expired version): read the pod again below
				break
			}
			last = np
			if podReady(np) || probeFailure(np) != nil {
				settled = true
				break
			}
		}
		w.Stop()
		if settled {
			continue
		}
		if ctx.Err() != nil {
			return nil, r.probeTimeout(ctx, last)
		}
		np, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return nil, r.probeTimeout(ctx, last)
			}
			return nil, r.apiErr("read probe pod "+p.Name, err)
		}
		last = np
	}
}

// probeFailure is the reason p cannot start, or nil while it may.
func probeFailure(p *corev1.Pod) error {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return fmt.Errorf("probe pod %s %s: %s", p.Name, strings.ToLower(string(p.Status.Phase)), podProblem(p))
	}
	for _, st := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil && waitReasons[w.Reason] {
			return fmt.Errorf("probe pod %s: container %s (image %s) waiting: %s: %s", p.Name, st.Name, st.Image, w.Reason, w.Message)
		}
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Errorf("probe pod %s: container %s (image %s) exited %d: %s %s", p.Name, st.Name, st.Image, t.ExitCode, t.Reason, t.Message)
		}
	}
	return nil
}

func (r *Runtime) probeTimeout(ctx context.Context, p *corev1.Pod) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("probe pod %s did not start within %s: %s", p.Name, r.opts.StartTimeout, podProblem(p))
	}
	return ctx.Err()
}

// Close deletes the probe pods (also when the caller's context ended: the
// deletion gets its own 30 seconds).
func (p *Probe) Close() {
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, pod := range p.pods {
			if pod == nil {
				continue
			}
			// Graceful (the pod's 5 s): a forced deletion would leave the
			// kubelet to find the containers on its own.
			err := p.r.cs.CoreV1().Pods(p.r.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				p.r.opts.Logger.Warn("delete probe pod (it stops at its deadline)", "pod", pod.Name, "err", err)
			}
		}
	})
}

// NetVerdict is what the network probe found.
type NetVerdict int

const (
	// NetUnknown: it could not tell (no pod network, another policy in
	// the way, an agent too old to probe); Detail says why.
	NetUnknown NetVerdict = iota
	// NetEnforced: a pod reachable before the deny-all policy selected it
	// was unreachable after.
	NetEnforced
	// NetNotEnforced: it stayed reachable for policyWait after.
	NetNotEnforced
)

// NetResult is the network probe's finding.
type NetResult struct {
	Verdict NetVerdict
	Detail  string
}

// NetworkPolicy tells whether the cluster enforces the instance's deny-all
// policy: a listener in the first probe pod, not yet selected by the
// policy, must be reachable from the second (else the test cannot tell);
// then the first pod gets the sandbox label, so the policy selects it, and
// the dial must fail within policyWait.
func (p *Probe) NetworkPolicy(ctx context.Context) NetResult {
	r := p.r
	target, dialer := p.pods[0], p.pods[1]
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	lis, err := p.listen(lctx, target.Name)
	if err != nil {
		return NetResult{NetUnknown, err.Error()}
	}
	if len(lis.addrs) == 0 {
		return NetResult{NetUnknown, "pods get no network: the probe pod has no interface but loopback"}
	}
	ip := target.Status.PodIP
	if ip == "" {
		ip = lis.addrs[0]
	}
	addr := ip + ":" + strconv.Itoa(probePort)
	if ok, why, err := p.dial(ctx, dialer.Name, addr); err != nil {
		return NetResult{NetUnknown, err.Error()}
	} else if !ok {
		return NetResult{NetUnknown, fmt.Sprintf("a pod cannot reach another even before conch's policy selects it (%s): "+
			"another NetworkPolicy in namespace %s, or no pod network between them", why, r.ns)}
	}
	patch := []byte(`{"metadata":{"labels":{"` + LabelSandbox + `":"true"}}}`)
	if _, err := r.cs.CoreV1().Pods(r.ns).Patch(ctx, target.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return NetResult{NetUnknown, r.apiErr("label probe pod "+target.Name, err).Error()}
	}
	selected := r.opts.Now()
	for {
		ok, why, err := p.dial(ctx, dialer.Name, addr)
		if err != nil {
			return NetResult{NetUnknown, err.Error()}
		}
		took := r.opts.Now().Sub(selected).Round(100 * time.Millisecond)
		if !ok {
			if lis.ended() {
				return NetResult{NetUnknown, "the probe listener ended before the test could tell"}
			}
			return NetResult{NetEnforced, fmt.Sprintf("pod %s reached %s before policy %s selected it, and not %s after (%s)",
				dialer.Name, addr, policyName(r.opts.InstanceID), took, why)}
		}
		if took >= policyWait {
			return NetResult{NetNotEnforced, fmt.Sprintf("pod %s still reached %s %s after policy %s selected it",
				dialer.Name, addr, took, policyName(r.opts.InstanceID))}
		}
		select {
		case <-ctx.Done():
			return NetResult{NetUnknown, ctx.Err().Error()}
		case <-time.After(time.Second):
		}
	}
}

// listener is the probe listener's exec.
type listener struct {
	addrs []string
	done  chan struct{}
}

func (l *listener) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// listen starts `conch sandbox-probe listen` in pod over an exec that
// lasts until ctx ends, and returns once it listens.
func (p *Probe) listen(ctx context.Context, pod string) (*listener, error) {
	ex, err := p.r.executor(pod, SandboxContainer, []string{AgentDir + "/" + agentName, "sandbox-probe", "listen", strconv.Itoa(probePort)}, true)
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &lockedBuf{}
	l := &listener{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: stderr})
		_ = outW.CloseWithError(fmt.Errorf("probe listener: %v", err))
	}()
	go func() {
		<-ctx.Done()
		_ = inW.Close()
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done(): // nobody reads any more
			}
		}
		close(lines)
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			switch {
			case !ok:
				return nil, fmt.Errorf("the probe listener in %s ended: %s (an agent_image older than this conch has no sandbox-probe)",
					pod, strings.TrimSpace(stderr.String()))
			case strings.HasPrefix(line, "addrs"):
				if a := strings.TrimSpace(strings.TrimPrefix(line, "addrs")); a != "" {
					l.addrs = strings.Split(a, ",")
				}
			case line == "listening":
				return l, nil
			}
		case <-timeout:
			return nil, fmt.Errorf("the probe listener in %s did not start within 30s", pod)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// dial runs `conch sandbox-probe dial addr` in pod: ok when it reached the
// listener, else why not; err when the probe itself could not run.
func (p *Probe) dial(ctx context.Context, pod, addr string) (ok bool, why string, err error) {
	ex, err := p.r.executor(pod, SandboxContainer, []string{AgentDir + "/" + agentName, "sandbox-probe", "dial", addr}, false)
	if err != nil {
		return false, "", err
	}
	var out, stderr bytes.Buffer
	serr := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &stderr})
	s := strings.TrimSpace(out.String())
	switch {
	case s == "reached":
		return true, "", nil
	case strings.HasPrefix(s, "unreached:"):
		return false, strings.TrimSpace(strings.TrimPrefix(s, "unreached:")), nil
	}
	return false, "", fmt.Errorf("the probe dial in %s failed: %v %s (an agent_image older than this conch has no sandbox-probe)",
		pod, serr, strings.TrimSpace(stderr.String()))
}

// lockedBuf is a buffer written from the exec's goroutine.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
