package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"conch"
	sandboximage "conch/images/sandbox"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Paths inside every sandbox.
const (
	WorkspaceDir = "/workspace"
	// AgentDir is where the directory holding the agent binary is
	// bind-mounted read-only.
	AgentDir = sandboximage.AgentDir
)

// DefaultImage is the sandbox image used when none is configured.
const DefaultImage = "conch-sandbox:latest"

// Options configures a Runtime.
type Options struct {
	// Host is the engine API address; "" means detected (DetectHost).
	Host string
	// Engine is "", auto, docker or podman; a named engine must be the one
	// that answers.
	Engine string
	// InstanceID distinguishes conch instances sharing an engine; required.
	InstanceID string
	// Image is the sandbox image; "" means DefaultImage.
	Image string
	// AgentBinary is a static conch binary on the engine's host. It is
	// copied to DataDir/agent under a content-addressed name, that directory
	// is bind-mounted read-only at AgentDir, and the copy is started as
	// `conch sandbox-agent`. "" runs
	// every operation as its own Engine API exec instead (slower).
	AgentBinary string
	// DataDir holds the sandbox registry; required.
	DataDir string
	// CacheDir keeps the offline image build; "" means DataDir/cache.
	CacheDir string
	// Mirror is the Debian mirror of the offline image build; "" means the
	// host's apt mirror.
	Mirror string
	// Profile is the hardening; nil means DefaultHardening.
	Profile *Hardening
	// IdleStop stops a sandbox unused this long (workspace kept, restarted
	// on next use); 0 never stops.
	IdleStop time.Duration
	// Retention removes a stopped sandbox's container after this long
	// unused; its workspace volume is kept until Remove. 0 never removes.
	Retention time.Duration
	// SweepEvery is how often idle and retention are checked; 0 derives it.
	SweepEvery time.Duration
	// WarmPool keeps this many started, unassigned containers; a new
	// conversation takes one instead of waiting for a create.
	WarmPool int
	// Known lists the conversations the store knows; Reconcile removes the
	// sandboxes and workspaces of any other. nil treats every labelled
	// conversation as known.
	Known func(ctx context.Context) ([]conch.ConversationKey, error)
	// Audit, if set, receives sandbox_create and sandbox_remove events.
	Audit conch.AuditStore
	// BuildProgress, if set, receives progress lines of an image build
	// started on first use.
	BuildProgress func(string)
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// ExtraMounts are host directories mounted into every sandbox (mounts.go).
	ExtraMounts []BindMount
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Runtime manages the sandboxes of one conch instance in one engine.
type Runtime struct {
	opts    Options
	profile Hardening
	// specHash identifies everything a container's creation depended on
	// apart from the image: the profile and whether the agent is mounted.
	specHash string
	// agentName is the agent binary's name in AgentDir; "" without an agent.
	agentName string
	api       *client.Client
	info      Info
	log       *slog.Logger
	reg       *registry

	imageMu sync.Mutex
	image   imageState

	mu    sync.Mutex
	boxes map[string]*box // by conversation key
	pool  []poolEntry
	// poolFilling is true while a fill goroutine runs.
	poolFilling bool

	life   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

// box is one conversation's sandbox as the runtime tracks it.
type box struct {
	key  conch.ConversationKey
	name string
	// lock is held while the container is created, started, stopped or
	// removed; a channel so that waiting honours ctx.
	lock chan struct{}

	// Guarded by lock.
	id      string
	running bool
	volume  string
	ops     sandboxOps

	// Guarded by Runtime.mu.
	lastUse time.Time
	active  int
}

type poolEntry struct {
	name, id string
	// ops is the pool container's agent, started ahead so that the first
	// command of a conversation does not wait for it.
	ops sandboxOps
}

var _ conch.Runtime = (*Runtime)(nil)

// New connects to the engine. It does not touch containers: call Reconcile
// at start, then Sandbox.
func New(ctx context.Context, o Options) (*Runtime, error) {
	if o.InstanceID == "" {
		return nil, errors.New("sandbox runtime: no instance id")
	}
	if o.DataDir == "" {
		return nil, errors.New("sandbox runtime: no data dir")
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(o.DataDir, "cache")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.WarmPool < 0 || o.IdleStop < 0 || o.Retention < 0 {
		return nil, errors.New("sandbox runtime: negative warm pool, idle stop or retention")
	}
	prof := DefaultHardening()
	if o.Profile != nil {
		prof = *o.Profile
	}
	if err := prof.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox runtime: %w", err)
	}
	var agentName string
	if o.AgentBinary != "" {
		var err error
		if agentName, err = installAgent(o.AgentBinary, filepath.Join(o.DataDir, "agent")); err != nil {
			return nil, fmt.Errorf("sandbox runtime: agent binary: %w", err)
		}
	}
	if err := prepareMounts(o.ExtraMounts, o.DataDir, agentName != ""); err != nil {
		return nil, fmt.Errorf("sandbox runtime: %w", err)
	}
	host, err := DetectHost(o.Host, o.Engine, os.Getenv)
	if err != nil {
		return nil, err
	}
	api, info, err := dial(ctx, host, o.Engine)
	if err != nil {
		return nil, err
	}
	reg, err := openRegistry(filepath.Join(o.DataDir, "sandboxes.json"))
	if err != nil {
		api.Close()
		return nil, err
	}
	r := &Runtime{
		opts: o, profile: prof, api: api, info: info, reg: reg,
		log:       o.Logger.With("component", "sandbox", "engine", info.Engine),
		boxes:     map[string]*box{},
		specHash:  hash8(append([]string{prof.Hash(), strconv.FormatBool(agentName != "")}, mountsKey(o.ExtraMounts)...)...) + prof.Hash()[:4],
		agentName: agentName,
	}
	r.life, r.stop = context.WithCancel(context.Background())
	if every := r.sweepEvery(); every > 0 {
		r.wg.Add(1)
		go r.janitor(every)
	}
	return r, nil
}

func (r *Runtime) sweepEvery() time.Duration {
	if r.opts.SweepEvery > 0 {
		return r.opts.SweepEvery
	}
	var d time.Duration
	for _, x := range []time.Duration{r.opts.IdleStop, r.opts.Retention} {
		if x > 0 && (d == 0 || x < d) {
			d = x
		}
	}
	if d == 0 {
		return 0
	}
	return min(max(d/4, time.Second), time.Minute)
}

// Info describes the engine, for `conch doctor`.
func (r *Runtime) Info(ctx context.Context) (Info, error) {
	return identify(ctx, r.api, r.info.Host)
}

// Profile returns the hardening in use.
func (r *Runtime) Profile() Hardening { return r.profile }

// Close stops the janitor and drops the agent connections. Containers keep
// running: a restarted conch reattaches them.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	pool := r.pool
	r.pool = nil
	boxes := make([]*box, 0, len(r.boxes))
	for _, b := range r.boxes {
		boxes = append(boxes, b)
	}
	r.mu.Unlock()
	r.stop()
	r.wg.Wait()
	for _, p := range pool {
		if p.ops != nil {
			_ = p.ops.Close()
		}
	}
	for _, b := range boxes {
		b.lock <- struct{}{}
		b.closeOpsLocked()
		<-b.lock
	}
	return r.api.Close()
}

func (r *Runtime) boxFor(key conch.ConversationKey) *box {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.boxes[key.String()]
	if b == nil {
		b = &box{key: key, name: ContainerName(r.opts.InstanceID, key), lock: make(chan struct{}, 1)}
		r.boxes[key.String()] = b
	}
	return b
}

func (b *box) acquireLock(ctx context.Context) error {
	select {
	case b.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *box) unlock() { <-b.lock }

func (b *box) closeOpsLocked() {
	if b.ops != nil {
		_ = b.ops.Close()
		b.ops = nil
	}
}

// Sandbox returns the conversation's sandbox, creating its container on
// first use and restarting it after an idle stop.
func (r *Runtime) Sandbox(ctx context.Context, key conch.ConversationKey) (conch.Sandbox, error) {
	if key.IsZero() || key.Channel == "" || key.ID == "" {
		return nil, conch.Errorf(conch.KindInvalid, "a sandbox needs a conversation key with a channel and an id")
	}
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	b := r.boxFor(key)
	if err := b.acquireLock(ctx); err != nil {
		return nil, err
	}
	defer b.unlock()
	if err := r.ensureLocked(ctx, b); err != nil {
		return nil, err
	}
	r.touch(b, 0)
	return newSandbox(r, b), nil
}

func (r *Runtime) checkOpen() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("sandbox runtime is closed")
	}
	return nil
}

