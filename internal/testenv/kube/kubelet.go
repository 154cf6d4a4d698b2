//go:build kubernetes

package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"

	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletNode is a REAL node of the test cluster: the kubelet built from
// k8s.io/kubernetes at Version (PrebuildKubelet), registered with the API
// server as system:node:<Name> (Node authorizer, NodeRestriction), running
// pods in containerd (the machine's, with its CRI plugin) through runc, a
// CNI bridge for pod networks. No scheduler and no volume controller run,
// so a binder plays their part: it binds pending pods to the node and
// pending claims to hostPath volumes (a directory each, owned by uid:gid
// 1000 because the kubelet applies no fsGroup to hostPath).
type KubeletNode struct {
	Name string
	Dir  string
	// Containerd is the containerd socket (for ctr in tests).
	Containerd string
}

// This machine's two facts the tier needs (docs/kubernetes.md): the cgroup
// hierarchy is v1, so the kubelet runs with failCgroupV1: false and the
// cgroupfs driver; and root lacks CAP_SYS_RESOURCE here, so the negative
// oom_score_adj the CRI gives pod sandboxes (-998) and Guaranteed
// containers (-997) cannot be written: runc's init fails before it reports
// its pid ("can't get final child's PID from pipe: EOF"). containerd's
// restrict_oom_score_adj clamps them to its own score.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[5]q
    conf_dir = %[6]q
`

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%[1]s
address: %[5]s
port: %[2]d
healthzPort: 0
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[3]q}
authorization: {mode: AlwaysAllow}
podPidsLimit: 128
failSwapOn: false
cgroupsPerQOS: true
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
imageGCHighThresholdPercent: 100
evictionHard: {}
resolvConf: ""
syncFrequency: 5s
nodeStatusUpdateFrequency: 2s
podLogsDir: %[4]q
`

// pauseImage is the pod sandbox image: conch's own static agent as
// `sandbox-init` (keeps the pod's namespaces, reaps), imported under the
// name containerd is configured with (no registry is reachable here).
const pauseImage = "registry.k8s.io/pause:conch-test"

