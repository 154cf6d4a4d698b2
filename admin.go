package conch

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// SandboxInfo is one sandbox as an operator sees it: `conch sandbox ls` and
// `inspect`, the /status line, the dashboard. Backends fill what they know;
// the renderers decide the wording.
type SandboxInfo struct {
	// Name is the backend's name for it (container or pod name).
	Name string `json:"name"`
	// ID is the backend's id (container id); ShortID gives 12 digits.
	ID string `json:"id"`
	// Key is its conversation; zero for a warm-pool or unknown sandbox.
	Key ConversationKey `json:"-"`
	// Conversation is Key as text, PoolConversation for an unassigned
	// warm-pool sandbox, or "" when none can be told.
	Conversation string `json:"conversation"`
	// Engine names the backend and its version ("docker 28.2.2",
	// "podman 4.3.1").
	Engine string `json:"engine"`
	// State is the backend's in Docker's words: created, running, paused,
	// restarting, exited (SandboxExited: stopped, started again on next use),
	// dead; "" when the backend reported none.
	State string `json:"state"`
	// Running is true for a running sandbox that is not paused.
	Running bool      `json:"running"`
	Created time.Time `json:"created"`
	// StartedAt and FinishedAt are when it last started and stopped; zero
	// when unknown.
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// ExitCode, OOMKilled and Error are about its last stop.
	ExitCode  int    `json:"exit_code"`
	OOMKilled bool   `json:"oom_killed"`
	Error     string `json:"error,omitempty"`
	// Pool marks an unassigned warm-pool sandbox. Orphan marks one whose
	// conversation cannot be told, whose name does not match its
	// conversation, or whose conversation the store no longer knows: prune
	// and reconcile remove it with its workspace.
	Pool   bool `json:"pool"`
	Orphan bool `json:"orphan"`
	// Image is the image reference it was created from; ImageHash that
	// image's definition hash; ImageCurrent whether a sandbox created now
	// would use the same.
	Image        string `json:"image,omitempty"`
	ImageHash    string `json:"image_hash"`
	ImageCurrent bool   `json:"image_current"`
	// ProfileCurrent says whether it was created with the hardening profile
	// and settings in use now.
	ProfileCurrent bool `json:"profile_current"`
	// Busy is true while a tool runs in it (as far as this process knows).
	Busy bool `json:"busy"`
	// LastUsed is when it was last used as far as this process knows, or
	// when it stopped; zero when unknown.
	LastUsed time.Time `json:"last_used,omitzero"`
	// Workspace names what is mounted at /workspace (volume, claim).
	Workspace string `json:"workspace"`
}

// PoolConversation is SandboxInfo.Conversation of an unassigned warm-pool
// sandbox.
const PoolConversation = "(pool)"

// SandboxExited is SandboxInfo.State of a stopped sandbox.
const SandboxExited = "exited"

// ShortID is the first 12 characters of the id.
func (s SandboxInfo) ShortID() string {
	if len(s.ID) > 12 {
		return s.ID[:12]
	}
	return s.ID
}