// touch records use of b and changes its count of operations in flight.
func (r *Runtime) touch(b *box, delta int) {
	r.mu.Lock()
	b.active += delta
	b.lastUse = r.opts.Now()
	r.mu.Unlock()
}

// ensureLocked makes b's container exist and run. b.lock is held.
func (r *Runtime) ensureLocked(ctx context.Context, b *box) error {
	if b.id != "" && b.running {
		return nil
	}
	if b.id == "" {
		c, err := r.api.ContainerInspect(ctx, b.name, client.ContainerInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
		case err != nil:
			return r.engineErr("inspect sandbox", err)
		default:
			if err := r.adoptLocked(ctx, b, c.Container); err != nil {
				return err
			}
		}
	}
	if b.id != "" {
		if b.running {
			return nil
		}
		_, err := r.api.ContainerStart(ctx, b.id, client.ContainerStartOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
			b.id = ""
		case err != nil:
			return r.engineErr("start sandbox "+b.name, err)
		default:
			b.running = true
			r.log.Info("sandbox restarted", "conversation", b.key.String(), "container", b.name)
			return nil
		}
	}
	return r.createLocked(ctx, b)
}

// adoptLocked takes over an existing container with b's name, or removes it
// when it is stale (another profile, dead, or stopped with an old image).
func (r *Runtime) adoptLocked(ctx context.Context, b *box, c container.InspectResponse) error {
	reason, err := r.staleReason(ctx, c)
	if err != nil {
		return err
	}
	if reason != "" {
		r.log.Info("removing stale sandbox", "container", b.name, "reason", reason)
		return r.removeContainer(ctx, c.ID, b.key, b.name, reason)
	}
	b.id = c.ID
	b.running = c.State != nil && c.State.Running
	b.volume = workspaceVolume(c)
	return nil
}

