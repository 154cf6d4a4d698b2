//go:build kubernetes

package kube

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"conch/internal/testenv/engine"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// SandboxImage is the image name sandbox pods ask for; the test node runs
// the test engine's sandbox image for it.
const SandboxImage = "conch-sandbox:latest"

// Env is everything a test of conch's Kubernetes backend needs: a cluster,
// a namespace, the test node, the agent image and a user ("conch")
// holding exactly the Role of deploy/kubernetes/role.yaml there.
type Env struct {
	*Cluster
	Node      *Node
	Engine    *engine.Engine
	Namespace string
	// User authenticates as "conch"; Kubeconfig is a file for it.
	User       *rest.Config
	Kubeconfig string
	// AgentImage holds the static agent binary at /conch.
	AgentImage string
}

// Sandboxes starts the whole environment (the engine and the cluster are
// skipped through testenv.Missing when they cannot run here).
func Sandboxes(t testing.TB) *Env {
	t.Helper()
	eng := engine.Docker(t)
	c := Start(t)
	const ns = "conch"
	// The namespace of deploy/kubernetes/namespace.yaml: Pod Security
	// "restricted" enforced, so every sandbox pod of the tests passes it.
	nsObj := Manifest(t, "namespace.yaml").(*corev1.Namespace)
	if nsObj.Name != ns {
		t.Fatalf("namespace.yaml names %s", nsObj.Name)
	}
	c.NamespaceFrom(t, nsObj)
	e := &Env{Cluster: c, Engine: eng, Namespace: ns,
		AgentImage: AgentImage(t, eng, engine.SandboxdBinary(t))}
	e.Node = c.StartNode(t, eng, map[string]string{SandboxImage: eng.Image})
	e.BindRole(t, "conch")
	e.User = c.User(t, "conch")
	e.Kubeconfig = c.Kubeconfig(t, e.User, ns)
	return e
}

// BindRole creates the Role of deploy/kubernetes/role.yaml (decoded from
// the file: the manifest is what is tested) once, and binds it to user.
func (e *Env) BindRole(t testing.TB, user string) {
	t.Helper()
	role := Manifest(t, "role.yaml").(*rbacv1.Role)
	ctx := context.Background()
	if _, err := e.Client.RbacV1().Roles(e.Namespace).Get(ctx, role.Name, metav1.GetOptions{}); err != nil {
		_, err = e.Client.RbacV1().Roles(e.Namespace).Create(ctx, role, metav1.CreateOptions{})
		must(t, err)
	}
	_, err := e.Client.RbacV1().RoleBindings(e.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{})
	must(t, err)
}

// Manifest decodes deploy/kubernetes/<name>.
func Manifest(t testing.TB, name string) runtime.Object {
	t.Helper()
	_, file, _, _ := goruntime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "kubernetes", name))
	must(t, err)
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return obj
}
