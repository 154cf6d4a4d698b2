package conch

// MCPServerStatus is one configured MCP server as the operator sees it
// (the dashboard): its tools and how many conversations have it running or
// down.
type MCPServerStatus struct {
	Name string `json:"name"`
	// Kind is stdio (one instance per conversation, in its sandbox) or
	// remote (one connection for all).
	Kind string `json:"kind"`
	// Tools is how many tools it offers (0 until it first started).
	Tools int `json:"tools"`
	// Ready and Down count its live and failed connections.
	Ready int `json:"ready"`
	Down  int `json:"down"`
	// LastError is the newest failure of a connection that is down.
	LastError string `json:"last_error,omitempty"`
	Restarts  int    `json:"restarts"`
}
