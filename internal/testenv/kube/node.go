//go:build kubernetes

package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"conch/internal/testenv/engine"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// NodeName is the test node's name.
const NodeName = "conch-test-node"

// Node plays the kubelet's part for the test cluster (and the scheduler's
// and the volume controllers' where no kube-controller-manager runs): it
// registers a Ready node, binds unscheduled pods to it, provisions and
// binds claims (a host directory each, reclaimed on delete, owned by the
// pod's fsGroup as the kubelet does), runs init containers then containers
// in the test Docker engine with the pod's confinement (read-only root,
// dropped capabilities, no-new-privileges, user, memory and CPU limits,
// memory emptyDirs as tmpfs; no network at all, stricter than a
// NetworkPolicy), reports pod status, finishes graceful deletions, and
// serves exec over the kubelet's streaming server.
type Node struct {
	c      *Cluster
	docker *client.Client
	// Images maps an image named in a pod to the engine's reference.
	images map[string]string
	dir    string
	port   int
	tb     testing.TB

	mu      sync.Mutex
	started map[types.UID]map[string]string // pod uid → container → engine id
	stopped bool                            // no more logging: the test is over
	// Execs counts exec streams served (tests check the agent's stream is
	// long-lived: one per conversation).
	execs int
}

// StartNode registers the node and starts serving; images maps pod image
// names to images present in eng. Everything it made in the engine goes at
// cleanup.
func (c *Cluster) StartNode(tb testing.TB, eng *engine.Engine, images map[string]string) *Node {
	tb.Helper()
	dc := eng.Client(tb)
	n := &Node{c: c, docker: dc, images: images, dir: filepath.Join(c.Dir, "node"), tb: tb,
		started: map[types.UID]map[string]string{}}
	must(tb, os.MkdirAll(n.dir, 0o755))
	crtPEM, keyPEM, err := c.ca.issue(NodeName, nil, []string{"127.0.0.1", "localhost"})
	must(tb, err)
	cert, err := tls.X509KeyPair(crtPEM, keyPEM)
	must(tb, err)
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.cert)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(tb, err)
	n.port = l.Addr().(*net.TCPAddr).Port
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/", n.serveExec)
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	n.register(tb)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.loop(ctx) }()
	tb.Cleanup(func() {
		n.mu.Lock()
		n.stopped = true
		n.mu.Unlock()
		cancel()
		<-done
		_ = srv.Close()
		n.removeAll()
	})
	return n
}

func (n *Node) logf(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.stopped {
		n.tb.Logf(format, args...)
	}
}

// Execs is the number of exec streams the node has served.
func (n *Node) Execs() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.execs
}

func (n *Node) register(tb testing.TB) {
	ctx := context.Background()
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: map[string]string{"kubernetes.io/hostname": NodeName}}}
	created, err := n.c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	must(tb, err)
	created.Status = corev1.NodeStatus{
		Capacity: rl, Allocatable: rl,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: NodeName}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(n.port)}},
		NodeInfo:        corev1.NodeSystemInfo{KubeletVersion: Version, OperatingSystem: "linux", Architecture: "amd64"},
	}
	_, err = n.c.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	must(tb, err)
}

// loop reconciles every 100 ms until ctx ends.
func (n *Node) loop(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if err := n.sync(ctx); err != nil && ctx.Err() == nil {
			n.logf("test node: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Node) sync(ctx context.Context) error {
	cs := n.c.Client.CoreV1()
	pods, err := cs.Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	claims, err := cs.PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	inUse := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				inUse[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName] = true
			}
		}
		if err := n.syncPod(ctx, p); err != nil {
			n.logf("test node: pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
	for i := range claims.Items {
		if err := n.syncClaim(ctx, &claims.Items[i], inUse); err != nil {
			n.logf("test node: claim %s: %v", claims.Items[i].Name, err)
		}
	}
	return n.reclaim(ctx)
}

func (n *Node) syncPod(ctx context.Context, p *corev1.Pod) error {
	cs := n.c.Client.CoreV1()
	switch {
	case p.Spec.NodeName == "" && p.DeletionTimestamp == nil:
		return cs.Pods(p.Namespace).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: NodeName}}, metav1.CreateOptions{})
	case p.Spec.NodeName != NodeName:
		return nil
	case p.DeletionTimestamp != nil:
		n.stopPod(p.UID)
		zero := int64(0)
		err := cs.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
			Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	n.mu.Lock()
	_, started := n.started[p.UID]
	if !started {
		n.started[p.UID] = map[string]string{}
	}
	n.mu.Unlock()
	if !started {
		go n.runPod(p.DeepCopy())
	}
	return nil
}