// staleReason says why an existing container must not be reused ("" when it may).
func (r *Runtime) staleReason(ctx context.Context, c container.InspectResponse) (string, error) {
	if c.Config == nil || c.State == nil {
		return "incomplete inspect", nil
	}
	labels := c.Config.Labels
	if labels[LabelInstance] != r.opts.InstanceID {
		return "", fmt.Errorf("container %s has our name but belongs to instance %q", c.Name, labels[LabelInstance])
	}
	if labels[LabelProfileHash] != r.specHash {
		return "created with another hardening profile or agent binary", nil
	}
	if bad := r.profile.verify(r.info.Engine, c); len(bad) > 0 {
		return "hardening not in effect: " + strings.Join(bad, "; "), nil
	}
	switch {
	case c.State.Running && !c.State.Paused:
		return "", nil
	case c.State.Status == container.StateExited:
		// A stopped container is restarted only when its image is current.
		img, err := r.currentImage(ctx)
		if err != nil {
			return "", err
		}
		if labels[LabelImageHash] != img.Hash {
			return "stopped with an older image", nil
		}
		return "", nil
	}
	return "state " + string(c.State.Status), nil
}

// currentImage returns the image new sandboxes use, building it if needed.
func (r *Runtime) currentImage(ctx context.Context) (imageState, error) {
	r.imageMu.Lock()
	st := r.image
	r.imageMu.Unlock()
	if st.ID != "" {
		return st, nil
	}
	if _, err := r.EnsureImage(ctx, r.opts.BuildProgress); err != nil {
		return imageState{}, err
	}
	r.imageMu.Lock()
	defer r.imageMu.Unlock()
	return r.image, nil
}

func workspaceVolume(c container.InspectResponse) string {
	for _, m := range c.Mounts {
		if m.Destination == WorkspaceDir && m.Name != "" {
			return m.Name
		}
	}
	return ""
}

