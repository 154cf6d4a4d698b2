//go:build kubernetes

package kube

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"conch/internal/testenv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Cluster is a running etcd + kube-apiserver.
type Cluster struct {
	// URL is the API server's https address on 127.0.0.1.
	URL string
	// Admin is a client configuration in system:masters.
	Admin *rest.Config
	// Client is Admin's clientset.
	Client k8s.Interface
	// Dir holds certificates, logs and etcd's data.
	Dir string

	ca *ca
}

// Start starts etcd and kube-apiserver from the prebuilt cache (built on
// first use, minutes) with RBAC on, and stops them at cleanup. Without the
// go command or the module proxy the test is skipped through
// testenv.Missing.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	bins, err := Prebuild(ctx)
	if err != nil {
		testenv.Missing(tb, "kube-apiserver", fmt.Sprintf("the test control plane could not be built: %v", err))
		return nil
	}
	dir, err := os.MkdirTemp("", "conch-kube-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &Cluster{Dir: dir}
	if c.ca, err = newCA(); err != nil {
		tb.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	must(tb, os.WriteFile(caFile, c.ca.pem, 0o600))

	etcdClient, etcdPeer := freePort(tb), freePort(tb)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	startProc(tb, dir, "etcd", bins.Path("etcd"),
		"--data-dir", filepath.Join(dir, "etcd"), "--name", "test",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-cluster", "test=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--unsafe-no-fsync", "--log-level", "warn")

	srvCrt, srvKey, err := c.ca.writeIssued(dir, "apiserver", "kube-apiserver", nil,
		[]string{"127.0.0.1", "localhost", "10.96.0.1", "kubernetes.default.svc"})
	must(tb, err)
	kubeletCrt, kubeletKey, err := c.ca.writeIssued(dir, "apiserver-kubelet-client", "kube-apiserver-kubelet-client",
		[]string{"system:masters"}, nil)
	must(tb, err)
	saKey, err := writeServiceAccountKey(dir)
	must(tb, err)
	port := freePort(tb)
	c.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	apiDone := startProc(tb, dir, "kube-apiserver", bins.Path("kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--tls-cert-file", srvCrt, "--tls-private-key-file", srvKey, "--client-ca-file", caFile,
		"--kubelet-client-certificate", kubeletCrt, "--kubelet-client-key", kubeletKey,
		"--kubelet-preferred-address-types", "InternalIP",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-account-issuer", "https://kubernetes.default.svc", "--api-audiences", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--authorization-mode", "Node,RBAC",
		// 127.0.0.1 cannot be the kubernetes service's endpoint; nothing here needs one.
		"--endpoint-reconciler-type", "none",
		"--enable-admission-plugins", "NodeRestriction",
		"--allow-privileged=false",
		"--profiling=false", "--v=1")

	adminCrt, adminKey, err := c.ca.issue("conch-test-admin", []string{"system:masters"}, nil)
	must(tb, err)
	c.Admin = &rest.Config{Host: c.URL, TLSClientConfig: rest.TLSClientConfig{CAData: c.ca.pem, CertData: adminCrt, KeyData: adminKey},
		QPS: 100, Burst: 200}
	if c.Client, err = k8s.NewForConfig(c.Admin); err != nil {
		tb.Fatal(err)
	}
	c.waitReady(tb, apiDone)
	return c
}

// waitReady waits for /readyz and for the default namespace (the API
// server's bootstrap controllers made it).
func (c *Cluster) waitReady(tb testing.TB, exited <-chan struct{}) {
	tb.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			_, err = c.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		}
		cancel()
		if err == nil {
			return
		}
		last = fmt.Errorf("%w (%s)", err, body)
		select {
		case <-exited:
			tb.Fatalf("kube-apiserver exited: %v (logs in %s)", last, c.Dir)
		case <-time.After(300 * time.Millisecond):
		}
	}
	tb.Fatalf("kube-apiserver not ready after 3m: %v (logs in %s)", last, c.Dir)
}

// Namespace creates a namespace with its default service account (no
// controller-manager runs to make it).
func (c *Cluster) Namespace(tb testing.TB, name string) {
	tb.Helper()
	c.NamespaceFrom(tb, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// NamespaceFrom creates ns (labels and all) with its default service account.
func (c *Cluster) NamespaceFrom(tb testing.TB, ns *corev1.Namespace) {
	tb.Helper()
	ctx := context.Background()
	name := ns.Name
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
	_, err = c.Client.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
}

// User returns a client configuration authenticating as user (a client
// certificate in groups): what RBAC lets it do is up to the test.
func (c *Cluster) User(tb testing.TB, user string, groups ...string) *rest.Config {
	tb.Helper()
	crt, key, err := c.ca.issue(user, groups, nil)
	must(tb, err)
	return &rest.Config{Host: c.URL, TLSClientConfig: rest.TLSClientConfig{CAData: c.ca.pem, CertData: crt, KeyData: key}}
}

// Kubeconfig writes a kubeconfig file for cfg (as a user of the cluster)
// with namespace as its context's namespace.
func (c *Cluster) Kubeconfig(tb testing.TB, cfg *rest.Config, namespace string) string {
	tb.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "user", Namespace: namespace}
	kc.CurrentContext = "test"
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	must(tb, clientcmd.WriteToFile(*kc, path))
	return path
}

// startProc starts bin with its output in dir/name.log; the channel closes
// when it exits. It is stopped (SIGINT, then SIGKILL) at cleanup.
func startProc(tb testing.TB, dir, name, bin string, args ...string) <-chan struct{} {
	tb.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	must(tb, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if tb.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				tb.Logf("%s log (last 3000 bytes):\n%s", name, tail(string(b), 3000))
			}
		}
	})
	return done
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(tb, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
