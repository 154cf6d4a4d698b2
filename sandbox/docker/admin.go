package docker

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"conch"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// This file is the operator's view of the sandboxes (`conch sandbox ls |
// inspect | exec | rm | prune`) as the engine tells it, filled into the
// root's conch.SandboxInfo and conch.SandboxDetails.

func (r *Runtime) refErr(ref string, matches []string) error {
	kind := conch.KindNotFound
	if len(matches) > 1 {
		kind = conch.KindInvalid
	}
	return &conch.Error{Kind: kind, Err: &conch.SandboxRefError{Ref: ref, Instance: r.opts.InstanceID, Matches: matches}}
}

// inspected is a container as the operator sees it with the engine's full
// answer.
type inspected struct {
	s conch.SandboxInfo
	c container.InspectResponse
}

// inspectAll inspects every container of the instance; known is the
// store's conversations (nil when Options.Known is not set).
func (r *Runtime) inspectAll(ctx context.Context) ([]inspected, map[string]bool, error) {
	if err := r.checkOpen(); err != nil {
		return nil, nil, err
	}
	if err := r.reg.refresh(); err != nil {
		return nil, nil, err
	}
	known, err := r.knownSet(ctx)
	if err != nil {
		return nil, nil, err
	}
	want, err := r.wantImageHash(ctx)
	if err != nil {
		return nil, nil, r.engineErr("list sandboxes", err)
	}
	list, err := r.listInstance(ctx)
	if err != nil {
		return nil, nil, r.engineErr("list sandboxes", err)
	}
	var out []inspected
	for _, it := range list.Items {
		ins, err := r.api.ContainerInspect(ctx, it.ID, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			continue // removed as we looked
		}
		if err != nil {
			return nil, nil, r.engineErr("inspect sandbox "+containerName(it.Names), err)
		}
		out = append(out, inspected{s: r.summarize(ins.Container, known, want), c: ins.Container})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].s, out[j].s
		if a.Pool != b.Pool {
			return !a.Pool
		}
		if a.Conversation != b.Conversation {
			return a.Conversation < b.Conversation
		}
		return a.Name < b.Name
	})
	return out, known, nil
}

func (r *Runtime) knownSet(ctx context.Context) (map[string]bool, error) {
	if r.opts.Known == nil {
		return nil, nil
	}
	keys, err := r.opts.Known(ctx)
	if err != nil {
		return nil, fmt.Errorf("known conversations: %w", err)
	}
	known := make(map[string]bool, len(keys))
	for _, k := range keys {
		known[k.String()] = true
	}
	return known, nil
}

// wantImageHash is the image hash a sandbox created now would carry,
// without building anything: the image in use, the configured image when
// it is current or not conch's, else the definition conch would build.
func (r *Runtime) wantImageHash(ctx context.Context) (string, error) {
	st, _, err := r.wantImage(ctx)
	return st.Hash, err
}

// summarize describes one inspected container. known may be nil (every
// conversation counts as known).
func (r *Runtime) summarize(c container.InspectResponse, known map[string]bool, wantImage string) conch.SandboxInfo {
	name := strings.TrimPrefix(c.Name, "/")
	var labels map[string]string
	s := conch.SandboxInfo{Name: name, ID: c.ID, Engine: r.info.Engine + " " + r.info.Version, Workspace: workspaceVolume(c)}
	if c.Config != nil {
		labels = c.Config.Labels
		s.Image = c.Config.Image
	}
	s.ImageHash = labels[LabelImageHash]
	s.ImageCurrent = s.ImageHash != "" && s.ImageHash == wantImage
	s.ProfileCurrent = labels[LabelProfileHash] == r.specHash
	s.Created = parseTime(c.Created)
	if c.State != nil {
		s.State = string(c.State.Status)
		s.Running = c.State.Running && !c.State.Paused
		s.ExitCode, s.OOMKilled, s.Error = c.State.ExitCode, c.State.OOMKilled, c.State.Error
		s.StartedAt, s.FinishedAt = parseTime(c.State.StartedAt), parseTime(c.State.FinishedAt)
	}
	pool, orphan, convo, key := r.kindOf(name, labels, known)
	s.Pool, s.Orphan, s.Conversation = pool, orphan, convo
	if pool || key.IsZero() { // the pool's, or no conversation's key (an orphan)
		return s
	}
	s.Key = key
	r.mu.Lock()
	if b := r.boxes[convo]; b != nil {
		s.LastUsed, s.Busy = b.lastUse, b.active > 0
	}
	r.mu.Unlock()
	if s.LastUsed.IsZero() && !s.Running {
		s.LastUsed = s.FinishedAt
	}
	return s
}

