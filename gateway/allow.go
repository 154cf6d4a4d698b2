package gateway

import (
	"strings"

	"conch"
)

// Allowlist says which senders of a channel are served. It is the one rule
// for every channel (admission asks it, channels never match ids
// themselves):
//
//   - "*" allows everyone;
//   - "@domain" (an @ and no colon) allows every address at that domain
//     ("alice@example.org" by "@example.org"), and a Telegram @username
//     that is exactly the entry;
//   - anything else is one id.
//
// Matching ignores case, as Matrix ids, email addresses and Telegram
// usernames are compared case-insensitively by people.
type Allowlist struct {
	all     bool
	ids     map[conch.UserID]bool
	domains map[string]bool // "@example.org"
}

// NewAllowlist returns an allowlist of the given entries.
func NewAllowlist(ids ...string) Allowlist {
	a := Allowlist{ids: make(map[conch.UserID]bool, len(ids)), domains: make(map[string]bool)}
	for _, id := range ids {
		id = strings.ToLower(strings.TrimSpace(id))
		switch {
		case id == "":
		case id == "*":
			a.all = true
		case isDomainEntry(id):
			a.domains[id] = true
			a.ids[conch.UserID(id)] = true
		default:
			a.ids[conch.UserID(id)] = true
		}
	}
	return a
}

func isDomainEntry(e string) bool {
	return len(e) > 1 && e[0] == '@' && !strings.ContainsAny(e[1:], "@:")
}

// Allows reports whether id may talk to conch.
func (a Allowlist) Allows(id conch.UserID) bool {
	s := strings.ToLower(string(id))
	if a.all || a.ids[conch.UserID(s)] {
		return true
	}
	// An address at an allowed domain: the part from its last @ (never the
	// leading @ of a Matrix id or a username).
	if i := strings.LastIndexByte(s, '@'); i > 0 {
		return a.domains[s[i:]]
	}
	return false
}

// Empty reports whether nobody is allowed.
func (a Allowlist) Empty() bool { return !a.all && len(a.ids) == 0 }
