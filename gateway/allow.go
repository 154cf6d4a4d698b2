package gateway

import (
	"strings"

	"conch"
)

// Allowlist says which senders of a channel are served.
type Allowlist struct {
	all bool
	ids map[conch.UserID]bool
}

// NewAllowlist returns an allowlist of the given ids; "*" allows everyone.
// Matching ignores case, as Matrix ids and email addresses are compared
// case-insensitively by people.
func NewAllowlist(ids ...string) Allowlist {
	a := Allowlist{ids: make(map[conch.UserID]bool, len(ids))}
	for _, id := range ids {
		id = strings.ToLower(strings.TrimSpace(id))
		switch id {
		case "":
		case "*":
			a.all = true
		default:
			a.ids[conch.UserID(id)] = true
		}
	}
	return a
}

// Allows reports whether id may talk to conch.
func (a Allowlist) Allows(id conch.UserID) bool {
	return a.all || a.ids[conch.UserID(strings.ToLower(string(id)))]
}

// Empty reports whether nobody is allowed.
func (a Allowlist) Empty() bool { return !a.all && len(a.ids) == 0 }
