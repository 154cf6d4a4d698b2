package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxToolName is the longest tool name every provider conch speaks to
// accepts (OpenAI and Gemini: 64).
const MaxToolName = 64

// Prefix starts the name of every tool an MCP server offers. No built-in
// tool starts with it, so a server cannot shadow one (a server's "bash" is
// mcp__<server>__bash).
const Prefix = "mcp__"

// ToolName is the name the model sees for tool of server:
// mcp__<server>__<tool>, kept to the one charset every provider accepts
// ([a-zA-Z0-9_-], starting with a letter: Gemini's rule is the narrowest)
// and to MaxToolName characters. A name that had to be changed (characters
// replaced, or shortened) ends in "_" and 8 hex digits of a hash of the
// server's and the tool's own names, so that two tools never share one and
// a name is the same at every start.
func ToolName(server, tool string) string {
	clean := sanitize(tool)
	name := Prefix + server + "__" + clean
	if clean == tool && len(name) <= MaxToolName {
		return name
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(name)+len(suffix) > MaxToolName {
		name = name[:MaxToolName-len(suffix)]
	}
	return name + suffix
}

// sanitize replaces every character outside [a-zA-Z0-9_-] by '_'.
func sanitize(s string) string {
	if s == "" {
		return "_"
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