// kindOf tells what a container of this instance is, by its name and
// labels: a warm-pool container, or one of a conversation (its key), an
// orphan when that conversation's name does not match or it is not known.
func (r *Runtime) kindOf(name string, labels map[string]string, known map[string]bool) (pool, orphan bool, convo string, key conch.ConversationKey) {
	if labels[LabelPool] == "1" && strings.HasPrefix(name, poolPrefix(r.opts.InstanceID)) {
		return true, false, conch.PoolConversation, key
	}
	convo = labels[LabelConversation]
	if convo == "" {
		if e, ok := r.reg.get(name); ok {
			convo = e.Conversation
		}
	}
	key, err := conch.ParseConversationKey(convo)
	if err != nil {
		return false, true, convo, conch.ConversationKey{}
	}
	orphan = name != ContainerName(r.opts.InstanceID, key) || (known != nil && !known[convo])
	return false, orphan, convo, key
}

// SandboxCounts implements conch.SandboxCounter: states and kinds from one
// listing of the instance's containers, none inspected.
func (r *Runtime) SandboxCounts(ctx context.Context) ([]conch.SandboxCount, error) {
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	if err := r.reg.refresh(); err != nil {
		return nil, err
	}
	known, err := r.knownSet(ctx)
	if err != nil {
		return nil, err
	}
	list, err := r.listInstance(ctx)
	if err != nil {
		return nil, r.engineErr("count sandboxes", err)
	}
	type sk struct{ state, kind string }
	counts := map[sk]int{}
	for _, it := range list.Items {
		pool, orphan, _, _ := r.kindOf(containerName(it.Names), it.Labels, known)
		kind := "conversation"
		switch {
		case pool:
			kind = "pool"
		case orphan:
			kind = "orphan"
		}
		counts[sk{string(it.State), kind}]++
	}
	out := make([]conch.SandboxCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, conch.SandboxCount{State: k.state, Kind: k.kind, N: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].State < out[j].State
	})
	return out, nil
}

// parseTime reads an engine's RFC 3339 time; zero for none (the engine's
// "0001-01-01T00:00:00Z" included).
func parseTime(v string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil && t.Year() > 1 {
		return t
	}
	return time.Time{}
}

// target is what a ref resolved to: a container, or a conversation without one.
type target struct {
	found *inspected
	key   conch.ConversationKey
	// workspaces are the conversation's existing workspace volumes.
	workspaces []string
}

var hexRef = regexp.MustCompile(`^[0-9a-f]{3,64}$`)