// StartKubelet starts containerd and the kubelet, imports images (names of
// eng's images, as pods name them) into containerd and waits for the node
// to be Ready. Missing containerd, runc or CNI plugins are
// testenv.Missing. Everything stops at cleanup, pods first.
func (c *Cluster) StartKubelet(tb testing.TB, eng *engine.Engine, images ...string) *KubeletNode {
	tb.Helper()
	for _, b := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			testenv.Missing(tb, "containerd", b+" not found (apt-get install containerd)")
		}
	}
	cniDir := ""
	for _, d := range []string{"/opt/cni/bin", "/usr/lib/cni"} {
		if _, err := os.Stat(filepath.Join(d, "bridge")); err == nil {
			cniDir = d
			break
		}
	}
	if cniDir == "" {
		testenv.Missing(tb, "cni", "no CNI bridge plugin (apt-get install containernetworking-plugins)")
	}
	ctx := context.Background()
	bin, err := PrebuildKubelet(ctx)
	must(tb, err)

	rb := make([]byte, 3)
	_, _ = rand.Read(rb)
	suffix := hex.EncodeToString(rb)
	n := &KubeletNode{Name: "kubelet-" + suffix, Dir: filepath.Join(c.Dir, "kubelet-node")}
	for _, d := range []string{"containerd/root", "containerd/state", "cni", "cni-data", "kubelet", "pv"} {
		must(tb, os.MkdirAll(filepath.Join(n.Dir, d), 0o755))
	}
	// Runs last: the kubelet leaves its root dir bind-mounted on itself
	// (and a killed pod its volumes); the cluster's dir goes after this.
	tb.Cleanup(func() { unmountUnder(n.Dir) })
	n.Containerd = filepath.Join(n.Dir, "containerd.sock")
	cfg := fmt.Sprintf(containerdConfig, filepath.Join(n.Dir, "containerd/root"), filepath.Join(n.Dir, "containerd/state"),
		n.Containerd, pauseImage, cniDir, filepath.Join(n.Dir, "cni"))
	must(tb, os.WriteFile(filepath.Join(n.Dir, "containerd.toml"), []byte(cfg), 0o644))
	// A bridge of its own (no masquerading, nothing routed out): the pods
	// get an address, and NetworkPolicy is not enforced (no policy agent).
	bridge := "cnch" + suffix
	cni := fmt.Sprintf(`{"cniVersion":"0.4.0","name":"conch-test","plugins":[{"type":"bridge","bridge":%q,"isGateway":false,"ipMasq":false,`+
		`"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.%d.%d.0/25"}]]}},{"type":"loopback"}]}`,
		bridge, filepath.Join(n.Dir, "cni-data"), 200+int(rb[0])%50, rb[1])
	must(tb, os.WriteFile(filepath.Join(n.Dir, "cni", "10-conch-test.conflist"), []byte(cni), 0o644))
	// The kubelet refuses a loopback node IP, and the API server reaches
	// the kubelet at the node's address: the bridge, made here before the
	// CNI plugin uses it, carries one (a /32: nothing is routed through it).
	nodeIP := fmt.Sprintf("10.%d.%d.250", 200+int(rb[0])%50, rb[1])
	for _, args := range [][]string{{"link", "add", bridge, "type", "bridge"}, {"addr", "add", nodeIP + "/32", "dev", bridge}, {"link", "set", bridge, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			testenv.Missing(tb, "cni", fmt.Sprintf("ip %s: %v: %s", strings.Join(args, " "), err, out))
		}
	}
	tb.Cleanup(func() { _ = exec.Command("ip", "link", "del", bridge).Run() })

	startProc(tb, n.Dir, "containerd", "containerd", "--config", filepath.Join(n.Dir, "containerd.toml"))
	deadline := time.Now().Add(30 * time.Second)
	for n.ctr(tb, nil, "version") != nil {
		if time.Now().After(deadline) {
			tb.Fatal("containerd did not start")
		}
		time.Sleep(200 * time.Millisecond)
	}
	n.importImages(tb, eng, images)

	caFile := filepath.Join(n.Dir, "ca.crt")
	must(tb, os.WriteFile(caFile, c.ca.pem, 0o644))
	kcfg := fmt.Sprintf(kubeletConfig, n.Containerd, freePort(tb), caFile, filepath.Join(n.Dir, "pod-logs"), nodeIP)
	must(tb, os.WriteFile(filepath.Join(n.Dir, "kubelet.yaml"), []byte(kcfg), 0o644))
	kubeconfig := c.Kubeconfig(tb, c.User(tb, "system:node:"+n.Name, "system:nodes"), "")
	startProc(tb, n.Dir, "kubelet", bin, "--config", filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig", kubeconfig, "--root-dir", filepath.Join(n.Dir, "kubelet"),
		"--cert-dir", filepath.Join(n.Dir, "kubelet", "pki"), "--hostname-override", n.Name,
		"--node-ip", nodeIP, "-v", "1")

	bctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); n.bind(bctx, c) }()
	// Runs before the processes stop (cleanups run last first): the pods
	// go through the kubelet, then whatever is left in containerd.
	tb.Cleanup(func() {
		n.teardown(c)
		stop()
		<-done
	})
	n.waitReady(tb, c)
	return n
}

// ctr runs ctr against the node's containerd (namespace k8s.io).
func (n *KubeletNode) ctr(tb testing.TB, stdin io.Reader, args ...string) error {
	cmd := exec.Command("ctr", append([]string{"-a", n.Containerd, "-n", "k8s.io"}, args...)...)
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return nil
}

// importImages copies images from the test engine into containerd, and
// makes the pause image from the agent binary.
func (n *KubeletNode) importImages(tb testing.TB, eng *engine.Engine, images []string) {
	tb.Helper()
	ctx := context.Background()
	dc := eng.Client(tb)
	data, err := os.ReadFile(engine.SandboxdBinary(tb))
	must(tb, err)
	var layer bytes.Buffer
	must(tb, tarOne(&layer, "pause", data))
	res, err := dc.ImageImport(ctx, client.ImageImportSource{Source: &layer, SourceName: "-"}, pauseImage,
		client.ImageImportOptions{Changes: []string{`ENTRYPOINT ["/pause", "sandbox-init"]`}})
	must(tb, err)
	_, _ = io.Copy(io.Discard, res)
	_ = res.Close()
	tb.Cleanup(func() { _, _ = dc.ImageRemove(context.Background(), pauseImage, client.ImageRemoveOptions{}) })
	for _, ref := range append([]string{pauseImage}, images...) {
		rc, err := dc.ImageSave(ctx, []string{ref})
		must(tb, err)
		err = n.ctr(tb, rc, "images", "import", "-")
		_ = rc.Close()
		must(tb, err)
	}
}

