package docker

import (
	"context"
	"fmt"
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
// inspect | exec | rm | prune`) and the one line /status shows.

// The gateway's /status asks a Runtime with this method for its line.
var _ interface {
	Describe(ctx context.Context, key conch.ConversationKey) string
} = (*Runtime)(nil)

// PoolConversation is Summary.Conversation of an unassigned warm-pool container.
const PoolConversation = "(pool)"

// Summary is one container of this instance, as `conch sandbox ls` shows it.
type Summary struct {
	Name string `json:"name"`
	// ID is the engine's full container id; ShortID gives 12 digits.
	ID string `json:"id"`
	// Conversation is the "channel:id" key, PoolConversation for an
	// unassigned warm-pool container, or "" when none can be told.
	Conversation string `json:"conversation"`
	// Key is Conversation parsed; zero for the pool and for unknown ones.
	Key conch.ConversationKey `json:"-"`
	// Pool is true for an unassigned warm-pool container.
	Pool bool `json:"pool"`
	// Orphan is true for a container whose conversation cannot be told,
	// whose name does not match its conversation, or whose conversation the
	// store no longer knows (Options.Known): prune and Reconcile remove it
	// with its workspace.
	Orphan bool `json:"orphan"`
	// State is the engine's: running, exited, created, paused, dead, …
	State   string    `json:"state"`
	Running bool      `json:"running"`
	Created time.Time `json:"created"`
	// ImageHash is the definition hash of the image it was created from;
	// ImageCurrent says whether new sandboxes would use the same.
	ImageHash    string `json:"image_hash"`
	ImageCurrent bool   `json:"image_current"`
	// ProfileCurrent says whether it was created with the hardening profile
	// and agent setting in use now.
	ProfileCurrent bool `json:"profile_current"`
	// LastUsed is when it was last used as far as this process knows, or
	// when it stopped; zero when unknown.
	LastUsed time.Time `json:"last_used,omitzero"`
	// Workspace is the volume mounted at /workspace.
	Workspace string `json:"workspace"`
}

// ShortID is the first 12 digits of the container id.
func (s Summary) ShortID() string { return shortID(s.ID) }

// Freshness is "current", or says what is stale: "stale image", "stale
// profile" or "stale image+profile".
func (s Summary) Freshness() string {
	switch {
	case s.ImageCurrent && s.ProfileCurrent:
		return "current"
	case s.ProfileCurrent:
		return "stale image"
	case s.ImageCurrent:
		return "stale profile"
	}
	return "stale image+profile"
}

// Details is everything `conch sandbox inspect` shows about one container.
type Details struct {
	Summary
	Engine string `json:"engine"`
	// Image is the image reference it was created from.
	Image       string `json:"image"`
	ProfileHash string `json:"profile_hash"`
	// Hardening is the confinement as the engine reports it, in a fixed order.
	Hardening []Setting `json:"hardening"`
	// HardeningProblems lists where the engine's settings differ from the
	// active profile (the check run on every create); empty when all of it
	// is in effect.
	HardeningProblems []string          `json:"hardening_problems"`
	Mounts            []Mount           `json:"mounts"`
	Labels            map[string]string `json:"labels"`
	ExitCode          int               `json:"exit_code"`
	OOMKilled         bool              `json:"oom_killed"`
	Error             string            `json:"error,omitempty"`
	StartedAt         time.Time         `json:"started_at,omitzero"`
	FinishedAt        time.Time         `json:"finished_at,omitzero"`
	// AssignedFromPool is when a warm-pool container was given to its
	// conversation; zero for a container created for it.
	AssignedFromPool time.Time `json:"assigned_from_pool,omitzero"`
}

// Setting is one hardening setting as the engine reports it.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Mount is one of a container's mounts.
type Mount struct {
	Type        string `json:"type"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	ReadOnly    bool   `json:"read_only"`
}

// RefError is a reference that names no sandbox of this instance, or more
// than one.
type RefError struct {
	Ref      string
	Instance string
	// Matches names the containers an ambiguous ref matches.
	Matches []string
}

func (e *RefError) Error() string {
	if len(e.Matches) > 1 {
		return fmt.Sprintf("sandbox %q is ambiguous: it matches %s; give the full name or more of the id",
			e.Ref, strings.Join(e.Matches, ", "))
	}
	return fmt.Sprintf("no sandbox of instance %s matches %q (looked for a container name, a container id prefix "+
		"and a conversation key channel:id with a container, a workspace or a place in the store)", e.Instance, e.Ref)
}

func (r *Runtime) refErr(ref string, matches []string) error {
	kind := conch.KindNotFound
	if len(matches) > 1 {
		kind = conch.KindInvalid
	}
	return &conch.Error{Kind: kind, Err: &RefError{Ref: ref, Instance: r.opts.InstanceID, Matches: matches}}
}

// inspected is a container's summary with the engine's full answer.
type inspected struct {
	s Summary
	c container.InspectResponse
}

// List returns every container of this instance, warm-pool ones included:
// conversations first (by key), then the pool.
func (r *Runtime) List(ctx context.Context) ([]Summary, error) {
	all, _, err := r.inspectAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, len(all))
	for i, f := range all {
		out[i] = f.s
	}
	return out, nil
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
func (r *Runtime) summarize(c container.InspectResponse, known map[string]bool, wantImage string) Summary {
	name := strings.TrimPrefix(c.Name, "/")
	var labels map[string]string
	if c.Config != nil {
		labels = c.Config.Labels
	}
	s := Summary{Name: name, ID: c.ID, ImageHash: labels[LabelImageHash], Workspace: workspaceVolume(c)}
	s.ImageCurrent = s.ImageHash != "" && s.ImageHash == wantImage
	s.ProfileCurrent = labels[LabelProfileHash] == r.specHash
	if t, err := time.Parse(time.RFC3339Nano, c.Created); err == nil {
		s.Created = t
	}
	if c.State != nil {
		s.State = string(c.State.Status)
		s.Running = c.State.Running && !c.State.Paused
	}
	if labels[LabelPool] == "1" && strings.HasPrefix(name, poolPrefix(r.opts.InstanceID)) {
		s.Pool, s.Conversation = true, PoolConversation
		return s
	}
	convo := labels[LabelConversation]
	if convo == "" {
		if e, ok := r.reg.get(name); ok {
			convo = e.Conversation
		}
	}
	s.Conversation = convo
	key, err := conch.ParseConversationKey(convo)
	if err != nil {
		s.Orphan = true
		return s
	}
	s.Key = key
	s.Orphan = name != ContainerName(r.opts.InstanceID, key) || (known != nil && !known[convo])
	r.mu.Lock()
	if b := r.boxes[convo]; b != nil {
		s.LastUsed = b.lastUse
	}
	r.mu.Unlock()
	if s.LastUsed.IsZero() && !s.Running && c.State != nil {
		if t, err := time.Parse(time.RFC3339Nano, c.State.FinishedAt); err == nil && t.Year() > 1 {
			s.LastUsed = t
		}
	}
	return s
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
func (r *Runtime) Inspect(ctx context.Context, ref string) (Details, error) {
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return Details{}, err
	}
	if t.found == nil {
		msg := fmt.Sprintf("conversation %s has no container now; one is created on its next use", t.key)
		if len(t.workspaces) > 0 {
			msg = fmt.Sprintf("conversation %s has no container now (its workspace %s is kept); one is created on its next use",
				t.key, strings.Join(t.workspaces, ", "))
		}
		return Details{}, conch.Errorf(conch.KindNotFound, "%s", msg)
	}
	return r.details(t.found), nil
}

func (r *Runtime) details(f *inspected) Details {
	c := f.c
	d := Details{Summary: f.s, Engine: r.info.Engine, Labels: map[string]string{}}
	if c.Config != nil {
		d.Image = c.Config.Image
		for k, v := range c.Config.Labels {
			d.Labels[k] = v
		}
		d.ProfileHash = c.Config.Labels[LabelProfileHash]
	}
	if c.State != nil {
		d.ExitCode, d.OOMKilled, d.Error = c.State.ExitCode, c.State.OOMKilled, c.State.Error
		if t, err := time.Parse(time.RFC3339Nano, c.State.StartedAt); err == nil && t.Year() > 1 {
			d.StartedAt = t
		}
		if t, err := time.Parse(time.RFC3339Nano, c.State.FinishedAt); err == nil && t.Year() > 1 {
			d.FinishedAt = t
		}
	}
	if e, ok := r.reg.get(f.s.Name); ok {
		d.AssignedFromPool = e.Assigned
	}
	for _, m := range c.Mounts {
		src := m.Name
		if src == "" {
			src = m.Source
		}
		d.Mounts = append(d.Mounts, Mount{Type: string(m.Type), Source: src, Destination: m.Destination, ReadOnly: !m.RW})
	}
	d.Hardening = engineSettings(c)
	d.HardeningProblems = r.profile.verify(r.info.Engine, r.seccomp, c)
	if d.HardeningProblems == nil {
		d.HardeningProblems = []string{}
	}
	return d
}

// engineSettings renders the confinement the engine reports for c.
func engineSettings(c container.InspectResponse) []Setting {
	hc := c.HostConfig
	if hc == nil || c.Config == nil {
		return []Setting{{"inspect", "the engine reported no HostConfig or Config"}}
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
	return []Setting{
		{"init user", c.Config.User}, // the tools run as Hardening.User (an exec option)
		{"read-only root", strconv.FormatBool(hc.ReadonlyRootfs)},
		{"privileged", strconv.FormatBool(hc.Privileged)},
		{"cap drop", list(hc.CapDrop)},
		{"cap add", list(hc.CapAdd)},
		{"security options", list(summarizeSecurityOpt(hc.SecurityOpt))},
		{"network", network},
		{"pids limit", pids},
		{"cpus", cpus},
		{"memory", bytesOrUnlimited(hc.Memory)},
		{"memory+swap", bytesOrUnlimited(hc.MemorySwap)},
		{"tmpfs", list(tmpfs)},
		{"init", init},
		{"ulimits", list(ulimits)},
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
