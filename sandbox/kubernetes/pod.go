//go:build kubernetes

package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"conch"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations on everything conch creates. Label values are
// limited to 63 characters, so the conversation is a label hash and the key
// itself an annotation.
const (
	LabelInstance     = "conch.instance"
	LabelConversation = "conch.conversation"
	LabelSandbox      = "conch.sandbox"
	LabelProfileHash  = "conch.profile-hash"
	// AnnotationConversation carries the conversation key as text.
	AnnotationConversation = "conch.conversation"
)

const maxSlug = 40

// slug is s in lower case with every run of other characters than [a-z0-9]
// as one dash: readable, not unique (names add a hash).
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			if b.Len() >= maxSlug {
				break
			}
			continue
		}
		dash = true
	}
	out := strings.TrimRight(b.String(), "-")
	if out == "" {
		out = "x"
	}
	return out
}

// hashOf is n hex digits of SHA-256 over the length-prefixed parts.
func hashOf(n int, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p)) + ":"))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:n]
}

// PodName is the conversation's pod (and workspace claim) name:
// conch-<slug>-<hash8>, the hash over instance and key, as on Docker; at
// most 55 characters, a valid DNS label.
func PodName(instance string, key conch.ConversationKey) string {
	return "conch-" + slug(string(key.Channel)+"-"+key.ID) + "-" + hashOf(8, instance, key.String())
}

// ConversationLabel is the conversation's label value: a hash of the key.
func ConversationLabel(key conch.ConversationKey) string { return hashOf(16, key.String()) }

// InstanceLabel is the instance's label value (ids longer than a label allows are hashed).
func InstanceLabel(instance string) string {
	if len(instance) <= 63 && validLabel(instance) {
		return instance
	}
	return "h-" + hashOf(16, instance)
}

func validLabel(s string) bool {
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			(i > 0 && i < len(s)-1 && (r == '-' || r == '_' || r == '.'))
		if !ok {
			return false
		}
	}
	return s != ""
}

// policyName is the instance's deny-all NetworkPolicy.
func policyName(instance string) string { return "conch-sandboxes-" + hashOf(8, instance) }

// spec builds what a conversation's pod and claim depend on.
type spec struct {
	o        Options
	instance string // label value
}

// profileHash identifies everything a pod's creation depended on: a pod
// made from another one is stale (replaced, its claim kept).
func (s spec) profileHash() string {
	b, _ := json.Marshal(s.podSpec("workspace"))
	return hashOf(16, "v1", string(b))
}

func (s spec) labels(key conch.ConversationKey) map[string]string {
	return map[string]string{
		LabelInstance: s.instance, LabelConversation: ConversationLabel(key), LabelSandbox: "true",
	}
}

func (s spec) claim(name string, key conch.ConversationKey) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.labels(key),
			Annotations: map[string]string{AnnotationConversation: key.String()}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(s.o.Disk, resource.BinarySI)}},
		},
	}
	if s.o.StorageClass != "" {
		sc := s.o.StorageClass
		c.Spec.StorageClassName = &sc
	}
	return c
}

func (s spec) pod(name string, key conch.ConversationKey) *corev1.Pod {
	labels := s.labels(key)
	labels[LabelProfileHash] = s.profileHash()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			Annotations: map[string]string{AnnotationConversation: key.String()}},
		Spec: s.podSpec(name),
	}
}

// containerSecurity is the sandbox's and the init container's confinement.
func (s spec) containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		ReadOnlyRootFilesystem:   ptr(true),
		AllowPrivilegeEscalation: ptr(false),
		Privileged:               ptr(false),
		RunAsNonRoot:             ptr(true),
		RunAsUser:                ptr(s.o.UID),
		RunAsGroup:               ptr(s.o.GID),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func (s spec) resources() corev1.ResourceRequirements {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(s.o.CPUMilli, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(s.o.Memory, resource.BinarySI),
	}
	return corev1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()}
}

