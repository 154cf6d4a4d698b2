package conch

import (
	"context"
	"time"
)

// SandboxInfo is one sandbox as an operator sees it (`conch sandbox ls`, the
// dashboard). Backends fill what they know.
type SandboxInfo struct {
	// Name is the backend's name for it (container or pod name).
	Name string `json:"name"`
	// ID is the backend's id (container id).
	ID string `json:"id"`
	// Key is its conversation; zero for a warm-pool or unknown sandbox.
	Key ConversationKey `json:"-"`
	// Conversation is Key as text, or a marker such as "(pool)".
	Conversation string `json:"conversation"`
	// Engine names the backend ("docker 28.2.2", "podman 4.3.1").
	Engine string `json:"engine"`
	// State is the backend's: running, exited, created, paused, …
	State   string    `json:"state"`
	Running bool      `json:"running"`
	Created time.Time `json:"created"`
	// Pool marks an unassigned warm-pool sandbox; Orphan one whose
	// conversation is unknown (prune removes it).
	Pool   bool `json:"pool"`
	Orphan bool `json:"orphan"`
	// Image is what it was created from.
	Image string `json:"image,omitempty"`
}

// SandboxStats is a sandbox's resource use at one moment.
type SandboxStats struct {
	// CPUPercent is of one CPU (100 = one core busy).
	CPUPercent  float64 `json:"cpu_percent"`
	MemoryBytes int64   `json:"memory_bytes"`
	MemoryLimit int64   `json:"memory_limit"`
	PIDs        int64   `json:"pids"`
	// DiskBytes is the workspace's size; -1 when unknown.
	DiskBytes int64 `json:"disk_bytes"`
	// DiskLimit is the workspace quota; 0 when none.
	DiskLimit int64 `json:"disk_limit"`
}

// SandboxAdmin is the operator's view of a sandbox backend: what cmd, the
// dashboard and a future Kubernetes backend need, so none of them depends on
// a concrete runtime.
type SandboxAdmin interface {
	// Sandboxes lists every sandbox of this instance.
	Sandboxes(ctx context.Context) ([]SandboxInfo, error)
	// SandboxInfo describes the sandbox of one conversation; KindNotFound
	// when it has none.
	SandboxInfo(ctx context.Context, key ConversationKey) (SandboxInfo, error)
	// SandboxStats reads a sandbox's resource use.
	SandboxStats(ctx context.Context, key ConversationKey) (SandboxStats, error)
	// Remove destroys the conversation's sandbox and its workspace.
	Remove(ctx context.Context, key ConversationKey) error
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
	// ConversationSummaries lists conversations, most recently active first.
	ConversationSummaries(ctx context.Context) ([]ConversationSummary, error)
	// Turns returns a conversation's turns, newest first, at most limit.
	Turns(ctx context.Context, key ConversationKey, limit int) ([]Turn, error)
	// AuditSince returns audit records with id > after, oldest first, at most limit.
	AuditSince(ctx context.Context, after int64, limit int) ([]AuditRecord, error)
}