// runPod runs p's init containers in order, then its containers, and
// reports the pod's status.
func (n *Node) runPod(p *corev1.Pod) {
	ctx := context.Background()
	fail := func(msg string) {
		n.logf("test node: pod %s: %s", p.Name, msg)
		p.Status.Phase, p.Status.Message = corev1.PodFailed, msg
		n.updateStatus(ctx, p)
	}
	binds, tmpfs, err := n.volumes(ctx, p)
	for tries := 0; err != nil && tries < 300; tries++ { // a claim may bind a little later
		time.Sleep(100 * time.Millisecond)
		if cur, gerr := n.c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); gerr != nil || cur.UID != p.UID || cur.DeletionTimestamp != nil {
			return
		}
		binds, tmpfs, err = n.volumes(ctx, p)
	}
	if err != nil {
		fail(err.Error())
		return
	}
	now := metav1.Now()
	p.Status.StartTime = &now
	if !n.pullImages(ctx, p) {
		return
	}
	for _, c := range p.Spec.InitContainers {
		id, err := n.runContainer(ctx, p, c, binds, tmpfs)
		if err != nil {
			fail(fmt.Sprintf("init container %s: %v", c.Name, err))
			return
		}
		res := n.docker.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		var code int64
		select {
		case r := <-res.Result:
			code = r.StatusCode
		case err := <-res.Error:
			fail(fmt.Sprintf("init container %s: wait: %v", c.Name, err))
			return
		}
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ContainerID: "docker://" + id,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: "Completed", FinishedAt: metav1.Now()}}})
		if code != 0 {
			fail(fmt.Sprintf("init container %s exited %d: %s", c.Name, code, n.logsOf(ctx, id)))
			return
		}
	}
	for _, c := range p.Spec.Containers {
		id, err := n.runContainer(ctx, p, c, binds, tmpfs)
		if err != nil {
			fail(fmt.Sprintf("container %s: %v", c.Name, err))
			return
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ContainerID: "docker://" + id, Ready: true, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}})
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.PodIP = "127.0.0.1", "127.0.0.1"
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	}
	n.updateStatus(ctx, p)
}

// pullImages makes every image of p present in the engine, pulling what
// it lacks from its registry as a kubelet would (every pull policy is
// IfNotPresent here; images mapped by StartNode are never pulled). While
// one cannot be pulled the pod stays Pending with that container waiting,
// ErrImagePull then ImagePullBackOff and the engine's error, retried every
// second until the pod is deleted (false).
func (n *Node) pullImages(ctx context.Context, p *corev1.Pod) bool {
	all := append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	for tries := 0; ; tries++ {
		var failed *corev1.Container
		var ferr error
		for i := range all {
			if err := n.pull(ctx, p, all[i].Image); err != nil {
				failed, ferr = &all[i], err
				break
			}
		}
		if failed == nil {
			p.Status.InitContainerStatuses, p.Status.ContainerStatuses = nil, nil
			return true
		}
		reason := "ErrImagePull"
		if tries > 0 {
			reason = "ImagePullBackOff"
		}
		st := corev1.ContainerStatus{Name: failed.Name, Image: failed.Image, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: ferr.Error()}}}
		p.Status.Phase = corev1.PodPending
		p.Status.InitContainerStatuses, p.Status.ContainerStatuses = nil, nil
		if slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == failed.Name }) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{st}
		} else {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
		}
		if tries == 0 {
			n.logf("test node: pod %s: %s: %v", p.Name, reason, ferr)
		}
		n.updateStatus(ctx, p)
		time.Sleep(time.Second)
		if cur, err := n.c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); err != nil || cur.UID != p.UID || cur.DeletionTimestamp != nil {
			return false
		}
	}
}