// podSpec is the hardened pod; claim names the workspace claim.
func (s spec) podSpec(claim string) corev1.PodSpec {
	agentBin := AgentDir + "/" + agentName
	ps := corev1.PodSpec{
		AutomountServiceAccountToken:  ptr(false),
		EnableServiceLinks:            ptr(false),
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr(int64(5)),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr(true),
			RunAsUser:      ptr(s.o.UID),
			RunAsGroup:     ptr(s.o.GID),
			FSGroup:        ptr(s.o.GID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		NodeSelector: s.o.NodeSelector,
		Tolerations:  s.o.Tolerations,
		Volumes: []corev1.Volume{
			{Name: "workspace", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(s.o.TmpSize, resource.BinarySI)}}},
			{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: resource.NewQuantity(256<<20, resource.BinarySI)}}},
		},
		InitContainers: []corev1.Container{{
			Name: installContainer, Image: s.o.AgentImage, ImagePullPolicy: s.o.ImagePullPolicy,
			Command:         []string{s.o.AgentPath, "sandbox-init", "--install", AgentDir},
			VolumeMounts:    []corev1.VolumeMount{{Name: "agent", MountPath: AgentDir}},
			SecurityContext: s.containerSecurity(),
			Resources:       s.resources(),
		}},
		Containers: []corev1.Container{{
			Name: SandboxContainer, Image: s.o.Image, ImagePullPolicy: s.o.ImagePullPolicy,
			Command:    []string{agentBin, "sandbox-init"},
			WorkingDir: WorkspaceDir,
			Env:        []corev1.EnvVar{{Name: "HOME", Value: WorkspaceDir}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "workspace", MountPath: WorkspaceDir},
				{Name: "tmp", MountPath: "/tmp"},
				{Name: "agent", MountPath: AgentDir, ReadOnly: true},
			},
			SecurityContext: s.containerSecurity(),
			Resources:       s.resources(),
		}},
	}
	if s.o.SkillsDir != "" {
		s.addSkills(&ps)
	}
	if s.o.RuntimeClass != "" {
		rc := s.o.RuntimeClass
		ps.RuntimeClassName = &rc
	}
	return ps
}

// Resources of the skills container: it idles as process 1 and runs the
// short unpack execs conch makes when the skills changed.
const (
	skillsCPUMilli = 100
	skillsMemory   = 64 << 20
	skillsVolume   = 64 << 20
)

// addSkills gives ps the skills volume: read-only in the sandbox container
// (its mount point is made by the init container in the agent volume),
// writable only in the skills container, which runs conch (the agent
// image) as process 1 with the same confinement. The tools' uid cannot
// write the skills: the mount is read-only in their container, and they
// cannot reach the other one.
func (s spec) addSkills(ps *corev1.PodSpec) {
	ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "skills", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(skillsVolume, resource.BinarySI)}}})
	sb := &ps.Containers[0]
	sb.VolumeMounts = append(sb.VolumeMounts, corev1.VolumeMount{Name: "skills", MountPath: SkillsPath, ReadOnly: true})
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(skillsCPUMilli, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(skillsMemory, resource.BinarySI),
	}
	ps.Containers = append(ps.Containers, corev1.Container{
		Name: SkillsContainer, Image: s.o.AgentImage, ImagePullPolicy: s.o.ImagePullPolicy,
		Command:         []string{s.o.AgentPath, "sandbox-init"},
		VolumeMounts:    []corev1.VolumeMount{{Name: "skills", MountPath: SkillsPath}},
		SecurityContext: s.containerSecurity(),
		Resources:       corev1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()},
	})
}

// denyAll selects every sandbox pod of the instance with no rule in either
// direction: nothing in, nothing out (network=none on Docker).
func (s spec) denyAll() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName(s.o.InstanceID),
			Labels: map[string]string{LabelInstance: s.instance}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				LabelInstance: s.instance, LabelSandbox: "true"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

func ptr[T any](v T) *T { return &v }
