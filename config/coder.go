package config

import (
	"fmt"
	"strings"

	"conch/coders"
)

// validate checks [coder] against the coding CLIs of t.
func (c CoderConfig) validate(t coders.Table) []Problem {
	var ps []Problem
	add := func(key, msg, fix string) { ps = append(ps, Problem{key, msg, fix}) }
	cli, known := t.Lookup(c.Agent)
	if c.Agent != "" && !known {
		add("coder.agent", fmt.Sprintf("unknown coding agent %q", c.Agent), "use "+strings.Join(t.Names(), ", ")+", or leave it empty to disable the code tool")
	}
	if c.Agent != "" && c.APIKey == "" {
		add("coder.api_key", "the coding agent has no API key", "set CONCH_CODER_API_KEY (or "+providerKeyEnv(c.vendor(t))+") or [coder] api_key_file")
	}
	switch c.Approvals {
	case "auto", "ask", "person":
	default:
		add("coder.approvals", fmt.Sprintf("unknown approval mode %q", c.Approvals), "use auto (the CLI's full-auto mode inside the sandbox), ask (its permission prompts go to the model) or person (they go to the conversation's people as buttons)")
	}
	if known && !cli.CanAsk() && (c.Approvals == "ask" || c.Approvals == "person") {
		var askers []string
		for _, o := range t {
			if o.CanAsk() {
				askers = append(askers, o.Name)
			}
		}
		add("coder.approvals", fmt.Sprintf("%s cannot ask before its commands in conch's sandbox: %s, so every command would fail without a question", cli.Title, cli.NoAsk),
			fmt.Sprintf("use approvals = auto with %s (the container is the boundary), or %s to keep the permission prompts", cli.Title, strings.Join(askers, " or ")))
	}
	return ps
}

// Deprecations lists the keys that are set but no longer do anything, each
// with what to do instead, for conch to log as warnings at start. They are
// still accepted (unknown keys are fatal), so old files keep loading.
func (c *Config) Deprecations() []string {
	var out []string
	if len(c.Coder.Hosts) > 0 {
		out = append(out, fmt.Sprintf("coder.hosts (%s) is deprecated and ignored: the coding agent reaches only its own API, through conch's key-injecting egress; remove the key (and CONCH_CODER_HOSTS)", strings.Join(c.Coder.Hosts, ", ")))
	}
	if c.Sandbox.AgentBinary != "" && c.Sandbox.SandboxdBinary == "" {
		out = append(out, "sandbox.agent_binary is deprecated: it is now sandbox.sandboxd_binary (CONCH_SANDBOX_SANDBOXD_BINARY); the old key still works")
	}
	return out
}