// pull makes image present in the engine, with the login p's
// imagePullSecrets hold for its registry, as a kubelet does.
func (n *Node) pull(ctx context.Context, p *corev1.Pod, image string) error {
	if m, ok := n.images[image]; ok {
		image = m
	}
	if _, err := n.docker.ImageInspect(ctx, image); err == nil {
		return nil
	}
	auth, err := n.pullAuth(ctx, p, image)
	if err != nil {
		return err
	}
	res, err := n.docker.ImagePull(ctx, image, client.ImagePullOptions{RegistryAuth: auth})
	if err != nil {
		return err
	}
	defer res.Close()
	return res.Wait(ctx)
}

// pullAuth is the engine's X-Registry-Auth for image's registry from the
// first of p's imagePullSecrets (kubernetes.io/dockerconfigjson) naming
// it; "" when none does.
func (n *Node) pullAuth(ctx context.Context, p *corev1.Pod, image string) (string, error) {
	host, _, _ := strings.Cut(image, "/")
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return "", nil
	}
	for _, ref := range p.Spec.ImagePullSecrets {
		sec, err := n.c.Client.CoreV1().Secrets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("image pull secret %s: %w", ref.Name, err)
		}
		var cfg struct {
			Auths map[string]struct {
				Auth string `json:"auth"`
			} `json:"auths"`
		}
		if err := json.Unmarshal(sec.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			return "", fmt.Errorf("image pull secret %s: %w", ref.Name, err)
		}
		a, ok := cfg.Auths[host]
		if !ok {
			continue
		}
		up, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return "", fmt.Errorf("image pull secret %s: %w", ref.Name, err)
		}
		u, pw, _ := strings.Cut(string(up), ":")
		b, _ := json.Marshal(map[string]string{"username": u, "password": pw, "serveraddress": host})
		return base64.URLEncoding.EncodeToString(b), nil
	}
	return "", nil
}

// updateStatus writes p's status, on the pod's current version.
func (n *Node) updateStatus(ctx context.Context, p *corev1.Pod) {
	pods := n.c.Client.CoreV1().Pods(p.Namespace)
	for range 5 {
		cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || cur.UID != p.UID {
			return
		}
		cur.Status = p.Status
		if _, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil || apierrors.IsNotFound(err) {
			return
		} else if !apierrors.IsConflict(err) {
			n.logf("test node: pod %s status: %v", p.Name, err)
			return
		}
	}
}

func (n *Node) logsOf(ctx context.Context, id string) string {
	rc, err := n.docker.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var b bytes.Buffer
	_, _ = stdcopy.StdCopy(&b, &b, io.LimitReader(rc, 4096))
	return strings.TrimSpace(b.String())
}

