package config

import (
	"fmt"
	"regexp"
)

// Sandbox backends (sandbox.backend).
const (
	BackendEngine     = "engine"
	BackendKubernetes = "kubernetes"
)

// KubernetesConfig is [sandbox.kubernetes]: where and how sandbox pods run
// when sandbox.backend = "kubernetes" (a conch built with -tags kubernetes).
// The hardening profile ([sandbox.profiles]) gives CPU, memory, /tmp size
// and the user; sandbox.disk sizes each workspace claim.
type KubernetesConfig struct {
	// Kubeconfig is a kubeconfig file; "" means the in-cluster service
	// account, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string `toml:"kubeconfig" env:"KUBECONFIG"`
	// Context is the kubeconfig context; "" means its current one.
	Context string `toml:"context" env:"CONTEXT"`
	// Namespace holds the sandbox pods, their claims and network policy.
	Namespace string `toml:"namespace" env:"NAMESPACE"`
	// AgentImage is conch's own image (a static conch at AgentPath); an
	// init container copies the binary into each pod.
	AgentImage string `toml:"agent_image" env:"AGENT_IMAGE"`
	AgentPath  string `toml:"agent_path" env:"AGENT_PATH"`
	// ImagePullPolicy of the sandbox and agent images: "" (the cluster's
	// default), Always, IfNotPresent or Never.
	ImagePullPolicy string `toml:"image_pull_policy" env:"IMAGE_PULL_POLICY"`
	// StorageClass of the workspace claims; "" means the cluster's default.
	StorageClass string `toml:"storage_class" env:"STORAGE_CLASS"`
	// RuntimeClass, if set, is the pods' runtimeClassName (gVisor, Kata).
	RuntimeClass string `toml:"runtime_class" env:"RUNTIME_CLASS"`
	// NodeSelector and Tolerations place the pods.
	NodeSelector map[string]string      `toml:"node_selector" env:"-"`
	Tolerations  []KubernetesToleration `toml:"tolerations" env:"-"`
	// StartTimeout bounds waiting for a new pod (image pull, claim binding).
	StartTimeout *Duration `toml:"start_timeout" env:"START_TIMEOUT"`
	// WarmPool keeps this many identity-free pods (each on its own claim)
	// running; a new conversation is given one by relabelling, not a pod
	// start. 0 keeps none (every pool pod holds its requests on a node).
	WarmPool int `toml:"warm_pool" env:"WARM_POOL"`
}

// KubernetesToleration is one toleration of the sandbox pods.
type KubernetesToleration struct {
	Key      string `toml:"key"`
	Operator string `toml:"operator"`
	Value    string `toml:"value"`
	Effect   string `toml:"effect"`
}

// BackendName is sandbox.backend, "engine" when unset.
func (s SandboxConfig) BackendName() string {
	if s.Backend == "" {
		return BackendEngine
	}
	return s.Backend
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func (s SandboxConfig) validateBackend() []Problem {
	var ps []Problem
	add := func(key, msg, fix string) { ps = append(ps, Problem{Key: key, Msg: msg, Fix: fix}) }
	switch s.BackendName() {
	case BackendEngine:
		return nil
	case BackendKubernetes:
	default:
		add("sandbox.backend", "unknown backend "+s.Backend, `use "engine" (Docker or Podman, sandbox.engine) or "kubernetes"`)
		return ps
	}
	k := s.Kubernetes
	if k.Namespace != "" && (len(k.Namespace) > 63 || !dnsLabel.MatchString(k.Namespace)) {
		add("sandbox.kubernetes.namespace", fmt.Sprintf("%q is not a namespace name", k.Namespace), "use lower-case letters, digits and dashes (at most 63)")
	}
	switch k.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		add("sandbox.kubernetes.image_pull_policy", "unknown policy "+k.ImagePullPolicy, `use Always, IfNotPresent, Never or leave it out`)
	}
	if k.StartTimeout != nil && k.StartTimeout.D() <= 0 {
		add("sandbox.kubernetes.start_timeout", "must be positive", `use a duration like "3m"`)
	}
	if k.WarmPool < 0 || k.WarmPool > maxWarmPool {
		add("sandbox.kubernetes.warm_pool", fmt.Sprintf("%d is out of range", k.WarmPool), fmt.Sprintf("use 0 to %d", maxWarmPool))
	}
	for i, t := range k.Tolerations {
		switch t.Operator {
		case "", "Equal", "Exists":
		default:
			add(fmt.Sprintf("sandbox.kubernetes.tolerations[%d].operator", i), "unknown operator "+t.Operator, "use Equal or Exists")
		}
	}
	if n, err := s.DiskBytes(); err == nil && n == 0 {
		add("sandbox.disk", "the kubernetes backend needs a workspace size (each workspace is a claim)", `set a size like "2g", or "auto"`)
	}
	return ps
}
