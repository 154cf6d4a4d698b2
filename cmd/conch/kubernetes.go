//go:build kubernetes

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"conch/config"
	"conch/sandbox/kubernetes"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

var (
	_ sandboxRuntime = (*kubernetes.Runtime)(nil)
	_ refRemover     = (*kubernetes.Runtime)(nil)
	_ pruner         = (*kubernetes.Runtime)(nil)
)

// debugOnly logs every record at debug level.
type debugOnly struct{ slog.Handler }

func (h debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return h.Handler.Handle(ctx, r)
}

func (h debugOnly) WithAttrs(as []slog.Attr) slog.Handler { return debugOnly{h.Handler.WithAttrs(as)} }
func (h debugOnly) WithGroup(name string) slog.Handler    { return debugOnly{h.Handler.WithGroup(name)} }

// kubernetesOptions builds the Kubernetes backend's options from the
// configuration: [sandbox.kubernetes], the image, sandbox.disk and the
// hardening profile's CPU, memory, /tmp and user.
func kubernetesOptions(cfg *config.Config, instance string) (kubernetes.Options, []string, error) {
	s := cfg.Sandbox
	k := s.Kubernetes
	prof, err := cfg.SandboxProfile()
	if err != nil {
		return kubernetes.Options{}, nil, err
	}
	h, err := hardeningFromProfile(prof)
	if err != nil {
		return kubernetes.Options{}, nil, fmt.Errorf("sandbox.profiles.%s: %w", s.ProfileName(), err)
	}
	disk, err := s.DiskBytes()
	if err != nil {
		return kubernetes.Options{}, nil, err
	}
	o := kubernetes.Options{
		InstanceID: instance, Kubeconfig: k.Kubeconfig, Context: k.Context, Namespace: k.Namespace,
		Image: s.Image, AgentImage: k.AgentImage, AgentPath: k.AgentPath,
		ImagePullPolicy: corev1.PullPolicy(k.ImagePullPolicy), StorageClass: k.StorageClass,
		RuntimeClass: k.RuntimeClass, NodeSelector: k.NodeSelector, Disk: disk,
		CPUMilli: h.NanoCPUs / 1e6, Memory: h.Memory, TmpSize: h.TmpSize,
		IdleStop: s.IdleStopD(), // sandbox.idle_stop: the pod goes, its claim stays
		WarmPool: k.WarmPool,
		// Every pod gets the skills conch copies for sandboxes (webtools.go).
		SkillsDir: skillsSandboxDir(cfg),
	}
	if k.StartTimeout != nil {
		o.StartTimeout = k.StartTimeout.D()
	}
	for _, t := range k.Tolerations {
		o.Tolerations = append(o.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
			Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	uid, gid, ok := strings.Cut(h.User, ":")
	if o.UID, err = strconv.ParseInt(uid, 10, 64); err != nil || o.UID == 0 {
		return kubernetes.Options{}, nil, fmt.Errorf("sandbox profile user %q: the kubernetes backend needs a numeric, non-root uid", h.User)
	}
	if ok {
		if o.GID, err = strconv.ParseInt(gid, 10, 64); err != nil {
			return kubernetes.Options{}, nil, fmt.Errorf("sandbox profile user %q: the gid is not a number", h.User)
		}
	}
	// What the profile asks that a pod spec cannot say, said at start.
	var notes []string
	if h.Pids > 0 {
		notes = append(notes, fmt.Sprintf("the process limit (%d) is the nodes' kubelet podPidsLimit on Kubernetes, not a pod field", h.Pids))
	}
	if h.Network != "" && h.Network != "none" {
		notes = append(notes, "profile network "+h.Network+" is ignored: sandbox pods get a deny-all NetworkPolicy")
	}
	if !h.ReadOnlyRoot || !h.NoNewPrivileges || len(h.CapAdd) > 0 {
		notes = append(notes, "read-only root, no privilege escalation and no capabilities are always set on Kubernetes")
	}
	return o, notes, nil
}

// startKubernetes connects the Kubernetes backend.
func startKubernetes(ctx context.Context, d *deps, instance string) (sandboxRuntime, error) {
	o, notes, err := kubernetesOptions(d.cfg, instance)
	if err != nil {
		return nil, err
	}
	for _, n := range notes {
		d.log.Warn("kubernetes sandboxes: " + n)
	}
	// client-go reports through klog, to stderr by default; its lines go to
	// conch's log at debug level (a closed exec stream is logged there as an
	// "error" although conch closed it on purpose; real failures come back
	// to the backend as errors).
	klog.SetSlogLogger(slog.New(debugOnly{d.log.Handler()}).With("component", "client-go"))
	o.Known = d.db.Conversations
	o.Audit = d.audit
	o.Logger = d.log
	rt, err := kubernetes.New(ctx, o)
	if err != nil {
		return nil, err
	}
	d.log.Info("sandboxes on kubernetes", "server", rt.Engine(), "namespace", rt.Namespace())
	// Pods are given <data_dir>/skills, which the skills manager fills on a
	// turn (before Reconcile fills the warm pool): fill it now, so that pool
	// pods get the current set ahead and a first command waits for no copy.
	if d.skills == nil {
		d.skills = newSkills(d.cfg, d.db, true, d)
	}
	if c, err := d.skills.Catalog(ctx); err != nil {
		d.log.Warn("skills not prepared for sandbox pods", "err", err)
	} else if err := d.skills.Sync(ctx, c); err != nil {
		d.log.Warn("skills not prepared for sandbox pods", "err", err)
	}
	return rt, nil
}

// doctorKubernetes checks the API server and conch's permissions there,
// then starts probe pods: a node pulls and starts the images, and the CNI
// enforces the deny-all NetworkPolicy (or not, or it cannot tell).
func (a *app) doctorKubernetes(ctx context.Context, cfg *config.Config, check func(string, error, string)) {
	instance, err := instanceID(cfg)
	if err != nil {
		check("kubernetes", err, "")
		return
	}
	o, _, err := kubernetesOptions(cfg, instance)
	if err != nil {
		check("kubernetes", err, "")
		return
	}
	o.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	klog.SetSlogLogger(slog.New(debugOnly{o.Logger.Handler()}))
	rt, err := kubernetes.New(ctx, o)
	if err != nil {
		check("kubernetes", err, "")
		return
	}
	defer rt.Close()
	check("kubernetes", nil, fmt.Sprintf("API server %s answers; namespace %s", rt.ServerVersion(), rt.Namespace()))
	if err := kubernetes.CheckAccess(ctx, o); err != nil {
		check("kubernetes permissions", err, "")
		fmt.Fprintln(a.stdout, "- kubernetes images and network policy: not probed (permissions missing)")
		return
	}
	check("kubernetes permissions", nil, "every permission of deploy/kubernetes/role.yaml is granted")
	opts := rt.Options()
	probe, err := rt.StartProbe(ctx)
	if err != nil {
		check("kubernetes images", fmt.Errorf("%w\n(sandbox.image %s, agent_image %s)", err, opts.Image, opts.AgentImage), "")
		fmt.Fprintln(a.stdout, "- kubernetes network policy: not probed (no probe pod runs)")
		return
	}
	defer probe.Close()
	check("kubernetes images", nil, fmt.Sprintf("a probe pod of sandbox.image %s with agent_image %s ran on node %s in %s",
		opts.Image, opts.AgentImage, probe.Node, probe.Took.Round(100*time.Millisecond)))
	res := probe.NetworkPolicy(ctx)
	switch res.Verdict {
	case kubernetes.NetEnforced:
		check("kubernetes network policy", nil, "deny-all enforced: "+res.Detail)
	case kubernetes.NetNotEnforced:
		check("kubernetes network policy", errors.New("deny-all NOT enforced (the CNI ignores NetworkPolicy): "+res.Detail+
			"; sandboxes' pods can reach each other and the network: use a CNI that enforces NetworkPolicy (Calico, Cilium)"), "")
	default:
		fmt.Fprintln(a.stdout, "- kubernetes network policy: cannot test: "+res.Detail)
	}
}