// volumes maps the pod's volumes to engine binds (volume name → host dir)
// and tmpfs options (memory emptyDirs).
func (n *Node) volumes(ctx context.Context, p *corev1.Pod) (map[string]string, map[string]string, error) {
	binds, tmpfs := map[string]string{}, map[string]string{}
	gid := int64(-1)
	if sc := p.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		gid = *sc.FSGroup
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			pvc, err := n.c.Client.CoreV1().PersistentVolumeClaims(p.Namespace).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
			if err != nil {
				return nil, nil, fmt.Errorf("claim %s: %w", v.PersistentVolumeClaim.ClaimName, err)
			}
			if pvc.Status.Phase != corev1.ClaimBound {
				return nil, nil, fmt.Errorf("claim %s is %s", pvc.Name, pvc.Status.Phase)
			}
			dir := n.pvDir(pvc.Spec.VolumeName)
			if gid >= 0 { // fsGroup: group-owned, group-writable, setgid, as the kubelet does
				if err := os.Chown(dir, -1, int(gid)); err != nil {
					return nil, nil, err
				}
				if err := os.Chmod(dir, 0o2775); err != nil {
					return nil, nil, err
				}
			}
			binds[v.Name] = dir
		case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
			opt := "mode=1777"
			if v.EmptyDir.SizeLimit != nil {
				opt += ",size=" + strconv.FormatInt(v.EmptyDir.SizeLimit.Value(), 10)
			}
			tmpfs[v.Name] = opt
		case v.EmptyDir != nil:
			dir := filepath.Join(n.dir, "pods", string(p.UID), "volumes", v.Name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, nil, err
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, nil, err
			}
			binds[v.Name] = dir
		default:
			return nil, nil, fmt.Errorf("volume %s: only claims and emptyDirs are supported by the test node", v.Name)
		}
	}
	return binds, tmpfs, nil
}

// runContainer creates and starts one container with the pod's confinement.
func (n *Node) runContainer(ctx context.Context, p *corev1.Pod, c corev1.Container, binds, tmpfs map[string]string) (string, error) {
	img := c.Image
	if m, ok := n.images[img]; ok {
		img = m
	}
	sc := &corev1.SecurityContext{}
	if c.SecurityContext != nil {
		sc = c.SecurityContext
	}
	psc := p.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	uid, gid := sc.RunAsUser, sc.RunAsGroup
	if uid == nil {
		uid = psc.RunAsUser
	}
	if gid == nil {
		gid = psc.RunAsGroup
	}
	cfg := &container.Config{Image: img, Entrypoint: c.Command, Cmd: c.Args, WorkingDir: c.WorkingDir,
		Labels: map[string]string{"conch.test-node": NodeName, "io.kubernetes.pod.uid": string(p.UID)}}
	if uid != nil {
		cfg.User = strconv.FormatInt(*uid, 10)
		if gid != nil {
			cfg.User += ":" + strconv.FormatInt(*gid, 10)
		}
	}
	if sc.RunAsNonRoot != nil && *sc.RunAsNonRoot || psc.RunAsNonRoot != nil && *psc.RunAsNonRoot {
		if uid == nil || *uid == 0 {
			return "", errors.New("runAsNonRoot without a non-zero runAsUser (CreateContainerConfigError)")
		}
	}
	for _, e := range c.Env {
		cfg.Env = append(cfg.Env, e.Name+"="+e.Value)
	}
	hc := &container.HostConfig{NetworkMode: "none", Tmpfs: map[string]string{}}
	hc.ReadonlyRootfs = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
	}
	if sc.Capabilities != nil {
		for _, d := range sc.Capabilities.Drop {
			hc.CapDrop = append(hc.CapDrop, string(d))
		}
	}
	if psc.FSGroup != nil {
		hc.GroupAdd = []string{strconv.FormatInt(*psc.FSGroup, 10)}
	}
	if m := c.Resources.Limits.Memory(); !m.IsZero() {
		hc.Memory = m.Value()
	}
	if cpu := c.Resources.Limits.Cpu(); !cpu.IsZero() {
		hc.NanoCPUs = cpu.MilliValue() * 1e6
	}
	for _, m := range c.VolumeMounts {
		if opt, ok := tmpfs[m.Name]; ok {
			hc.Tmpfs[m.MountPath] = opt
			continue
		}
		dir, ok := binds[m.Name]
		if !ok {
			return "", fmt.Errorf("mount of unknown volume %s", m.Name)
		}
		b := dir + ":" + m.MountPath
		if m.ReadOnly {
			b += ":ro"
		}
		hc.Binds = append(hc.Binds, b)
	}
	name := "k8s_" + c.Name + "_" + p.Name + "_" + p.Namespace + "_" + string(p.UID)[:8]
	res, err := n.docker.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	if m := n.started[p.UID]; m != nil {
		m[c.Name] = res.ID
	}
	n.mu.Unlock()
	if _, err := n.docker.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return "", err
	}
	return res.ID, nil
}