func (n *KubeletNode) waitReady(tb testing.TB, c *Cluster) {
	tb.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		node, err := c.Client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err == nil {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	tb.Fatalf("node %s not Ready after 2 minutes (kubelet.log in %s)", n.Name, n.Dir)
}

// bind is the scheduler and the volume binder until ctx ends.
func (n *KubeletNode) bind(ctx context.Context, c *Cluster) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		cs := c.Client.CoreV1()
		if pods, err := cs.Pods("").List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
					_ = cs.Pods(p.Namespace).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
						Target: corev1.ObjectReference{Kind: "Node", Name: n.Name}}, metav1.CreateOptions{})
				}
			}
		}
		if claims, err := cs.PersistentVolumeClaims("").List(ctx, metav1.ListOptions{}); err == nil {
			for i := range claims.Items {
				_ = n.bindClaim(ctx, c, &claims.Items[i])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *KubeletNode) bindClaim(ctx context.Context, c *Cluster, pvc *corev1.PersistentVolumeClaim) error {
	cs := c.Client.CoreV1()
	if pvc.DeletionTimestamp != nil || pvc.Status.Phase == corev1.ClaimBound {
		return nil
	}
	name := "pv-" + string(pvc.UID)
	dir := filepath.Join(n.Dir, "pv", name)
	if pvc.Spec.VolumeName == "" {
		if err := os.MkdirAll(dir, 0o2775); err != nil {
			return err
		}
		if err := os.Chown(dir, 1000, 1000); err != nil {
			return err
		}
	}
	return bindHostPath(ctx, cs, pvc, name, dir, corev1.PersistentVolumeReclaimRetain)
}

// teardown deletes every pod through the API (the kubelet stops them and
// unmounts their volumes), then kills what is left in containerd.
func (n *KubeletNode) teardown(c *Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := c.Client.CoreV1()
	if nss, err := cs.Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		for _, ns := range nss.Items {
			_ = cs.Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	}
	for ctx.Err() == nil {
		pods, err := cs.Pods("").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	var out bytes.Buffer
	cmd := exec.Command("ctr", "-a", n.Containerd, "-n", "k8s.io", "tasks", "ls", "-q")
	cmd.Stdout = &out
	if cmd.Run() == nil {
		for _, id := range strings.Fields(out.String()) {
			_ = exec.Command("ctr", "-a", n.Containerd, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).Run()
			time.Sleep(100 * time.Millisecond)
			_ = exec.Command("ctr", "-a", n.Containerd, "-n", "k8s.io", "tasks", "rm", "-f", id).Run()
		}
	}
}

// PIDsMax is the pids.max of a pod's cgroup on this node (cgroup v1,
// the kubelet's podPidsLimit), "" when not found.
func (n *KubeletNode) PIDsMax(uid string) string {
	for _, qos := range []string{"", "besteffort", "burstable"} {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids/kubepods", qos, "pod"+uid, "pids.max"))
		if err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// tarOne is a tar of one executable file at name.
func tarOne(w io.Writer, name string, data []byte) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	return tw.Close()
}

// KubeletSandboxes is Sandboxes with a real kubelet instead of the test
// node: the same namespace (Pod Security restricted), Role, user "conch"
// and agent image; the sandbox image (engine.Image) and the agent image
// are imported into the node's containerd (pods must not pull: the
// images are not in a registry).
func KubeletSandboxes(t testing.TB) (*Env, *KubeletNode) {
	t.Helper()
	eng := engine.Docker(t)
	c := Start(t)
	const ns = "conch"
	c.NamespaceFrom(t, Manifest(t, "namespace.yaml").(*corev1.Namespace))
	e := &Env{Cluster: c, Engine: eng, Namespace: ns, AgentImage: AgentImage(t, eng, engine.SandboxdBinary(t))}
	kn := c.StartKubelet(t, eng, eng.Image, e.AgentImage)
	e.BindRole(t, "conch")
	e.User = c.User(t, "conch")
	e.Kubeconfig = c.Kubeconfig(t, e.User, ns)
	return e, kn
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			points = append(points, f[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}
