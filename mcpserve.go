package conch

import (
	"context"
	"time"
)

// conch as an MCP server: an MCP client (Claude Code, Claude Desktop,
// Cursor) on a person's laptop works in one conversation's computer through
// a bearer token bound to that conversation (mcpserver/, `conch mcp token`).

// MCPToken is one token of conch's MCP server as the store keeps it: the
// secret itself is never kept, only its SHA-256.
type MCPToken struct {
	// ID names the token in listings and revocation; it is also the
	// token's first part, so a presented token is looked up by it.
	ID string
	// SecretHash is the SHA-256 (hex) of the whole token.
	SecretHash string
	// Conversation is the one conversation whose computer the token opens.
	Conversation ConversationKey
	// Label says what the token is for ("laptop claude code").
	Label     string
	CreatedAt time.Time
	// ExpiresAt is when it stops working; zero means never.
	ExpiresAt time.Time
	// LastUsed is when a request last presented it (kept at a minute's
	// resolution); zero means never.
	LastUsed time.Time
}

// Expired reports whether the token has expired at now.
func (t MCPToken) Expired(now time.Time) bool {
	return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)
}

// MCPTokenStore keeps the MCP server's tokens. A revoked token is deleted,
// so the next request that presents it finds nothing.
type MCPTokenStore interface {
	CreateMCPToken(ctx context.Context, t MCPToken) error
	// MCPToken returns the token with id; ok is false when there is none.
	MCPToken(ctx context.Context, id string) (t MCPToken, ok bool, err error)
	// MCPTokens lists the tokens, oldest first.
	MCPTokens(ctx context.Context) ([]MCPToken, error)
	// RevokeMCPToken deletes the token with id; it reports whether there was one.
	RevokeMCPToken(ctx context.Context, id string) (bool, error)
	// TouchMCPToken records a use at now.
	TouchMCPToken(ctx context.Context, id string, now time.Time) error
}

// Audit kinds of the MCP server.
const (
	AuditMCPServeCall   AuditKind = "mcp_serve_call"   // an MCP client called a tool of conch's MCP server
	AuditMCPTokenIssue  AuditKind = "mcp_token_issue"  // `conch mcp token` issued a token
	AuditMCPTokenRevoke AuditKind = "mcp_token_revoke" // a token of the MCP server was revoked
)