func (n *Node) stopPod(uid types.UID) {
	n.mu.Lock()
	ids := n.started[uid]
	delete(n.started, uid)
	n.mu.Unlock()
	for _, id := range ids {
		_, _ = n.docker.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
	}
	_ = os.RemoveAll(filepath.Join(n.dir, "pods", string(uid)))
}

func (n *Node) removeAll() {
	n.mu.Lock()
	uids := make([]types.UID, 0, len(n.started))
	for u := range n.started {
		uids = append(uids, u)
	}
	n.mu.Unlock()
	for _, u := range uids {
		n.stopPod(u)
	}
	pvs, _ := os.ReadDir(filepath.Join(n.dir, "pv"))
	for _, pv := range pvs {
		unmountVolume(n.pvDir(pv.Name()))
	}
}

// ContainerID is the engine id of a pod's container ("" if not running).
func (n *Node) ContainerID(uid types.UID, name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.started[uid][name]
}

func (n *Node) pvDir(pv string) string { return filepath.Join(n.dir, "pv", pv) }

// syncClaim binds a pending claim to a new host-directory volume, and
// lets a deleted claim go once no pod uses it (pvc-protection).
func (n *Node) syncClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim, inUse map[string]bool) error {
	cs := n.c.Client.CoreV1()
	if pvc.DeletionTimestamp != nil {
		if inUse[pvc.Namespace+"/"+pvc.Name] {
			return nil
		}
		var keep []string
		for _, f := range pvc.Finalizers {
			if f != "kubernetes.io/pvc-protection" {
				keep = append(keep, f)
			}
		}
		if len(keep) == len(pvc.Finalizers) {
			return nil
		}
		pvc.Finalizers = keep
		_, err := cs.PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		return nil
	}
	pvName := "pv-" + string(pvc.UID)
	if pvc.Spec.VolumeName == "" {
		dir := n.pvDir(pvName)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// A file system of its own, of the claim's size, as a CSI
		// provisioner's volume is (a tmpfs: the node is a test's).
		if size := pvc.Spec.Resources.Requests.Storage().Value(); size > 0 {
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", dir).CombinedOutput(); err != nil {
				return fmt.Errorf("the claim's volume: mount: %v: %s", err, out)
			}
		}
	}
	return bindHostPath(ctx, cs, pvc, pvName, n.pvDir(pvName), corev1.PersistentVolumeReclaimDelete)
}

// bindHostPath does what a volume controller and a provisioner would for
// pvc: a hostPath volume name at dir (made by the caller) for a claim not
// yet given one, the claim pointed at it, and the claim marked bound.
func bindHostPath(ctx context.Context, cs corev1client.CoreV1Interface, pvc *corev1.PersistentVolumeClaim, name, dir string, reclaim corev1.PersistentVolumeReclaimPolicy) error {
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if pvc.Spec.VolumeName == "" {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: pvc.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: reclaim,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			},
		}
		if pvc.Spec.StorageClassName != nil {
			pv.Spec.StorageClassName = *pvc.Spec.StorageClassName
		}
		if _, err := cs.PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		pvc.Spec.VolumeName = name
		upd, err := cs.PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		pvc = upd
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	_, err := cs.PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	return err
}

