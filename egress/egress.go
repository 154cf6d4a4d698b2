// Package egress is how a coding-agent CLI in a network-less sandbox
// reaches its API. The sandbox stays on network none: a Bridge carries
// connections made to a port on the sandbox's loopback to a server on the
// host, over the sandbox's Exec streams.
//
// The server the coding agent's bridge leads to is an Injector: a reverse
// proxy for one API that takes plain HTTP from the CLI (which holds only
// PlaceholderKey), puts the real key on each request and forwards it over
// HTTPS, so the key never enters the sandbox.
//
// A Bridge serves any connection (ConnServer), so the transport that
// carries a sandbox connection to the host is independent of the server.
package egress

import "time"

// Event describes one request to an Injector.
type Event struct {
	// Target is the request's host and path (never the query).
	Target  string
	Method  string
	Allowed bool
	Reason  string // why it was refused, or how forwarding failed
	Status  int    // the status the Injector answered with
	Up      int64  // bytes client → upstream
	Down    int64  // bytes upstream → client
	Elapsed time.Duration
}