// createLocked creates and starts b's container: from the warm pool when
// the conversation has no workspace yet, else fresh with its workspace.
func (r *Runtime) createLocked(ctx context.Context, b *box) error {
	vol := b.name
	if v, ok := r.reg.volumeOf(b.key); ok {
		vol = v
	}
	exists, err := r.volumeExists(ctx, vol)
	if err != nil {
		return err
	}
	if !exists {
		if ok, err := r.assignFromPool(ctx, b); ok || err != nil {
			return err
		}
		vol = b.name
	}
	img, err := r.currentImage(ctx)
	if err != nil {
		return err
	}
	labels := map[string]string{LabelInstance: r.opts.InstanceID, LabelConversation: b.key.String()}
	if !exists {
		if _, err := r.api.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: labels}); err != nil {
			return r.engineErr("create workspace volume "+vol, err)
		}
	}
	start := r.opts.Now()
	id, err := r.createContainer(ctx, b.name, vol, img, labels)
	if err != nil {
		return err
	}
	b.id, b.running, b.volume = id, true, vol
	r.log.Info("sandbox created", "conversation", b.key.String(), "container", b.name, "id", shortID(id),
		"volume", vol, "took", r.opts.Now().Sub(start).Round(time.Millisecond))
	r.audit(ctx, "sandbox_create", b.key, map[string]any{"container": b.name, "id": id, "volume": vol,
		"image": img.Hash, "engine": r.info.Engine, "profile": r.specHash})
	return nil
}

// createContainer creates, verifies and starts one container; on any
// failure the container is removed again.
func (r *Runtime) createContainer(ctx context.Context, name, vol string, img imageState, labels map[string]string) (id string, err error) {
	hc, err := r.profile.hostConfig(r.info.Engine)
	if err != nil {
		return "", err
	}
	hc.Binds = []string{vol + ":" + WorkspaceDir}
	if r.agentName != "" {
		hc.Binds = append(hc.Binds, filepath.Join(r.opts.DataDir, "agent")+":"+AgentDir+":ro")
	}
	hc.Binds = append(hc.Binds, mountBinds(r.opts.ExtraMounts)...)
	all := map[string]string{LabelImageHash: img.Hash, LabelProfileHash: r.specHash}
	for k, v := range labels {
		all[k] = v
	}
	cfg := &container.Config{
		Image:      r.opts.Image,
		User:       r.profile.User,
		WorkingDir: WorkspaceDir,
		Cmd:        slices.Clone(sandboximage.Cmd),
		Hostname:   "sandbox",
		Labels:     all,
	}
	// Not cancelled once begun: an engine interrupted halfway through a
	// create can leave a half-made container (Podman 4 then fails every
	// listing). A caller that gave up finds the sandbox ready next time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	res, err := r.api.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		return "", r.engineErr("create sandbox "+name, err)
	}
	id = res.ID
	defer func() {
		if err != nil {
			_, _ = r.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
		}
	}()
	for _, w := range res.Warnings {
		r.log.Warn("engine warning on sandbox create", "container", name, "warning", w)
	}
	ins, err := r.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", r.engineErr("inspect new sandbox "+name, err)
	}
	if bad := r.profile.verify(r.info.Engine, ins.Container); len(bad) > 0 {
		if len(res.Warnings) > 0 {
			bad = append(bad, "engine warnings: "+strings.Join(res.Warnings, " | "))
		}
		return "", &conch.Error{Kind: conch.KindUnavailable, User: "the container engine did not apply the sandbox hardening",
			Err: &HardeningMismatchError{Container: name, Engine: r.info.Engine, Settings: bad}}
	}
	if _, err := r.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return "", r.engineErr("start new sandbox "+name, err)
	}
	return id, nil
}

func (r *Runtime) volumeExists(ctx context.Context, name string) (bool, error) {
	_, err := r.api.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, r.engineErr("inspect volume "+name, err)
}

// removeContainer force-removes a container (its workspace volume stays).
func (r *Runtime) removeContainer(ctx context.Context, id string, key conch.ConversationKey, name, reason string) error {
	_, err := r.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return r.engineErr("remove sandbox "+name, err)
	}
	r.audit(ctx, "sandbox_remove", key, map[string]any{"container": name, "id": id, "reason": reason, "engine": r.info.Engine})
	return nil
}

func (r *Runtime) removeVolume(ctx context.Context, name string) error {
	_, err := r.api.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
	if cerrdefs.IsConflict(err) {
		// In use by a container we do not track (one being created as we
		// look); the next reconcile sees it settled.
		r.log.Info("volume in use, not removed", "volume", name)
		return nil
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		return r.engineErr("remove workspace volume "+name, err)
	}
	return nil
}

