package config

import (
	"fmt"
	"strings"
)

// validateApprovals checks tools.approve and tools.approval_timeout.
func (c *Config) validateApprovals() []Problem {
	var ps []Problem
	for _, p := range c.Tools.Approve {
		if p = strings.TrimSpace(p); p == "" || p == "*" {
			ps = append(ps, Problem{"tools.approve", fmt.Sprintf("%q is not a command pattern", p), `name the program and its words, e.g. "git push *" or "rm -rf *"`})
		}
	}
	if c.Tools.ApprovalTimeout.D() <= 0 {
		ps = append(ps, Problem{"tools.approval_timeout", "must be positive", `set how long a question waits before it is denied, e.g. "10m"`})
	}
	return ps
}
