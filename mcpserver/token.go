package mcpserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"conch"
)

// TokenPrefix starts every token, so that one found in a file or a log is
// recognisable (and secret scanners can be taught it).
const TokenPrefix = "conch_mcp_"

// idBytes and secretBytes are the sizes of a token's two random parts: the
// id names it (in listings, logs and revocation), the secret proves it.
const (
	idBytes     = 6
	secretBytes = 32
)

// NewToken makes a token for conversation key: the text to hand to the MCP
// client (shown once: the store keeps only its SHA-256) and the record to
// store. A zero expires means the token never expires.
func NewToken(key conch.ConversationKey, label string, now, expires time.Time) (string, conch.MCPToken, error) {
	if key.Channel == "" || key.ID == "" {
		return "", conch.MCPToken{}, conch.Errorf(conch.KindInvalid, "a token needs a conversation (channel:id)")
	}
	id := make([]byte, idBytes)
	secret := make([]byte, secretBytes)
	if _, err := rand.Read(id); err != nil {
		return "", conch.MCPToken{}, fmt.Errorf("new token: %w", err)
	}
	if _, err := rand.Read(secret); err != nil {
		return "", conch.MCPToken{}, fmt.Errorf("new token: %w", err)
	}
	rec := conch.MCPToken{
		ID:           hex.EncodeToString(id),
		Conversation: key,
		Label:        label,
		CreatedAt:    now,
		ExpiresAt:    expires,
	}
	tok := TokenPrefix + rec.ID + "_" + base64.RawURLEncoding.EncodeToString(secret)
	rec.SecretHash = HashToken(tok)
	return tok, rec, nil
}

// HashToken is what the store keeps of a token: its SHA-256, hex. A token
// carries 256 random bits, so a fast hash is enough.
func HashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// TokenID returns the id part of a token, or ok = false when tok does not
// have a token's form.
func TokenID(tok string) (id string, ok bool) {
	rest, found := strings.CutPrefix(tok, TokenPrefix)
	if !found {
		return "", false
	}
	id, secret, found := strings.Cut(rest, "_")
	if !found || len(id) != 2*idBytes || base64.RawURLEncoding.EncodedLen(secretBytes) != len(secret) {
		return "", false
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", false
	}
	return id, true
}