// Freshness is "current", or says what is stale: "stale image", "stale
// profile" or "stale image+profile".
func (s SandboxInfo) Freshness() string {
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

// SandboxDetails is everything `conch sandbox inspect` shows about one
// sandbox.
type SandboxDetails struct {
	SandboxInfo
	// ProfileHash identifies the hardening profile it was created with.
	ProfileHash string `json:"profile_hash"`
	// Hardening is the confinement as the backend reports it, in a fixed
	// order.
	Hardening []SandboxSetting `json:"hardening"`
	// HardeningProblems lists where the backend's settings differ from the
	// active profile; empty when all of it is in effect.
	HardeningProblems []string          `json:"hardening_problems"`
	Mounts            []SandboxMount    `json:"mounts"`
	Labels            map[string]string `json:"labels"`
	// AssignedFromPool is when a warm-pool sandbox was given to its
	// conversation; zero for one created for it.
	AssignedFromPool time.Time `json:"assigned_from_pool,omitzero"`
}

// SandboxSetting is one hardening setting as the backend reports it.
type SandboxSetting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SandboxMount is one of a sandbox's mounts.
type SandboxMount struct {
	Type        string `json:"type"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	ReadOnly    bool   `json:"read_only"`
}

// SandboxStats is a sandbox's resource use at one moment. A stopped sandbox
// uses nothing but its disk.
type SandboxStats struct {
	// CPUPercent is of one CPU (100 = one core busy).
	CPUPercent  float64 `json:"cpu_percent"`
	MemoryBytes int64   `json:"memory_bytes"`
	MemoryLimit int64   `json:"memory_limit"`
	// PIDs is the number of processes; PIDsLimit their limit (0: none or
	// unknown).
	PIDs      int64 `json:"pids"`
	PIDsLimit int64 `json:"pids_limit"`
	// DiskBytes is the workspace's size; -1 when unknown.
	DiskBytes int64 `json:"disk_bytes"`
	// DiskLimit is the workspace quota; 0 when none.
	DiskLimit int64 `json:"disk_limit"`
	// DiskQuotaMissing: the backend gives new workspaces a quota, but this
	// one was made without it.
	DiskQuotaMissing bool `json:"disk_quota_missing,omitempty"`
}

// AtPIDsLimit says too few processes are left to start a program: running
// one through the in-sandbox agent takes the engine's exec helper, the agent
// and its threads.
func (s SandboxStats) AtPIDsLimit() bool { return s.PIDsLimit > 0 && s.PIDs+4 > s.PIDsLimit }

// NoSandboxError is the answer (KindNotFound) about a conversation that has
// no sandbox now.
type NoSandboxError struct {
	Key ConversationKey
	// Workspaces are its kept workspaces; the sandbox made on its next use
	// mounts them.
	Workspaces []string
}

func (e *NoSandboxError) Error() string {
	if len(e.Workspaces) > 0 {
		return fmt.Sprintf("conversation %s has no container now (its workspace %s is kept); one is created on its next use",
			e.Key, strings.Join(e.Workspaces, ", "))
	}
	return fmt.Sprintf("conversation %s has no container now; one is created on its next use", e.Key)
}

// Unwrap makes it a KindNotFound *Error whose user text is its message.
func (e *NoSandboxError) Unwrap() error { return &Error{Kind: KindNotFound, User: e.Error()} }

// SandboxRefError is a reference (`conch sandbox inspect REF`) that names no
// sandbox of this instance, or more than one.
type SandboxRefError struct {
	Ref      string
	Instance string
	// Matches names the sandboxes an ambiguous ref matches.
	Matches []string
}

func (e *SandboxRefError) Error() string {
	if len(e.Matches) > 1 {
		return fmt.Sprintf("sandbox %q is ambiguous: it matches %s; give the full name or more of the id",
			e.Ref, strings.Join(e.Matches, ", "))
	}
	return fmt.Sprintf("no sandbox of instance %s matches %q (looked for a container name, a container id prefix "+
		"and a conversation key channel:id with a container, a workspace or a place in the store)", e.Instance, e.Ref)
}

// SandboxAdmin is the operator's view of a sandbox backend: what cmd, the
// gateway's /status, the dashboard and a future Kubernetes backend need, so
// none of them depends on a concrete runtime.
type SandboxAdmin interface {
	// Sandboxes lists every sandbox of this instance, warm-pool ones
	// included: conversations first (by key), then the pool.
	Sandboxes(ctx context.Context) ([]SandboxInfo, error)
	// SandboxInfo describes the sandbox of one conversation; KindNotFound
	// with a *NoSandboxError when it has none.
	SandboxInfo(ctx context.Context, key ConversationKey) (SandboxInfo, error)
	// Inspect describes the sandbox ref names: a container name, an id
	// prefix or a conversation key "channel:id". A ref that names none (or
	// several) is a *SandboxRefError (KindNotFound, or KindInvalid when
	// ambiguous); a conversation without a sandbox a *NoSandboxError.
	Inspect(ctx context.Context, ref string) (SandboxDetails, error)
	// SandboxStats reads a sandbox's resource use.
	SandboxStats(ctx context.Context, key ConversationKey) (SandboxStats, error)
	// Remove destroys the conversation's sandbox and its workspace.
	Remove(ctx context.Context, key ConversationKey) error
}

// SandboxCount is how many sandboxes are in one state (the engine's:
// running, exited, …) and of one kind: "conversation", "pool" or "orphan".
type SandboxCount struct {
	State, Kind string
	N           int
}

// SandboxCounter is a SandboxAdmin that counts its sandboxes from one
// listing, without looking at each one: what a metrics scrape asks, every
// few seconds. The counts agree with Sandboxes.
type SandboxCounter interface {
	SandboxCounts(ctx context.Context) ([]SandboxCount, error)
}

// Releaser holds something per conversation (a sandbox handle, terminals, an
// egress bridge). The owner that ends a conversation (reset, closed on its
// channel) calls Release on every holder, so nothing keeps a conversation
// that is gone.
type Releaser interface {
	Release(ctx context.Context, key ConversationKey) error
}

// ConversationState is where a conversation is, as read from the store.
type ConversationState string

// Conversation states.
const (
	ConversationIdle    ConversationState = "idle"
	ConversationRunning ConversationState = "running"
	ConversationQueued  ConversationState = "queued"
)

// ConversationSummary is one row of "every conversation with its state and
// last message" (the dashboard, `conch sandbox ls`, the web chat's list).
type ConversationSummary struct {
	Key ConversationKey `json:"-"`
	// Title is a name given to it (web chat); empty otherwise.
	Title string `json:"title,omitempty"`
	// LastSender wrote the last inbound message.
	LastSender  UserID            `json:"last_sender,omitempty"`
	LastMessage string            `json:"last_message"`
	LastRole    Role              `json:"last_role"`
	LastAt      time.Time         `json:"last_at"`
	State       ConversationState `json:"state"`
	// Pending counts turns not started yet.
	Pending int `json:"pending"`
	// LastError is why the last turn stopped with an error, if it did.
	LastError string `json:"last_error,omitempty"`
	Turns     int    `json:"turns"`
	// Tokens and CostUSD add up its model calls (input + output tokens),
	// also those before a reset.
	Tokens  int     `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
}

// AuditRecord is a stored audit event with its position.
type AuditRecord struct {
	ID int64 `json:"id"`
	AuditEvent
}

// ReadModel answers the questions operators and the web chat ask of the store.
type ReadModel interface {
	// ConversationSummaries lists conversations, most recently active first:
	// every one, or with keys those of them that exist.
	ConversationSummaries(ctx context.Context, keys ...ConversationKey) ([]ConversationSummary, error)
	// Turns returns a conversation's turns, newest first, at most limit.
	Turns(ctx context.Context, key ConversationKey, limit int) ([]Turn, error)
	// AuditSince returns audit records with id > after, oldest first, at most limit.
	AuditSince(ctx context.Context, after int64, limit int) ([]AuditRecord, error)
}
