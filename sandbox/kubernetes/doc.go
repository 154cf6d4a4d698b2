// Package kubernetes runs every conversation's sandbox as a pod (build tag
// kubernetes): conch.Runtime, conch.SandboxAdmin and conch.Releaser over
// client-go. A pod per conversation, hardened as the Docker backend's
// containers are (read-only root, memory tmpfs /tmp, no capabilities, no
// privilege escalation, seccomp RuntimeDefault, non-root, Guaranteed
// resources, no service-account token, no service links), a PVC per
// workspace sized by sandbox.disk, and one deny-all NetworkPolicy over all
// of the instance's sandbox pods. The tools reach a pod through ONE
// long-lived exec per conversation that runs `conch sandbox-agent`, carrying
// the same multiplexed protocol as on Docker (sandbox/sandboxd).
//
// The conch binary reaches a pod through an init container: it runs the
// configured agent image (conch's own image, whose static binary is at
// /conch) as `conch sandbox-init --install /opt/conch`, which copies itself
// into an emptyDir the sandbox container mounts read-only at /opt/conch. The
// sandbox container's process 1 is that binary as `conch sandbox-init`, a
// reaper that also keeps the container alive. See docs/kubernetes.md and
// docs/decisions/2026-11-26-kubernetes-sandboxes.md.
package kubernetes