// Remove destroys the conversation's sandbox and its workspace.
func (r *Runtime) Remove(ctx context.Context, key conch.ConversationKey) error {
	if key.IsZero() {
		return conch.Errorf(conch.KindInvalid, "no conversation given")
	}
	b := r.boxFor(key)
	if err := b.acquireLock(ctx); err != nil {
		return err
	}
	defer b.unlock()
	b.closeOpsLocked()
	target := b.id
	if target == "" {
		target = b.name
	}
	if err := r.removeContainer(ctx, target, key, b.name, "removed"); err != nil {
		return err
	}
	vols := []string{b.name}
	if b.volume != "" {
		vols = append(vols, b.volume)
	}
	if v, ok := r.reg.volumeOf(key); ok {
		vols = append(vols, v)
	}
	slices.Sort(vols)
	for _, v := range slices.Compact(vols) {
		if err := r.removeVolume(ctx, v); err != nil {
			return err
		}
	}
	if err := r.reg.delete(b.name); err != nil {
		return err
	}
	b.id, b.running, b.volume = "", false, ""
	r.mu.Lock()
	delete(r.boxes, key.String())
	r.mu.Unlock()
	r.log.Info("sandbox removed", "conversation", key.String(), "container", b.name)
	return nil
}

// Sweep stops sandboxes idle longer than IdleStop and removes the
// containers of those unused longer than Retention (their workspaces stay).
// The janitor calls it periodically; tests call it with an injected clock.
func (r *Runtime) Sweep(ctx context.Context) error {
	now := r.opts.Now()
	r.mu.Lock()
	boxes := make([]*box, 0, len(r.boxes))
	for _, b := range r.boxes {
		boxes = append(boxes, b)
	}
	r.mu.Unlock()
	var errs []error
	for _, b := range boxes {
		select {
		case b.lock <- struct{}{}:
		default:
			continue // busy: in use, so not idle
		}
		r.mu.Lock()
		idle, active := now.Sub(b.lastUse), b.active
		r.mu.Unlock()
		if active == 0 {
			errs = append(errs, r.sweepLocked(ctx, b, idle))
		}
		b.unlock()
	}
	return errors.Join(errs...)
}

func (r *Runtime) sweepLocked(ctx context.Context, b *box, idle time.Duration) error {
	if b.id == "" {
		return nil
	}
	if b.running && r.opts.IdleStop > 0 && idle >= r.opts.IdleStop {
		b.closeOpsLocked()
		timeout := 2
		if _, err := r.api.ContainerStop(ctx, b.id, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
			return r.engineErr("stop idle sandbox "+b.name, err)
		}
		b.running = false
		r.log.Info("idle sandbox stopped", "conversation", b.key.String(), "container", b.name, "idle", idle.Round(time.Second))
	}
	if !b.running && r.opts.Retention > 0 && idle >= r.opts.Retention {
		if err := r.removeContainer(ctx, b.id, b.key, b.name, "retention"); err != nil {
			return err
		}
		b.id = ""
		r.log.Info("unused sandbox removed, workspace kept", "conversation", b.key.String(), "container", b.name)
	}
	return nil
}

func (r *Runtime) janitor(every time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.life.Done():
			return
		case <-t.C:
			if err := r.Sweep(r.life); err != nil && r.life.Err() == nil {
				r.log.Warn("sandbox sweep", "err", err)
			}
		}
	}
}

func (r *Runtime) audit(ctx context.Context, kind string, key conch.ConversationKey, detail map[string]any) {
	if r.opts.Audit == nil {
		return
	}
	d, err := json.Marshal(detail)
	if err != nil {
		r.log.Error("audit event", "kind", kind, "err", err)
		return
	}
	if err := r.opts.Audit.Audit(context.WithoutCancel(ctx), conch.AuditEvent{At: r.opts.Now(), Kind: kind, Conversation: key, Detail: d}); err != nil {
		r.log.Error("audit event", "kind", kind, "err", err)
	}
}

// engineErr wraps an engine failure: unreachable engines are KindUnavailable.
func (r *Runtime) engineErr(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var ce *conch.Error
	if errors.As(err, &ce) {
		return fmt.Errorf("%s: %w", op, err)
	}
	kind := conch.KindInternal
	if client.IsErrConnectionFailed(err) || cerrdefs.IsUnavailable(err) {
		kind = conch.KindUnavailable
	}
	return &conch.Error{Kind: kind, User: "the sandbox could not be prepared", Err: fmt.Errorf("%s: %w", op, err)}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
