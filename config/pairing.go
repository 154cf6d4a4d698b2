package config

import "fmt"

// Who may talk to conch on a channel, besides its allowlist (dm_policy).
const (
	// DMAllowlist: only the allowlist (the default).
	DMAllowlist = "allowlist"
	// DMPairing: an unknown sender gets a one-time code; an operator
	// approves it with `conch pairing approve CODE`.
	DMPairing = "pairing"
	// DMOpen: everyone.
	DMOpen = "open"
)

// validDMPolicy checks <section>.dm_policy.
func validDMPolicy(section, v string) []Problem {
	switch v {
	case "", DMAllowlist, DMPairing, DMOpen:
		return nil
	}
	return []Problem{{section + ".dm_policy", fmt.Sprintf("%q is not a policy", v),
		"use allowlist (only allow_from), pairing (unknown senders get a code to approve with `conch pairing approve`) or open (everyone)"}}
}