// resolve finds the sandbox ref names: a container name, an id prefix (at
// least 3 digits), or a conversation key "channel:id". A key with no
// container resolves when the conversation has a workspace or the store
// knows it.
func (r *Runtime) resolve(ctx context.Context, ref string) (target, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return target{}, conch.Errorf(conch.KindInvalid, "no sandbox given: name a container, an id prefix or a conversation channel:id")
	}
	all, known, err := r.inspectAll(ctx)
	if err != nil {
		return target{}, err
	}
	pick := func(f *inspected) (target, error) {
		t := target{found: f, key: f.s.Key}
		if !t.key.IsZero() {
			ws, err := r.workspacesOf(ctx, t.key)
			if err != nil {
				return target{}, err
			}
			t.workspaces = ws
		}
		return t, nil
	}
	name := strings.TrimPrefix(ref, "/")
	for i := range all {
		if all[i].s.Name == name || all[i].s.ID == ref {
			return pick(&all[i])
		}
	}
	if hexRef.MatchString(ref) {
		var m []*inspected
		for i := range all {
			if strings.HasPrefix(all[i].s.ID, ref) {
				m = append(m, &all[i])
			}
		}
		switch len(m) {
		case 1:
			return pick(m[0])
		case 0:
		default:
			names := make([]string, len(m))
			for i, f := range m {
				names[i] = f.s.Name
			}
			return target{}, r.refErr(ref, names)
		}
	}
	key, perr := conch.ParseConversationKey(ref)
	if perr != nil {
		return target{}, r.refErr(ref, nil)
	}
	var m []*inspected
	for i := range all {
		if all[i].s.Conversation == key.String() {
			if all[i].s.Name == ContainerName(r.opts.InstanceID, key) {
				return pick(&all[i])
			}
			m = append(m, &all[i])
		}
	}
	switch len(m) {
	case 1:
		return pick(m[0])
	case 0:
	default:
		names := make([]string, len(m))
		for i, f := range m {
			names[i] = f.s.Name
		}
		return target{}, r.refErr(ref, names)
	}
	ws, err := r.workspacesOf(ctx, key)
	if err != nil {
		return target{}, err
	}
	if len(ws) == 0 && (known == nil || !known[key.String()]) {
		return target{}, r.refErr(ref, nil)
	}
	return target{key: key, workspaces: ws}, nil
}

// workspacesOf lists the existing workspace volumes of a conversation: the
// one named like its container, the one the registry records (an assigned
// pool volume) and any labelled with it.
func (r *Runtime) workspacesOf(ctx context.Context, key conch.ConversationKey) ([]string, error) {
	cands := []string{ContainerName(r.opts.InstanceID, key)}
	if v, ok := r.reg.volumeOf(key); ok {
		cands = append(cands, v)
	}
	vols, err := r.api.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).
		Add("label", LabelInstance+"="+r.opts.InstanceID).Add("label", LabelConversation+"="+key.String())})
	if err != nil {
		return nil, r.engineErr("list workspace volumes", err)
	}
	for _, v := range vols.Items {
		// Podman 4 ORs repeated label filters: check both here.
		if v.Labels[LabelInstance] == r.opts.InstanceID && v.Labels[LabelConversation] == key.String() {
			cands = append(cands, v.Name)
		}
	}
	slices.Sort(cands)
	var out []string
	for _, v := range slices.Compact(cands) {
		ok, err := r.volumeExists(ctx, v)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// KeyOf returns the conversation whose sandbox ref names, for `conch sandbox
// exec`: a conversation's container, or a conversation key without one
// (Sandbox then creates it, as the conversation's next tool call would). A
// warm-pool container, or a container whose name does not match its
// conversation, is refused.
func (r *Runtime) KeyOf(ctx context.Context, ref string) (conch.ConversationKey, error) {
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return conch.ConversationKey{}, err
	}
	if t.found != nil {
		s := t.found.s
		switch {
		case s.Pool:
			return conch.ConversationKey{}, conch.Errorf(conch.KindInvalid,
				"%s is an unassigned warm-pool container; name a conversation's sandbox", s.Name)
		case s.Key.IsZero() || s.Name != ContainerName(r.opts.InstanceID, s.Key):
			return conch.ConversationKey{}, conch.Errorf(conch.KindInvalid,
				"%s belongs to no conversation conch can use (an orphan that prune removes)", s.Name)
		}
	}
	return t.key, nil
}

// Inspect describes the container ref names (see resolve for the forms).
func (r *Runtime) Inspect(ctx context.Context, ref string) (conch.SandboxDetails, error) {
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return conch.SandboxDetails{}, err
	}
	if t.found == nil {
		return conch.SandboxDetails{}, &conch.NoSandboxError{Key: t.key, Workspaces: t.workspaces}
	}
	return r.details(t.found), nil
}

