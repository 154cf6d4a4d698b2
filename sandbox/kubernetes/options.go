//go:build kubernetes

package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"conch"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// Paths inside every sandbox pod.
const (
	WorkspaceDir = "/workspace"
	// AgentDir holds the conch binary the init container copied (read-only
	// in the sandbox container).
	AgentDir = "/opt/conch"
	// agentName is the binary's name in AgentDir.
	agentName = "conch"
	// SandboxContainer is the name of the container tools run in.
	SandboxContainer = "sandbox"
	// installContainer is the init container that copies the binary.
	installContainer = "install-agent"
	// SkillsPath is where the skills are in the sandbox container
	// (read-only), as on Docker; SkillsContainer, the small container
	// that alone mounts them writable, is what conch copies them through.
	SkillsPath      = AgentDir + "/skills"
	SkillsContainer = "skills"
)

// Defaults.
const (
	DefaultNamespace    = "conch"
	DefaultImage        = "conch-sandbox:latest"
	DefaultAgentImage   = "conch:latest"
	DefaultAgentPath    = "/conch"
	DefaultStartTimeout = 3 * time.Minute
)

// Options configures a Runtime.
type Options struct {
	// InstanceID distinguishes conch instances sharing a namespace; required.
	InstanceID string
	// Kubeconfig is a kubeconfig file; "" means the in-cluster service
	// account, else the default loading rules ($KUBECONFIG, ~/.kube/config).
	Kubeconfig string
	// Context is the kubeconfig context; "" means its current one.
	Context string
	// REST, if set, is used instead of Kubeconfig (tests, embedding).
	REST *rest.Config
	// Namespace the pods, claims and policy live in; "" means DefaultNamespace.
	Namespace string
	// Image is the sandbox image; "" means DefaultImage.
	Image string
	// AgentImage holds a static conch binary at AgentPath; its init
	// container copies it into the pod. "" means DefaultAgentImage.
	AgentImage string
	// AgentPath is the binary's path in AgentImage; "" means DefaultAgentPath.
	AgentPath string
	// ImagePullPolicy of both images; "" means the cluster's default.
	ImagePullPolicy corev1.PullPolicy
	// StorageClass of the workspace claims; "" means the cluster's default.
	StorageClass string
	// RuntimeClass, if set, is the pods' runtimeClassName (gVisor, Kata).
	RuntimeClass string
	// NodeSelector and Tolerations place the pods.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Disk is each workspace claim's size in bytes; required (> 0).
	Disk int64
	// CPUMilli and Memory are the sandbox container's limits (and equal
	// requests: the pod is Guaranteed); 0 means 1000 and 512 MiB.
	CPUMilli int64
	Memory   int64
	// TmpSize is the memory-backed /tmp's size limit; 0 means 256 MiB.
	TmpSize int64
	// UID and GID the sandbox runs as (never 0); 0 means 1000.
	UID, GID int64
	// StartTimeout bounds waiting for a new pod to run; 0 means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// IdleStop deletes a pod unused this long (its claim stays; the next
	// use makes a new pod on it): an idle pod holds its Guaranteed CPU and
	// memory on a node. 0 never deletes.
	IdleStop time.Duration
	// WarmPool keeps this many identity-free pods (each with its claim)
	// running; a new conversation is given one by relabelling it, without
	// a pod start. 0 (the default) keeps none.
	WarmPool int
	// SweepEvery is how often idle pods are looked for; 0 derives it from
	// IdleStop (a quarter, between 1 s and 1 min).
	SweepEvery time.Duration
	// SkillsDir is the host directory of skill files every pod gets
	// read-only at SkillsPath, copied in on use when it changed (its own
	// volume and a small container, SkillsContainer, that writes it). ""
	// means pods have no skills volume.
	SkillsDir string
	// Known lists the conversations the store knows; Reconcile deletes the
	// pods and claims of any other. nil treats every labelled conversation
	// as known.
	Known func(ctx context.Context) ([]conch.ConversationKey, error)
	// Audit, if set, receives sandbox_create and sandbox_remove events.
	Audit conch.AuditStore
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o *Options) defaults() error {
	if o.InstanceID == "" {
		return errors.New("kubernetes sandboxes: no instance id")
	}
	if o.Disk <= 0 {
		return errors.New("kubernetes sandboxes: sandbox.disk must be a size (a workspace claim needs one)")
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.Namespace, DefaultNamespace)
	def(&o.Image, DefaultImage)
	def(&o.AgentImage, DefaultAgentImage)
	def(&o.AgentPath, DefaultAgentPath)
	if o.CPUMilli <= 0 {
		o.CPUMilli = 1000
	}
	if o.Memory <= 0 {
		o.Memory = 512 << 20
	}
	if o.TmpSize <= 0 {
		o.TmpSize = 256 << 20
	}
	if o.WarmPool < 0 {
		return fmt.Errorf("kubernetes sandboxes: warm pool %d", o.WarmPool)
	}
	if o.UID < 0 || o.GID < 0 {
		return fmt.Errorf("kubernetes sandboxes: uid %d / gid %d", o.UID, o.GID)
	}
	if o.UID == 0 {
		o.UID = 1000
	}
	if o.GID == 0 {
		o.GID = 1000
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}
