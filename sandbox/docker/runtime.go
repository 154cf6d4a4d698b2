package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"conch"
	sandboximage "conch/images/sandbox"
	"conch/npmpin"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Paths inside every sandbox.
const (
	WorkspaceDir = "/workspace"
	// AgentDir is where the directory holding the sandboxd binary is
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
	// SandboxdBinary is a static conch binary on the engine's host. It is
	// copied to DataDir/agent under a content-addressed name, that directory
	// is bind-mounted read-only at AgentDir, and the copy is started as
	// `conch sandbox-agent`. "" runs
	// every operation as its own Engine API exec instead (slower).
	SandboxdBinary string
	// Transport is how conch reaches each sandbox's agent: "socket" (a unix
	// socket bind-mounted into the container, dialled directly), "exec"
	// (one Engine API exec per connection, relayed by the engine), or ""
	// / "auto": socket for an engine on this machine, exec otherwise.
	Transport string
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
	// Disk is each workspace's size limit in bytes (its own ext4 image
	// under DataDir/workspaces on Podman, an xfs project quota on Docker,
	// see quota.go); 0 means none. An engine that cannot enforce it makes
	// New fail (ErrNoDiskQuota).
	Disk int64
	// DiskAuto: Disk is the default, not the operator's choice; an engine
	// that cannot enforce it runs without a quota (with a warning) instead
	// of refusing to start.
	DiskAuto bool
	// WarmPool keeps this many started, unassigned containers; a new
	// conversation takes one instead of waiting for a create.
	WarmPool int
	// Known lists the conversations the store knows; Reconcile removes the
	// sandboxes and workspaces of any other. nil treats every labelled
	// conversation as known.
	Known func(ctx context.Context) ([]conch.ConversationKey, error)
	// Audit, if set, receives sandbox_create and sandbox_remove events.
	Audit conch.AuditStore
	// Agents are coding-agent CLIs (claude, codex, gemini) new sandboxes
	// get: a derived image with them is built on the configured image
	// (agents.go) on first use. Empty means the configured image as it is.
	Agents []string
	// Installs are further pinned npm packages new sandboxes get in the
	// same derived image (the MCP servers' stdio packages; installs.go).
	Installs []npmpin.Install
	// NPMRegistry is the npm registry the CLIs' tarballs are downloaded
	// from; "" means https://registry.npmjs.org. Every tarball is checked
	// against its pinned integrity whatever the registry.
	NPMRegistry string
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
	// seccomp is the SecurityOpt carrying the seccomp profile on this
	// engine ("" when the profile asks for none).
	seccomp string
	// agentName is the sandboxd binary's name in AgentDir; "" without an agent.
	agentName string
	// transport is TransportSocket or TransportExec (transport.go).
	transport string
	// launched is when this conch last launched each socket directory's
	// agent (transport.go).
	launched map[string]launch
	// disk is how workspaces are limited (quota.go).
	disk diskMode
	api  engineAPI
	info Info
	log  *slog.Logger
	reg  *registry

	// agents are Options.Agents, validated.
	agents []sandboximage.Agent

	imageMu sync.Mutex
	image   imageState

	mu    sync.Mutex
	boxes map[string]*box // by conversation key
	// names are the instance's container names, nil until a Reconcile
	// listed them (known.go).
	names map[string]bool
	pool  []poolEntry
	// poolFilling is true while a fill goroutine runs.
	poolFilling bool
	// fillMu serialises FillPool (see there).
	fillMu sync.Mutex

	life   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

var _ conch.Runtime = (*Runtime)(nil)

// New connects to the engine. It does not touch containers: call Reconcile
// at start, then Sandbox.
func New(ctx context.Context, o Options) (*Runtime, error) {
	o, prof, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	var agentName string
	if o.SandboxdBinary != "" {
		if agentName, err = installSandboxd(o.SandboxdBinary, filepath.Join(o.DataDir, "agent")); err != nil {
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
	r, err := start(ctx, o, prof, agentName, api, info)
	if err != nil {
		api.Close()
		return nil, err
	}
	return r, nil
}

// withDefaults checks o and fills in its defaults; it returns the hardening
// to use.
func (o Options) withDefaults() (Options, Hardening, error) {
	if o.InstanceID == "" {
		return o, Hardening{}, errors.New("sandbox runtime: no instance id")
	}
	if o.DataDir == "" {
		return o, Hardening{}, errors.New("sandbox runtime: no data dir")
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
	if o.WarmPool < 0 || o.IdleStop < 0 || o.Retention < 0 || o.Disk < 0 {
		return o, Hardening{}, errors.New("sandbox runtime: negative warm pool, idle stop, retention or disk")
	}
	prof := DefaultHardening()
	if o.Profile != nil {
		prof = *o.Profile
	}
	if err := prof.Validate(); err != nil {
		return o, Hardening{}, fmt.Errorf("sandbox runtime: %w", err)
	}
	return o, prof, nil
}

// start builds the Runtime over a connected engine and starts its janitor.
// Unit tests call it with a fake engine.
func start(ctx context.Context, o Options, prof Hardening, agentName string, api engineAPI, info Info) (*Runtime, error) {
	disk, err := diskModeFor(ctx, o, info.Engine, api)
	if err != nil {
		if !o.DiskAuto || !errors.Is(err, ErrNoDiskQuota) {
			return nil, err
		}
		o.Logger.Warn("workspaces have no size limit: this engine cannot enforce one here (Podman can, and Docker with its data root on xfs mounted with prjquota); set sandbox.disk = \"0\" to silence this", "engine", info.Engine, "err", err)
		o.Disk = 0
	}
	as, err := o.installs()
	if err != nil {
		return nil, err
	}
	reg, err := openRegistry(filepath.Join(o.DataDir, "sandboxes.json"))
	if err != nil {
		return nil, err
	}
	transport, err := transportFor(o.Transport, info.Host)
	if err != nil {
		return nil, fmt.Errorf("sandbox runtime: %w", err)
	}
	spec := append([]string{prof.Hash(), strconv.FormatBool(agentName != "")}, mountsKey(o.ExtraMounts)...)
	if agentName != "" && transport == TransportSocket {
		// Containers made for the exec transport have no socket mount.
		spec = append(spec, "transport "+transport)
	}
	var sc string
	if prof.Seccomp {
		if sc, err = seccompOpt(info.Engine, o.DataDir); err != nil {
			return nil, err
		}
		// A new profile (a newer moby/profiles) replaces containers once.
		spec = append(spec, "seccomp "+SeccompDigest())
	}
	r := &Runtime{
		opts: o, profile: prof, api: api, info: info, reg: reg, agents: as,
		log:       o.Logger.With("component", "sandbox", "engine", info.Engine),
		boxes:     map[string]*box{},
		specHash:  hash8(spec...) + prof.Hash()[:4],
		seccomp:   sc,
		agentName: agentName,
		transport: transport,
		launched:  map[string]launch{},
		disk:      disk,
	}
	r.life, r.stop = context.WithCancel(context.Background())
	if every := r.sweepEvery(); every > 0 {
		r.wg.Add(1)
		go r.janitor(every)
	}
	return r, nil
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

func (r *Runtime) checkOpen() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("sandbox runtime is closed")
	}
	return nil
}

func (r *Runtime) audit(ctx context.Context, kind conch.AuditKind, key conch.ConversationKey, detail map[string]any) {
	if err := conch.RecordAudit(ctx, r.opts.Audit, r.opts.Now(), kind, key, detail); err != nil {
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