func (r *Runtime) details(f *inspected) conch.SandboxDetails {
	c := f.c
	d := conch.SandboxDetails{SandboxInfo: f.s, Labels: map[string]string{}}
	if c.Config != nil {
		maps.Copy(d.Labels, c.Config.Labels)
		d.ProfileHash = c.Config.Labels[LabelProfileHash]
	}
	if e, ok := r.reg.get(f.s.Name); ok {
		d.AssignedFromPool = e.Assigned
	}
	for _, m := range c.Mounts {
		src := m.Name
		if src == "" {
			src = m.Source
		}
		d.Mounts = append(d.Mounts, conch.SandboxMount{Type: string(m.Type), Source: src, Destination: m.Destination, ReadOnly: !m.RW})
	}
	d.Hardening = engineSettings(c)
	d.HardeningProblems = r.profile.verify(r.info.Engine, r.seccomp, c)
	if d.HardeningProblems == nil {
		d.HardeningProblems = []string{}
	}
	return d
}

// engineSettings renders the confinement the engine reports for c.
func engineSettings(c container.InspectResponse) []conch.SandboxSetting {
	hc := c.HostConfig
	if hc == nil || c.Config == nil {
		return []conch.SandboxSetting{{Name: "inspect", Value: "the engine reported no HostConfig or Config"}}
	}
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "(none)"
		}
		return strings.Join(xs, ",")
	}
	pids := "unlimited"
	if hc.PidsLimit != nil && *hc.PidsLimit > 0 {
		pids = strconv.FormatInt(*hc.PidsLimit, 10)
	}
	cpus := "unlimited"
	switch {
	case hc.NanoCPUs > 0:
		cpus = strconv.FormatFloat(float64(hc.NanoCPUs)/1e9, 'f', -1, 64)
	case hc.CPUQuota > 0 && hc.CPUPeriod > 0:
		cpus = strconv.FormatFloat(float64(hc.CPUQuota)/float64(hc.CPUPeriod), 'f', -1, 64) +
			fmt.Sprintf(" (quota %d / period %d)", hc.CPUQuota, hc.CPUPeriod)
	}
	init := "unset"
	if hc.Init != nil {
		init = strconv.FormatBool(*hc.Init)
	}
	var tmpfs []string
	for k, v := range hc.Tmpfs {
		tmpfs = append(tmpfs, k+" ("+v+")")
	}
	for _, m := range c.Mounts {
		if m.Type == "tmpfs" && hc.Tmpfs[m.Destination] == "" {
			tmpfs = append(tmpfs, m.Destination)
		}
	}
	slices.Sort(tmpfs)
	var ulimits []string
	for _, u := range hc.Ulimits {
		if u != nil {
			ulimits = append(ulimits, fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
		}
	}
	network := string(hc.NetworkMode)
	if network == "" {
		network = "(engine default)"
	}
	return []conch.SandboxSetting{
		{Name: "init user", Value: c.Config.User}, // the tools run as Hardening.User (an exec option)
		{Name: "read-only root", Value: strconv.FormatBool(hc.ReadonlyRootfs)},
		{Name: "privileged", Value: strconv.FormatBool(hc.Privileged)},
		{Name: "cap drop", Value: list(hc.CapDrop)},
		{Name: "cap add", Value: list(hc.CapAdd)},
		{Name: "security options", Value: list(summarizeSecurityOpt(hc.SecurityOpt))},
		{Name: "network", Value: network},
		{Name: "pids limit", Value: pids},
		{Name: "cpus", Value: cpus},
		{Name: "memory", Value: bytesOrUnlimited(hc.Memory)},
		{Name: "memory+swap", Value: bytesOrUnlimited(hc.MemorySwap)},
		{Name: "tmpfs", Value: list(tmpfs)},
		{Name: "init", Value: init},
		{Name: "ulimits", Value: list(ulimits)},
	}
}

func bytesOrUnlimited(n int64) string {
	switch {
	case n <= 0:
		return "unlimited"
	case n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// refresh rereads the registry file: another conch process (`conch up`
// beside `conch sandbox`) may have assigned pool containers since this one
// read it.
func (g *registry) refresh() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reloadLocked()
}
