package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKubernetesConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "conch.toml")
	if err := os.WriteFile(file, []byte(`
[sandbox]
backend = "kubernetes"

[sandbox.kubernetes]
storage_class = "fast"
node_selector = { "pool" = "sandboxes" }
tolerations = [{ key = "sandboxes", operator = "Exists", effect = "NoSchedule" }]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, []string{"HOME=" + dir, "CONCH_SANDBOX_KUBERNETES_NAMESPACE=team-a", "CONCH_SANDBOX_KUBERNETES_KUBECONFIG=/etc/kc", "CONCH_SANDBOX_KUBERNETES_WARM_POOL=3"})
	if err != nil {
		t.Fatal(err)
	}
	k := c.Sandbox.Kubernetes
	switch {
	case c.Sandbox.BackendName() != BackendKubernetes:
		t.Fatalf("backend %q", c.Sandbox.BackendName())
	case k.Namespace != "team-a", k.Kubeconfig != "/etc/kc", k.StorageClass != "fast", k.WarmPool != 3:
		t.Fatalf("keys and environment: %+v", k)
	case k.AgentImage != "conch:latest", k.AgentPath != "/conch", k.StartTimeout == nil || k.StartTimeout.D().Minutes() != 3:
		t.Fatalf("defaults: %+v", k)
	case k.NodeSelector["pool"] != "sandboxes", len(k.Tolerations) != 1 || k.Tolerations[0].Operator != "Exists":
		t.Fatalf("placement: %+v", k)
	}
	if ps := c.Sandbox.validate(); len(ps) != 0 {
		t.Fatalf("valid config: %v", ps)
	}

	bad := c.Sandbox
	bad.Disk = "0"
	bad.Kubernetes.Namespace = "Team_A"
	bad.Kubernetes.ImagePullPolicy = "Sometimes"
	bad.Kubernetes.Tolerations = []KubernetesToleration{{Operator: "Maybe"}}
	bad.Kubernetes.WarmPool = -1
	var keys []string
	for _, p := range bad.validate() {
		keys = append(keys, p.Key)
	}
	want := "sandbox.kubernetes.namespace sandbox.kubernetes.image_pull_policy sandbox.kubernetes.warm_pool sandbox.kubernetes.tolerations[0].operator sandbox.disk"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("problems %q, want %q", got, want)
	}
	bad = c.Sandbox
	bad.Backend = "nomad"
	if ps := bad.validate(); len(ps) != 1 || ps[0].Key != "sandbox.backend" {
		t.Fatalf("unknown backend: %v", ps)
	}
	if d := (SandboxConfig{}).BackendName(); d != BackendEngine {
		t.Fatalf("default backend %q", d)
	}
}

// The configuration deploy/kubernetes ships is valid as it stands.
func TestDeployKubernetesConfig(t *testing.T) {
	dir := t.TempDir()
	c, err := Load(filepath.Join("..", "deploy", "kubernetes", "conch.toml"),
		[]string{"HOME=" + dir, "CONCH_DATA_DIR=" + dir, "CONCH_MODEL_API_KEY=k"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Sandbox.BackendName() != BackendKubernetes || c.Gateway.Listen != "0.0.0.0:8080" {
		t.Fatalf("backend %s, listen %s", c.Sandbox.BackendName(), c.Gateway.Listen)
	}
}
