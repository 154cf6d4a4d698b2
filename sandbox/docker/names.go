package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"conch"
)

// Labels on everything conch creates in the engine.
const (
	LabelInstance     = "conch.instance"
	LabelConversation = "conch.conversation"
	LabelImageHash    = "conch.image-hash"
	// LabelProfileHash is a hash over the hardening profile a container was
	// created with; a container from another profile is stale.
	LabelProfileHash = "conch.profile-hash"
	// LabelPool marks a warm-pool container or volume (value "1"). Labels
	// cannot change, so a pool container keeps it after it is assigned;
	// the assignment lives in its new name and the registry.
	LabelPool = "conch.pool"
)

const maxSlug = 40

// Slug renders s the way the seed did, for readability only: lower case,
// every run of other characters than [a-z0-9] becomes one dash, no dashes at
// the ends, at most 40 characters. Different inputs may share a slug; names
// add a hash for that.
func Slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			if b.Len() >= maxSlug {
				break
			}
			continue
		}
		dash = true
	}
	out := strings.TrimRight(b.String(), "-")
	if out == "" {
		out = "x"
	}
	return out
}

// hash8 is 8 hex digits of SHA-256 over the parts, each length-prefixed so
// that no two part lists collide by concatenation.
func hash8(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		for i, l := 0, len(p); i < 8; i, l = i+1, l>>8 {
			n[i] = byte(l)
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}

// ContainerName is the name of the conversation's container (and of its
// workspace volume when created for it): conch-<slug>-<hash8>, the hash over
// the instance id and the conversation key, so two conversations or two
// instances never share a container.
func ContainerName(instance string, key conch.ConversationKey) string {
	return "conch-" + Slug(string(key.Channel)+"-"+key.ID) + "-" + hash8(instance, key.String())
}

// poolPrefix starts the names of the instance's unassigned pool containers.
func poolPrefix(instance string) string { return "conch-pool-" + hash8(instance, "pool") + "-" }