// reclaim deletes volumes whose claim is gone, with their directories.
func (n *Node) reclaim(ctx context.Context) error {
	cs := n.c.Client.CoreV1()
	pvs, err := cs.PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, pv := range pvs.Items {
		if pv.DeletionTimestamp != nil && len(pv.Finalizers) > 0 { // pv-protection: no controller here to release it
			pv.Finalizers = nil
			if _, err := cs.PersistentVolumes().Update(ctx, &pv, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return err
			}
			continue
		}
		ref := pv.Spec.ClaimRef
		if ref == nil {
			continue
		}
		cur, err := cs.PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err == nil && cur.UID == ref.UID {
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := cs.PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		unmountVolume(n.pvDir(pv.Name))
		_ = os.RemoveAll(n.pvDir(pv.Name))
	}
	return nil
}

// unmountVolume unmounts a claim's volume (if it is mounted).
func unmountVolume(dir string) {
	if exec.Command("mountpoint", "-q", dir).Run() == nil {
		_ = exec.Command("umount", dir).Run()
	}
}

// PVDir is the host directory behind a claim's volume ("" if unbound).
func (n *Node) PVDir(ctx context.Context, namespace, claim string) string {
	pvc, err := n.c.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil || pvc.Spec.VolumeName == "" {
		return ""
	}
	return n.pvDir(pvc.Spec.VolumeName)
}

// serveExec is the kubelet's /exec/{namespace}/{pod}/{container} (and
// /exec/{namespace}/{pod}/{uid}/{container}) endpoint.
func (n *Node) serveExec(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/exec/"), "/")
	if len(parts) != 3 && len(parts) != 4 {
		http.Error(w, "want /exec/namespace/pod/container", http.StatusNotFound)
		return
	}
	ns, pod, ctr := parts[0], parts[1], parts[len(parts)-1]
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p, err := n.c.Client.CoreV1().Pods(ns).Get(req.Context(), pod, metav1.GetOptions{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	n.mu.Lock()
	n.execs++
	n.mu.Unlock()
	remotecommand.ServeExec(w, req, &executor{n: n, uid: p.UID}, pod+"/"+ns, string(p.UID), ctr,
		req.URL.Query()["command"], opts, 4*time.Hour, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

type executor struct {
	n   *Node
	uid types.UID
}

// ExecInContainer runs cmd in the pod's container through the engine.
func (e *executor) ExecInContainer(ctx context.Context, _ string, _ string, ctr string, cmd []string, in io.Reader,
	out, errw io.WriteCloser, tty bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	id := e.n.ContainerID(e.uid, ctr)
	if id == "" {
		return fmt.Errorf("container %s of pod %s is not running", ctr, e.uid)
	}
	ex, err := e.n.docker.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: cmd, AttachStdin: in != nil,
		AttachStdout: out != nil, AttachStderr: errw != nil, TTY: tty})
	if err != nil {
		return err
	}
	hr, err := e.n.docker.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: tty})
	if err != nil {
		return err
	}
	defer hr.Close()
	if in != nil {
		go func() {
			_, _ = io.Copy(hr.Conn, in)
			_ = hr.CloseWrite()
		}()
	}
	if out == nil {
		out = nopCloser{io.Discard}
	}
	if errw == nil {
		errw = nopCloser{io.Discard}
	}
	done := make(chan error, 1)
	go func() {
		var err error
		if tty {
			_, err = io.Copy(out, hr.Reader)
		} else {
			_, err = stdcopy.StdCopy(out, errw, hr.Reader)
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		hr.Close()
		<-done
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	st, err := e.n.docker.ExecInspect(context.Background(), ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return err
	}
	if st.ExitCode != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", st.ExitCode), Code: st.ExitCode}
	}
	return nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// AgentImage imports an image holding only bin at /conch (mode 0755) into
// eng, as conch's own image holds its static binary, and returns its
// reference (content-addressed).
func AgentImage(tb testing.TB, eng *engine.Engine, bin string) string {
	tb.Helper()
	data, err := os.ReadFile(bin)
	must(tb, err)
	sum := sha256.Sum256(data)
	ref := "conch-agent-test:" + hex.EncodeToString(sum[:])[:16]
	dc := eng.Client(tb)
	ctx := context.Background()
	if _, err := dc.ImageInspect(ctx, ref); err == nil {
		return ref
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must(tb, tw.WriteHeader(&tar.Header{Name: "conch", Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}))
	_, err = tw.Write(data)
	must(tb, err)
	must(tb, tw.Close())
	res, err := dc.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	must(tb, err)
	_, _ = io.Copy(io.Discard, res)
	_ = res.Close()
	return ref
}

func ptr[T any](v T) *T { return &v }
